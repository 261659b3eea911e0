"""The command line. The only module that prints or exits."""

from __future__ import annotations

import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from abricot_local import __version__
from abricot_local.backends import BACKENDS, DEFAULT_BACKEND
from abricot_local.backends.engines import ENGINES
from abricot_local.core import DEFAULT_ENGINE, DEFAULT_N_BATCH, DEFAULT_N_CTX, DEFAULT_SEED
from abricot_local.errors import AbricotError, UsageError


class Group(click.Group):
    """Turns every AbricotError into a one-line message and a non-zero exit."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AbricotError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="abricot-local")
def cli() -> None:
    """Evaluate local GGUF models (llama.cpp) on Italian benchmarks (ABRICOT, DISCOTEX, plugins)."""


def main() -> None:
    cli(prog_name="abricot-local")


# -- shared options ------------------------------------------------------------------------
def _data_pairs(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for v in values:
        task, sep, path = v.partition("=")
        if not sep or not task or not path:
            raise UsageError(f"--data expects TASK=PATH, got {v!r}")
        pairs.append((task.strip().lower(), path))
    return tuple(pairs)


def task_options(f):
    opts = [
        click.option("--tasks", "-t", default=None, help="Comma-separated tasks or groups (default: every task "
                     "whose data is here or can be fetched; `abricot-local tasks` lists them)."),
        click.option("--data", "data", multiple=True, metavar="TASK=PATH", help="Data file or folder for one task."),
        click.option("--data-dir", type=click.Path(), help="Folder holding the tasks' data files."),
        click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True,
                     help="Seed for item construction, shots and bootstrap."),
        click.option("--shots", type=int, default=None, help="Few-shot examples (task default when omitted)."),
        click.option("--prompt-variant", type=click.Choice(["paper", "calamita"]), default="paper", show_default=True),
        click.option("--chat-template", is_flag=True, help="Render prompts with the model's chat template."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def backend_options(f):
    opts = [
        click.option("--backend", default=DEFAULT_BACKEND, show_default=True,
                     help=f"Inference backend: {', '.join(BACKENDS)}."),
        click.option("--n-ctx", type=int, default=None,
                     help=f"Context window in tokens (default: the registry entry's n_ctx, else {DEFAULT_N_CTX})."),
        click.option("--n-batch", type=int, default=DEFAULT_N_BATCH, show_default=True, help="Tokens per decode call."),
        click.option("--threads", type=int, default=None, help="CPU threads (default: all cores)."),
        click.option("--n-gpu-layers", type=int, default=-1, show_default=True, help="-1: all layers if the build can offload."),
        click.option("--main-gpu", type=int, default=0, show_default=True),
        click.option("--tensor-split", default="", help="Comma-separated proportions across GPUs."),
        click.option("--flash-attn", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True),
        click.option("--extra-bufts", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
                     help="llama.cpp's repacked CPU weights (auto: off on AMX builds, where they crash). "
                     "off: the plain kernels an RPC server's CPU uses."),
        click.option("--rpc", default="", metavar="HOST:PORT[,HOST:PORT]",
                     help="llama.cpp RPC servers (abricot-local rpc-server) whose devices take layers."),
        click.option("--engine", type=click.Choice(list(ENGINES)), default=DEFAULT_ENGINE, show_default=True,
                     help=f"Evaluation engine. {', '.join(n for n, e in ENGINES.items() if e.exact)}: identical "
                     f"numbers. {', '.join(n for n, e in ENGINES.items() if not e.exact)} (for GPUs): several "
                     "items per decode; agrees only within a measured tolerance."),
        click.option("--parallel", type=int, default=None, help="batched: most items per decode "
                     "(default n_ctx/256, 1-16; each group also fits in --n-ctx). 1 = prefix's numbers."),
        click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry."),
        click.option("--verbose", is_flag=True, help="Show llama.cpp's own log."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


BACKEND_KEYS = ("n_batch", "threads", "n_gpu_layers", "main_gpu", "flash_attn", "extra_bufts", "engine", "parallel",
                "verbose")


def _backend_opts(kw: dict, *, vocab_only: bool = False):
    """The chosen backend's own options from the CLI values (one it lacks is an error)."""
    from abricot_local.backends import backend_options

    try:
        split = tuple(float(x) for x in kw["tensor_split"].split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--tensor-split expects numbers like 3,1; got {kw['tensor_split']!r}") from None
    values = {k: kw[k] for k in BACKEND_KEYS}
    values |= {"n_ctx": kw["n_ctx"] or DEFAULT_N_CTX, "tensor_split": split, "vocab_only": vocab_only,
               "seed": kw["seed"], "rpc": _rpc_servers(kw.get("rpc"))}
    return backend_options(kw["backend"], values)


def _rpc_servers(spec: str | None) -> tuple[str, ...]:
    if not spec:
        return ()
    from abricot_local.backends import rpc

    rpc.require()  # a build without RPC: one line with the reinstall command
    return rpc.parse_endpoints(spec)


def _watch_rpc(servers: tuple[str, ...], out_dir: Path) -> None:
    """ggml-rpc ends the process when a server goes away: say which one in one line, and how to go on."""
    import os

    from abricot_local.backends import rpc

    def lost(err: AbricotError) -> None:
        kept = (out_dir / ".checkpoint" / "run.json").exists()
        then = (f"every item scored so far is kept in {out_dir}; once it is back, resume with: "
                f"abricot-local {' '.join(_resume_argv(out_dir))}" if kept else "run again once it is back")
        click.echo(f"\nerror: {err}\n{then}", err=True)
        sys.stderr.flush()
        os._exit(err.exit_code)

    rpc.on_server_lost(servers, lost)


def _task_opts(kw: dict):
    from abricot_local.tasks.base import TaskOptions

    return TaskOptions(
        data=_data_pairs(kw["data"]), data_dir=kw["data_dir"], seed=kw["seed"], shots=kw["shots"],
        prompt_variant=kw["prompt_variant"], chat_template=kw["chat_template"],
    )


# -- run -----------------------------------------------------------------------------------
@cli.command()
@click.argument("models", nargs=-1, required=True, metavar="MODEL [MODEL ...]")
@task_options
@backend_options
@click.option("--limit", type=int, default=None, help="Score only the first N items of each task (release order).")
@click.option("--sample", type=int, default=None, help="Score N items of each task drawn with --seed (release order kept).")
@click.option("--shard", default=None, metavar="K/N", help="Score only the K-th of N disjoint parts of each task's items "
              "(after --limit/--sample); `merge` joins the parts.")
@click.option("--out", type=click.Path(), default=None,
              help="Output folder (default results/<model>/<time>/; several models: results/<sweep>/<model>/).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run (or sweep) in --out.")
@click.option("--force", is_flag=True, help="Run even if the model seems not to fit in memory or on disk.")
def run(models: tuple[str, ...], limit: int | None, sample: int | None, shard: str | None, out: str | None,
        resume: bool, force: bool, **kw) -> None:
    """Score MODEL (a registry alias or a .gguf path) on the tasks; write results to --out.

    Several MODELs run one after another into one sweep folder, then a comparison table;
    a model that fails is reported and the others go on."""
    from abricot_local.planning import Shard

    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if sample is not None and (sample < 1 or limit is not None):
        raise UsageError("--sample must be at least 1 and cannot be combined with --limit")
    if resume and not out:
        raise UsageError("--resume needs the --out folder of the run to continue")
    if limit is not None:
        click.echo(f"caution: --limit {limit} scores the first {limit} items of each task in release order, "
                   "which may not represent the task (use --sample N for a seeded draw)", err=True)
    args = dict(limit=limit, sample=sample, shard=Shard.parse(shard), force=force, kw=kw)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    if len(models) == 1:
        out_dir = Path(out) if out else None
        _run_one(models[0], out_dir, resume, stamp=stamp, **args)
        return
    _sweep(models, Path(out) if out else Path("results") / f"sweep-{stamp}", resume, stamp=stamp, **args)


def _run_one(model: str, out_dir: Path | None, resume: bool, *, limit, sample, shard, force, kw, stamp: str,
             sweep: bool = False):
    """One model: plan, load, score, write; the summary and the published verdict."""
    from abricot_local import console, planning, runner

    plan = planning.plan_run(
        n_ctx_given=kw["n_ctx"] is not None, model=model, backend=kw["backend"], task_spec=kw["tasks"],
        task_options=_task_opts(kw), backend_options=_backend_opts(kw), limit=limit, models_file=kw["models_file"],
        force=force, sample=sample, shard=shard, notify=lambda line: click.echo(line, err=True),
    )
    out_dir = out_dir or Path("results") / plan.model_label / stamp
    if getattr(plan.backend_options, "rpc", ()):
        _watch_rpc(plan.backend_options.rpc, out_dir)
    for s in plan.skipped:
        click.echo(f"skipped {s.task}: no data. {s.how}", err=True)
    progress, close = _progress()

    def loaded(backend) -> None:
        click.echo(console.start_line(plan, backend.provenance()), err=True)

    started = time.perf_counter()
    term = signal.signal(signal.SIGTERM, _sigterm)
    try:
        outcome = runner.execute(plan, out_dir, resume=resume, progress=progress, on_loaded=loaded)
    except KeyboardInterrupt:
        close()
        from abricot_local.results import items_text, saved_counts

        saved = saved_counts(out_dir)  # what is on disk (a resume's earlier items too)
        totals = {r.task.name: len(r.items) for r in plan.runs}
        what = items_text(saved, totals) if any(saved.values()) else "nothing scored yet"
        click.echo(f"\ninterrupted: {what} saved in {out_dir}.\n"
                   f"resume with: abricot-local {' '.join(_resume_argv(out_dir))}", err=True)
        sys.exit(130)
    finally:
        close()
        signal.signal(signal.SIGTERM, term)
    click.echo(console.summary(outcome.results))
    click.echo("")
    click.echo(console.verdict(outcome.results))
    click.echo(f"\nwrote {outcome.path} ({time.perf_counter() - started:.1f} s)")
    return outcome


def _sweep(models, root: Path, resume: bool, *, stamp: str, **args) -> None:
    """Several models one after another, each into root/<model>/; failures reported at the end."""
    from abricot_local import report as rep
    from abricot_local.registry import load_registry
    from abricot_local.results import RESULTS

    done, failed = [], []
    for model in models:
        folder = root / _slug(model)
        click.echo(f"== {model} -> {folder}", err=True)
        if resume and (folder / RESULTS).exists():
            click.echo(f"{model}: already complete", err=True)
            done.append(folder)
            continue
        try:
            _run_one(model, folder, resume and folder.exists(), stamp=stamp, sweep=True, **args)
            done.append(folder)
        except AbricotError as err:
            click.echo(f"error: {model}: {err}", err=True)
            failed.append((model, str(err)))
    if done:
        click.echo(f"\n== comparison of {len(done)} model(s) in {root}")
        click.echo(rep.render(rep.build([str(f) for f in done], registry=load_registry(args["kw"]["models_file"]))))
    if failed:
        click.echo(f"\n{len(failed)} model(s) failed:", err=True)
        for model, why in failed:
            click.echo(f"  {model}: {why}", err=True)
        sys.exit(1)


def _slug(model: str) -> str:
    import re

    name = Path(model).name.removesuffix(".gguf") if model.lower().endswith(".gguf") else model
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def _progress():
    """A progress callback: tqdm bars on a terminal, plain lines at a steady interval off one."""
    import os

    from abricot_local.console import ProgressLine

    bars: dict = {}
    if not sys.stderr.isatty():
        lines = ProgressLine(float(os.environ.get("ABRICOT_PROGRESS_SECONDS", "30")))

        def plain(task: str, done: int, total: int) -> None:
            text = lines.update(task, done, total)
            if text:
                click.echo(text, err=True)

        return plain, lambda: None

    def bar(task: str, done: int, total: int) -> None:
        from tqdm import tqdm

        b = bars.get(task)
        if b is None:
            b = bars[task] = tqdm(total=total, desc=task, unit="item", file=sys.stderr, leave=True)
        b.n = done
        b.refresh()

    def close() -> None:
        for b in bars.values():
            b.close()
        bars.clear()

    return bar, close


def _resume_argv(out_dir: Path) -> list[str]:
    args = [a for a in sys.argv[1:] if a != "--resume"]
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out_dir)]
    return args + ["--resume"]


# -- merge --------------------------------------------------------------------------------
@cli.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(), metavar="SHARD_OUT [SHARD_OUT ...]")
@click.option("--out", type=click.Path(), required=True, help="Folder for the merged run.")
def merge(shards: tuple[str, ...], out: str) -> None:
    """Join the complete shards of one run (run --shard K/N) into the run they stand for."""
    from abricot_local.merge import merge as join

    path = join(list(shards), out)
    click.echo(f"merged {len(shards)} shard(s) into {path}")


# -- check ---------------------------------------------------------------------------------
@cli.command()
@click.argument("out", type=click.Path())
@click.option("--sample", type=int, default=None, help="Re-score only N items, drawn with the run's seed.")
@click.option("--atol", type=float, default=1e-3, show_default=True, help="Largest log-prob difference accepted.")
@click.option("--model", "model_path", type=click.Path(), default=None, help="The model file, if it moved.")
@click.option("--data-dir", type=click.Path(), default=None, help="Folder of the data files, if they moved.")
@click.option("--threads", type=int, default=None)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(out: str, sample: int | None, atol: float, model_path: str | None, data_dir: str | None,
          threads: int | None, as_json: bool) -> None:
    """Re-score the run in OUT with its recorded model, data and options; exit 1 if it does not reproduce."""
    from abricot_local.check import check_run, report_json

    progress, close = _progress()
    try:
        rep = check_run(out, sample=sample, atol=atol, model=model_path, data_dir=data_dir, threads=threads,
                        progress=progress)
    finally:
        close()
    if as_json:
        click.echo(report_json(rep))
    else:
        click.echo(f"checked {rep.checked} items: {rep.identical_predictions} identical predictions, "
                   f"max |logprob difference| {rep.max_abs_diff:.3g} (atol {rep.atol:g})")
        if rep.differences:
            click.echo(f"{'task':<14} {'id':<28} {'recorded':>8} {'now':>5} {'max diff':>10}")
            for d in rep.differences:
                click.echo(f"{d.task:<14} {d.id:<28} {d.recorded_pred:>8} {d.new_pred:>5} {d.max_abs_diff:>10.3g}")
        click.echo("reproduced" if rep.reproduced else "NOT reproduced")
    sys.exit(0 if rep.reproduced else 1)


# -- models, pull, doctor -------------------------------------------------------------------
def _gib(n) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


@cli.command()
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def models(models_file: str | None) -> None:
    """List the registry's models: size, licence, gated, and whether they are in the cache."""
    from abricot_local import fetch
    from abricot_local.registry import load_registry

    reg = load_registry(models_file)
    rows = [("alias", "params", "quant", "size", "license", "gated", "cached", "reproduces")]
    for alias, spec in sorted(reg.items()):
        try:
            cached = "yes" if fetch.is_cached(spec) else "no"
        except AbricotError:
            cached = "?"
        gated = {True: "yes", False: "no", None: "?"}[spec.gated]
        rows.append((alias, spec.params or "", spec.quant or "", _gib(spec.approx_bytes), spec.license or "",
                     gated, cached, spec.reproduces or ""))
    widths = [max(len(str(r[k])) for r in rows) for k in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())


@cli.command()
@click.argument("alias")
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def pull(alias: str, models_file: str | None) -> None:
    """Download a registry model into the Hugging Face cache and verify it."""
    from abricot_local import fetch

    resolved = fetch.resolve_model(alias, models_file=models_file, notify=lambda line: click.echo(line, err=True))
    click.echo(f"{resolved.alias or alias}: {resolved.path}  sha256 {fetch.sha256_file(resolved.path)}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print every fact as JSON.")
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def doctor(as_json: bool, models_file: str | None) -> None:
    """What this machine and this llama.cpp build can do (CPU features, GPU offload, memory), and
    whether each task's data is here."""
    import json

    from abricot_local import doctor as doc
    from abricot_local.catalog import task_catalog
    from abricot_local.console import data_status
    from abricot_local.registry import load_registry

    facts = doc.gather(load_registry(models_file))
    facts["tasks"] = [{k: r[k] for k in ("name", "group", "items", "data_path", "data_note")} for r in task_catalog()]
    if as_json:
        click.echo(json.dumps(facts, indent=2, default=str))
        return
    llama = facts["llama_cpp"]
    click.echo(f"python {facts['python']['version']}  llama-cpp-python {facts['packages'].get('llama-cpp-python')}")
    click.echo(f"llama.cpp system info: {llama.get('system_info', '?')}")
    click.echo(f"GPU offload supported: {'yes' if llama.get('gpu_offload') else 'no'}"
               f"  backends: {', '.join(llama.get('gpu_backends') or []) or 'CPU only'}")
    mem = facts["memory"]
    click.echo(f"RAM: {_gib(mem.get('ram_total'))} total, {_gib(mem.get('ram_available'))} available")
    for g in facts["nvidia"].get("gpus", []):
        click.echo(f"GPU: {g.get('name')}  VRAM {_gib(g.get('memory_total'))} total, {_gib(g.get('memory_free'))} free")
    cached = [m for m in facts["models"] if m["cached"]]
    click.echo(f"cached models: {len(cached)}")
    for m in cached:
        fits = {True: "fits in RAM", False: "does NOT fit in RAM", None: ""}[m["fits_ram"]]
        click.echo(f"  {m['alias']:<24} {_gib(m['size']):>9}  {fits}")
    click.echo("RPC (llama.cpp over the network; run --rpc, rpc-server): "
               + ("available" if llama.get("rpc") else f"not in this build; reinstall with: {doc.REINSTALL_RPC}"))
    click.echo("reinstall llama-cpp-python for a GPU build:")
    for kind, cmd in facts["reinstall"].items():
        click.echo(f"  {kind}: {cmd}")
    click.echo("task data (the user cache; `abricot-local tasks --data-dir DIR` checks a folder):")
    for t in facts["tasks"]:
        click.echo(f"  {t['name']:<14} {data_status(t)}")
    for tip in facts["advice"]:
        click.echo(f"advice: {tip}")


# -- labels --------------------------------------------------------------------------------
@cli.command()
@click.argument("model")
@click.option("--task", "task_name", default=None, help="Task whose first item is shown (default: the first registered).")
@task_options
@backend_options
def labels(model: str, task_name: str, **kw) -> None:
    """Show how MODEL's tokenizer maps the first item's answer labels to tokens."""
    from abricot_local import runner

    if not task_name:
        from abricot_local.planning import select_tasks

        task_name = select_tasks(None, _task_opts(kw))[0][0].name
    info = runner.label_map(model, kw["backend"], task_name, _task_opts(kw), _backend_opts(kw, vocab_only=True), kw["models_file"])
    click.echo(f"model: {info['model']}\ntask: {info['task']}  item: {info['item']}")
    click.echo(f"context tokens: {info['n_context_tokens']}  prefix tokens: {info['prefix_len']}  trunk: {info['trunk_len']}")
    click.echo(f"fast path (one forward pass scores every choice): {'yes' if info['fast_path'] else 'no'}")
    for row in info["choices"]:
        pieces = " ".join(repr(p) for p in row["pieces"])
        click.echo(f"  {row['continuation']!r:>6} -> ids {row['ids']}  pieces {pieces}")


# -- tasks --------------------------------------------------------------------------------
@cli.command()
@click.option("--data", "data", multiple=True, metavar="TASK=PATH", help="Data file or folder for one task.")
@click.option("--data-dir", type=click.Path(), help="Folder holding the tasks' data files.")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def tasks(data: tuple[str, ...], data_dir: str | None, as_json: bool) -> None:
    """List the tasks (plugins included) and groups: items, metrics, published references, data."""
    import json

    from abricot_local.catalog import task_catalog
    from abricot_local.console import data_status

    rows = task_catalog(_data_pairs(data), data_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']}{'  (group ' + r['group'] + ')' if r['group'] else ''}: {r['description']}")
        click.echo(f"  metrics: {', '.join(r['metrics'])}  (main: {r['primary_metric']}; chance: "
                   f"{', '.join(f'{k} {v:g}' for k, v in r['chance'].items()) or 'n/a'})")
        click.echo(f"  items: {r['items'] if r['items'] is not None else '?'}  published references: "
                   f"{len(r['references'])}{' (' + ', '.join(sorted({x['source'] for x in r['references']})) + ')' if r['references'] else ''}")
        click.echo(f"  data: {data_status(r)}")
        click.echo(f"  from: {r['plugin']}")
    groups = sorted({r["group"] for r in rows if r["group"]})
    for g in groups:
        click.echo(f"group {g}: {', '.join(r['name'] for r in rows if r['group'] == g)}")


# -- rpc-server ----------------------------------------------------------------------------
@cli.command("rpc-server")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="IPv4 address to listen on; any other than 127.0.0.1 exposes this machine (no authentication).")
@click.option("--port", type=int, default=50052, show_default=True)
@click.option("--threads", type=int, default=None, help="Threads of the CPU device (default: half the cores).")
@click.option("--device", "devices", multiple=True,
              help="Device to serve (CUDA0, CPU...; repeat or comma-separate). Default: every GPU, else the CPU.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
              help="Folder keeping received tensors by hash, so the next load of the same model is local.")
def rpc_server(host: str, port: int, threads: int | None, devices: tuple[str, ...], cache_dir: str | None) -> None:
    """Serve this machine's devices to `run --rpc` with llama.cpp's RPC protocol, until stopped (Ctrl-C)."""
    from abricot_local.backends import rpc, rpc_server

    rpc.require()
    warning = rpc_server.exposed_warning(host, port)
    if warning:
        click.echo(warning, err=True)
    names = tuple(n.strip() for d in devices for n in d.split(",") if n.strip())
    try:
        rpc_server.start_server(host, port, threads, names, cache_dir)
    except KeyboardInterrupt:
        click.echo("\nRPC server stopped", err=True)
        sys.exit(130)


# -- data ----------------------------------------------------------------------------------
@cli.group()
def data() -> None:
    """Task data: download into the user cache."""


@data.command("pull")
@click.argument("task")
def data_pull(task: str) -> None:
    """Download TASK's (or a group's) data into the user cache, verifying SHA-256 (`tasks` lists them)."""
    from abricot_local import runner

    for path, sha in runner.pull_data(task):
        click.echo(f"{path}  sha256 {sha}")


# -- runs, report ---------------------------------------------------------------------------
def _run_states(paths: tuple[str, ...]):
    from abricot_local.results import find_runs

    if not paths and not Path("results").is_dir():
        raise UsageError("no results/ folder here (runs write there by default); give the run folders or a folder of runs")
    return find_runs(paths or ("results",))


@cli.command("runs")
@click.argument("folders", nargs=-1, type=click.Path(), metavar="[DIR ...]")
def runs_(folders: tuple[str, ...]) -> None:
    """List the run folders in DIR (default results/, searched recursively): complete, running,
    interrupted or stopped (N of M items saved; --resume continues), failed (with the error)."""
    states = _run_states(folders)
    width = max((len(str(s.path)) for s in states), default=0)
    for s in states:
        click.echo(f"{str(s.path):<{width}}  {s.describe()}")
    if not states:
        click.echo(f"no run folder in {', '.join(folders) or 'results'}", err=True)


def _finished_runs(paths: tuple[str, ...], strict: bool) -> list[str]:
    """The complete runs among PATHS (run folders, or folders searched for them); a note for each
    incomplete one (an error with --strict)."""
    from abricot_local.errors import ResultsError

    states = _run_states(paths)
    if not states:
        raise ResultsError(f"{', '.join(paths) or 'results'} holds no results.json and no run folder below it")
    for s in states:
        if not s.complete:
            if strict:
                raise ResultsError(f"{s.path} is not a finished run: {s.describe()}")
            click.echo(f"note: skipped {s.path} ({s.describe()})", err=True)
    done = [str(s.path) for s in states if s.complete]
    if not done:
        raise ResultsError(f"no finished run in {', '.join(paths) or 'results'}")
    return done


@cli.command()
@click.argument("runs", nargs=-1, type=click.Path(), metavar="[OUT ...]")
@click.option("--strict", is_flag=True, help="Fail on an incomplete run instead of skipping it with a note.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json", "html"]), default="table",
              show_default=True, help="Output format. csv is one plain table (with --table all: the runs table); "
              "html: one self-contained page to explore the runs, best with -o.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write the report to FILE, not stdout.")
@click.option("--table", "which", type=click.Choice(["all", "runs", "published", "quant", "samples"]), default="all",
              show_default=True, help="Which table: runs + published rows, published-in-CI checks, quant comparison, "
              "samples (every item of every run and task: labels, correct, p_0.. choice probabilities; csv or json).")
@click.option("--metrics", default="", help="Comma-separated metric names or TASK.METRIC patterns (e.g. accuracy,mytask.*).")
@click.option("--plot", "plot_dir", type=click.Path(), default=None, help="Write PNG figures into this folder (needs matplotlib).")
@click.option("--verify", is_flag=True, help="Recompute every task's metrics from its samples file; exit 1 on a difference.")
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def report(runs: tuple[str, ...], strict: bool, fmt: str, output: str | None, which: str, metrics: str,
           plot_dir: str | None, verify: bool, models_file: str | None) -> None:
    """Tables of finished runs: metrics with 95% CIs, published baselines, agreement across quants.

    OUT: run folders, or folders holding runs (searched recursively; default results/).
    Incomplete runs are skipped with a note (--strict: an error)."""
    from abricot_local import report as rep
    from abricot_local.registry import load_registry

    patterns = tuple(p.strip() for p in metrics.split(",") if p.strip())
    doc = rep.build(_finished_runs(runs, strict), registry=load_registry(models_file))
    if which == "samples":
        from abricot_local import sample_table

        text = sample_table.render(doc, fmt)
    elif fmt == "html":
        from abricot_local.html_report import render_html

        text = render_html(doc, metrics=patterns)
    else:
        text = rep.render(doc, fmt, table=which, metrics=patterns)
    if output:
        from abricot_local.results import atomic_write

        atomic_write(Path(output), text if text.endswith("\n") else text + "\n")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    if plot_dir:
        from abricot_local import plots

        paths = plots.write_plots(doc, plot_dir, metrics=patterns)
        click.echo(f"wrote {len(paths)} figure(s) to {plot_dir}", err=True)
    if verify:
        bad = [f"{run.path} {tc.task}: {', '.join(tc.mismatches)}"
               for run in doc.runs for tc in rep.recompute(run.path) if not tc.ok]
        for line in bad:
            click.echo(f"recomputed metrics differ: {line}", err=True)
        if bad:
            sys.exit(1)
        click.echo(f"verified: the metrics of {len(doc.runs)} run(s) match their samples files", err=True)


# -- lm-eval -------------------------------------------------------------------------------
@cli.command("lm-eval", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                          "allow_interspersed_args": False})
@click.argument("model")
@click.argument("lm_eval_args", nargs=-1, type=click.UNPROCESSED, metavar="[LM-EVAL OPTIONS]...")
def lm_eval(model: str, lm_eval_args: tuple[str, ...]) -> None:
    """Run lm-evaluation-harness tasks on MODEL (a registry alias or a .gguf path).

    Everything after MODEL goes to `lm-eval run` unchanged (--tasks, --include_path,
    --num_fewshot, --limit, --output_path, --log_samples, --batch_size, --apply_chat_template,
    ...); backend options go in --model_args (n_ctx=4096,threads=8,engine=prefix,...).
    Needs: pip install "abricot-local[lm-eval]"."""
    try:
        from abricot_local.lm_eval_model import run_cli
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("lm_eval"):
            raise
        raise UsageError('lm-eval is not installed: pip install "abricot-local[lm-eval]"') from None
    run_cli(model, lm_eval_args)
