"""The command line. The only module that prints or exits."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from abricot_local import __version__
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
    """Evaluate local GGUF models (llama.cpp) on the Italian ABRICOT and DISCOTEX benchmarks."""


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
        click.option("--tasks", "-t", default="discotex", show_default=True, help="Comma-separated tasks or groups."),
        click.option("--data", "data", multiple=True, metavar="TASK=PATH", help="Data file or folder for one task."),
        click.option("--data-dir", type=click.Path(), help="Folder holding the tasks' data files."),
        click.option("--seed", type=int, default=1234, show_default=True, help="Seed for item construction, shots and bootstrap."),
        click.option("--shots", type=int, default=None, help="Few-shot examples (task default when omitted)."),
        click.option("--prompt-variant", type=click.Choice(["paper", "calamita"]), default="paper", show_default=True),
        click.option("--chat-template", is_flag=True, help="Render prompts with the model's chat template."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def backend_options(f):
    opts = [
        click.option("--backend", default="llama.cpp", show_default=True, help="Inference backend (llama.cpp or fake)."),
        click.option("--n-ctx", type=int, default=None, help="Context window in tokens (default: the registry's, else 2048)."),
        click.option("--n-batch", type=int, default=512, show_default=True, help="Tokens per decode call."),
        click.option("--threads", type=int, default=None, help="CPU threads (default: all cores)."),
        click.option("--n-gpu-layers", type=int, default=-1, show_default=True, help="-1: all layers if the build can offload."),
        click.option("--main-gpu", type=int, default=0, show_default=True),
        click.option("--tensor-split", default="", help="Comma-separated proportions across GPUs."),
        click.option("--flash-attn", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True),
        click.option("--engine", type=click.Choice(["naive", "single", "prefix", "batched"]), default="prefix",
                     show_default=True, help="Evaluation engine. naive, single, prefix: identical numbers. batched "
                     "(for GPUs): several items per decode; agrees only within a measured tolerance."),
        click.option("--parallel", type=int, default=None, help="batched: most items per decode "
                     "(default n_ctx/256, 1-16; each group also fits in --n-ctx). 1 = prefix's numbers."),
        click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry."),
        click.option("--verbose", is_flag=True, help="Show llama.cpp's own log."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _backend_opts(kw: dict, *, vocab_only: bool = False):
    from abricot_local.backends.base import DEFAULT_N_CTX, BackendOptions

    try:
        split = tuple(float(x) for x in kw["tensor_split"].split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--tensor-split expects numbers like 3,1; got {kw['tensor_split']!r}") from None
    return BackendOptions(
        n_ctx=kw["n_ctx"] or DEFAULT_N_CTX, n_batch=kw["n_batch"], threads=kw["threads"], n_gpu_layers=kw["n_gpu_layers"],
        main_gpu=kw["main_gpu"], tensor_split=split, flash_attn=kw["flash_attn"], engine=kw["engine"],
        parallel=kw["parallel"], verbose=kw["verbose"], vocab_only=vocab_only, seed=kw["seed"],
        rpc=_rpc_servers(kw.get("rpc")), repack=not kw.get("no_repack"),
    )


def _rpc_servers(spec: str | None) -> tuple[str, ...]:
    if not spec:
        return ()
    from abricot_local.backends import rpc

    rpc.require()  # a build without RPC: one line with the reinstall command
    return rpc.parse_endpoints(spec)


def _watch_rpc(servers: tuple[str, ...], out_dir: Path) -> None:
    """ggml-rpc aborts the process when a server goes away: say which one in one line, and how to go on."""
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
@click.argument("model")
@task_options
@backend_options
@click.option("--limit", type=int, default=None, help="Score only the first N items of each task.")
@click.option("--sample", type=int, default=None, help="Score N items of each task drawn with --seed (release order kept).")
@click.option("--out", type=click.Path(), default=None, help="Output folder (default results/<model>/<time>/).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in --out.")
@click.option("--force", is_flag=True, help="Run even if the model seems not to fit in memory.")
@click.option("--no-repack", is_flag=True, help="Plain CPU kernels, no repacked weights (as on an RPC server; "
              "also avoids llama.cpp's AMX crash, ggml-org/llama.cpp#20824).")
@click.option("--rpc", default="", metavar="HOST:PORT[,HOST:PORT]",
              help="llama.cpp RPC servers (abricot-local rpc-server) whose devices take layers.")
def run(model: str, limit: int | None, sample: int | None, out: str | None, resume: bool, force: bool, **kw) -> None:
    """Score MODEL (a registry alias or a .gguf path) on the tasks; write results to --out."""
    from abricot_local import runner

    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if sample is not None and (sample < 1 or limit is not None):
        raise UsageError("--sample must be at least 1 and cannot be combined with --limit")
    if resume and not out:
        raise UsageError("--resume needs the --out folder of the run to continue")
    plan = runner.plan_run(
        n_ctx_given=kw["n_ctx"] is not None,
        model=model, backend=kw["backend"], task_spec=kw["tasks"], task_options=_task_opts(kw),
        backend_options=_backend_opts(kw), limit=limit, models_file=kw["models_file"], force=force, sample=sample,
    )
    out_dir = Path(out) if out else Path("results") / plan.model_label / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    if plan.backend_options.rpc:
        _watch_rpc(plan.backend_options.rpc, out_dir)
    bars: dict = {}

    def progress(task: str, done: int, total: int) -> None:
        from tqdm import tqdm

        bar = bars.get(task)
        if bar is None:
            bar = bars[task] = tqdm(total=total, desc=task, unit="item", file=sys.stderr, disable=None, leave=True)
        bar.n = done
        bar.refresh()

    started = time.perf_counter()
    try:
        outcome = runner.execute(plan, out_dir, resume=resume, progress=progress)
    except KeyboardInterrupt:
        for bar in bars.values():
            bar.close()
        done = {name: bar.n for name, bar in bars.items()}
        click.echo(
            f"\ninterrupted: {', '.join(f'{k} {v} items' for k, v in done.items()) or 'nothing scored yet'} saved in {out_dir}.\n"
            f"resume with: abricot-local {' '.join(_resume_argv(out_dir))}",
            err=True,
        )
        sys.exit(130)
    finally:
        for bar in bars.values():
            bar.close()
    click.echo(format_summary(outcome.results))
    click.echo(f"\nwrote {outcome.path} ({time.perf_counter() - started:.1f} s)")


def _resume_argv(out_dir: Path) -> list[str]:
    args = [a for a in sys.argv[1:] if a != "--resume"]
    if "--out" not in args and not any(a.startswith("--out=") for a in args):
        args += ["--out", str(out_dir)]
    return args + ["--resume"]


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if v != v else f"{v:.4f}"
    return str(v)


def format_summary(results: dict) -> str:
    """A compact table: one line per task metric, with its 95% CI where there is one."""
    lines = [f"{'task':<14} {'metric':<20} {'value':>8}  95% CI", "-" * 58]
    for name, t in results["tasks"].items():
        m = t["metrics"]
        for key, val in m.items():
            if key.endswith("_ci95") or isinstance(val, (list, dict)):
                continue
            ci = m.get(f"{key}_ci95")
            ci_s = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""
            lines.append(f"{name:<14} {key:<20} {_fmt(val):>8}  {ci_s}")
        lines.append(f"{name:<14} {'n':<20} {t['n']:>8}")
        for w in t.get("warnings", []):
            lines.append(f"  warning: {w}")
    return "\n".join(lines)


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

    rep = check_run(out, sample=sample, atol=atol, model=model_path, data_dir=data_dir, threads=threads)
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

    resolved = fetch.resolve_model(alias, models_file=models_file)
    click.echo(f"{resolved.alias or alias}: {resolved.path}  sha256 {fetch.sha256_file(resolved.path)}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print every fact as JSON.")
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def doctor(as_json: bool, models_file: str | None) -> None:
    """What this machine and this llama.cpp build can do (CPU features, GPU offload, memory)."""
    import json

    from abricot_local import doctor as doc
    from abricot_local.registry import load_registry

    facts = doc.gather(load_registry(models_file))
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
    for tip in facts["advice"]:
        click.echo(f"advice: {tip}")


# -- labels --------------------------------------------------------------------------------
@cli.command()
@click.argument("model")
@click.option("--task", "task_name", default="discotex", show_default=True)
@task_options
@backend_options
def labels(model: str, task_name: str, **kw) -> None:
    """Show how MODEL's tokenizer maps the first item's answer labels to tokens."""
    from abricot_local import runner

    info = runner.label_map(model, kw["backend"], task_name, _task_opts(kw), _backend_opts(kw, vocab_only=True), kw["models_file"])
    click.echo(f"model: {info['model']}\ntask: {info['task']}  item: {info['item']}")
    click.echo(f"context tokens: {info['n_context_tokens']}  prefix tokens: {info['prefix_len']}  trunk: {info['trunk_len']}")
    click.echo(f"fast path (one forward pass scores every choice): {'yes' if info['fast_path'] else 'no'}")
    for row in info["choices"]:
        pieces = " ".join(repr(p) for p in row["pieces"])
        click.echo(f"  {row['continuation']!r:>6} -> ids {row['ids']}  pieces {pieces}")


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
    from abricot_local.backends import rpc

    rpc.require()
    warning = rpc.exposed_warning(host, port)
    if warning:
        click.echo(warning, err=True)
    names = tuple(n.strip() for d in devices for n in d.split(",") if n.strip())
    try:
        rpc.start_server(host, port, threads, names, cache_dir)
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
    """Download TASK's data (discotex, abricot) into the user cache, verifying SHA-256."""
    from abricot_local import runner

    for path, sha in runner.pull_data(task):
        click.echo(f"{path}  sha256 {sha}")


# -- report --------------------------------------------------------------------------------
@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(), metavar="OUT [OUT ...]")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json"]), default="table",
              show_default=True, help="Output format (csv: '# name' sections separated by a blank line).")
@click.option("--table", "which", type=click.Choice(["all", "runs", "published", "quant"]), default="all",
              show_default=True, help="Which table: runs + published rows, published-in-CI checks, quant comparison.")
@click.option("--metrics", default="", help="Comma-separated metric names or TASK.METRIC patterns (e.g. pearson,discotex.*).")
@click.option("--plot", "plot_dir", type=click.Path(), default=None, help="Write PNG figures into this folder (needs matplotlib).")
@click.option("--verify", is_flag=True, help="Recompute every task's metrics from its samples file; exit 1 on a difference.")
@click.option("--models", "models_file", type=click.Path(), help="Extra models.toml extending the registry.")
def report(runs: tuple[str, ...], fmt: str, which: str, metrics: str, plot_dir: str | None, verify: bool,
           models_file: str | None) -> None:
    """Tables of finished runs: metrics with 95% CIs, published baselines, agreement across quants."""
    from abricot_local import report as rep
    from abricot_local.registry import load_registry

    patterns = tuple(p.strip() for p in metrics.split(",") if p.strip())
    doc = rep.build(runs, registry=load_registry(models_file))
    click.echo(rep.render(doc, fmt, table=which, metrics=patterns))
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
