"""`quantize` (a quant ladder written by llama.cpp's quantizer) and `kld` (the full-vocabulary KL
divergence of runs' models against a reference run's, on the tasks' own text)."""

from __future__ import annotations

import click

from abricot_local.cli.app import cli, echo, say
from abricot_local.cli.options import (OutputPath, backend_values, data_options, models_file_option,
                                       recheck_options, run_option)
from abricot_local.cli.progress import progress as make_progress


# what quantize says when a signal stops it, unwound or ending while llama.cpp did not return (quant_folder.let_go)
QUANTIZE_STOPPED = ("quantize interrupted: the rungs written so far are kept (models.toml lists them), the one being "
                    "written was removed; run the same command to go on")


@cli.command()
@click.argument("source")
@click.option("--to", "to", required=True, metavar="Q,Q,...",
              help="The quants to write, as llama.cpp names them (e.g. F16,Q8_0,Q6_K,Q4_K_M,Q4_0,Q3_K_M,Q2_K).")
@click.option("--out", type=OutputPath(), default=None,
              help="Folder for the rungs and their models.toml (default: the cache's quants/SOURCE).")
@click.option("--allow-requantize", is_flag=True,
              help="Accept a quantized SOURCE: the F16 rung is written from it (its function at 16 bits, not "
                   "the original weights) and every other rung from that.")
@click.option("--quant-threads", "quant_threads", type=click.IntRange(min=0), default=0,
              help="Threads llama.cpp's quantizer uses (0: every core).")
@click.option("--dry-run", is_flag=True, help="Print the plan (each rung's size as llama.cpp will write it, the "
              "total, the free disk) and stop: nothing is written.")
@models_file_option
def quantize(source: str, to: str, out: str | None, allow_requantize: bool, quant_threads: int, dry_run: bool,
             models_file: str | None) -> None:
    """Write SOURCE (a registry alias, a GGUF file or a store reference) at each quant of --to with
    llama.cpp's own quantizer, and a models.toml naming them quants of one model (`run --quants`).
    The plan (each rung's size, the total, the free disk) is said first.
    Ctrl-C or SIGTERM stops it with exit code 130: the rungs written are kept, the one being written
    is removed; the same command goes on from there."""
    import signal

    from abricot_local import backends
    from abricot_local.models.quantize import make_ladder, plan_ladder

    if dry_run:
        plan = plan_ladder(source, to, out=out, allow_requantize=allow_requantize, models_file=models_file,
                           notify=say)
        echo(plan.line())
        return
    term = signal.signal(signal.SIGTERM, _sigterm)
    forget = backends.on_stuck(lambda _signum: echo(QUANTIZE_STOPPED, err=True))  # llama.cpp did not return
    try:
        ladder = make_ladder(source, to, out=out, allow_requantize=allow_requantize, models_file=models_file,
                             threads=quant_threads, notify=say)
    except KeyboardInterrupt:
        echo(QUANTIZE_STOPPED, err=True)
        backends.exit_process(130)
    finally:
        forget()
        signal.signal(signal.SIGTERM, term)
    for r in ladder.rungs:
        echo(f"{r.quant:8} {r.size / 1e6:8.0f} MB  {r.path}  sha256 {r.sha256}")
    echo(f"models.toml: {ladder.fragment}")
    if ladder.requantized:
        echo(f"note: the reference F16 is {ladder.source_quant} dequantized, not the original weights")
    echo(f"run them: {_run_command(ladder)}")


def _run_command(ladder) -> str:
    """The `run --quants` command line over the whole ladder its models.toml lists (models.quantize.Ladder.ladder:
    the rungs of earlier calls too, the reference first)."""
    from abricot_local.cache import shown

    rungs = ladder.ladder or tuple(r.quant for r in ladder.rungs)
    return (f"abricot-local run {ladder.alias(rungs[0])} --quants {','.join(rungs)} --models "
            f"{shown(ladder.fragment)} --tasks TASKS")


def _sigterm(signum, frame):
    raise KeyboardInterrupt  # SIGTERM stops quantize and kld as Ctrl-C does


@cli.command()
@click.argument("reference", type=click.Path())
@click.argument("runs", nargs=-1, required=True, type=click.Path(), metavar="RUN [RUN ...]")
@run_option("limit", help="Only the first N common items of each task.")
@data_options
@click.option("--force", is_flag=True, help="Skip the memory check (the reference and the runs of a pass are "
              "loaded at once: all that fit).")
@click.option("--dry-run", is_flag=True, help="Print the plan (reference passes, tokens, memory, predicted time on "
              "this machine) and stop: nothing is loaded, scored or written.")
@click.option("--json", "as_json", is_flag=True, help="Print the results (with --dry-run: the plan) as JSON.")
@recheck_options
def kld(reference: str, runs: tuple[str, ...], limit: int | None, data: tuple[str, ...], data_dir: str | None,
        force: bool, dry_run: bool, as_json: bool, **kw) -> None:
    """KL(REFERENCE's model || each RUN's model) over the whole vocabulary at every token that scoring each
    item decodes (its prompt, its shared instructions included, and its answer options), each item counted
    whole; llama-perplexity --kl-divergence's statistics (mean, percentiles, top-token agreement), not its
    number (it scores the second half of each chunk of a wiki text); the mean's 95% CI over the items.
    Streamed (no logits file). REFERENCE and RUN are finished run folders of quants of one model (`run --quants`);
    the reference decodes once for all the RUNs that fit in memory beside it (a reference pass). The
    result is kept in each RUN's folder (kld.json) for `report` and `compare`. Ctrl-C or SIGTERM stops
    it with exit code 130: each RUN measured in an earlier pass keeps its kld.json."""
    import signal

    from abricot_local import backends
    from abricot_local.run.kld import kld_runs

    if dry_run:
        return _kld_plan(reference, runs, limit=limit, data_dir=data_dir, data=data, force=force, as_json=as_json,
                         kw=kw)
    stopped = ("kld interrupted: each RUN measured in an earlier pass keeps its kld.json; nothing was written for "
               "the pass being measured; run the same command to measure its runs")
    progress, close = make_progress()
    term = signal.signal(signal.SIGTERM, _sigterm)
    forget = backends.on_stuck(lambda _signum: echo(stopped, err=True))  # a C call that does not return
    try:
        results = kld_runs(reference, list(runs), data_dir=data_dir, data=data, backend_values=backend_values(kw),
                           limit=limit, force=force, progress=progress, notify=say)
    except KeyboardInterrupt:  # 130, as `run` and `quantize`
        close()
        echo(stopped, err=True)
        backends.exit_process(130)
    finally:
        close()
        forget()
        signal.signal(signal.SIGTERM, term)
    if as_json:  # its texts in this command's flags as it is built (_json), never rendered over the JSON
        echo(_json([r.to_json() for r in results], indent=2), rendered=True)
        return
    for r in results:
        quant = f" ({r.quant})" if r.quant else ""
        for task, s in r.tasks.items():
            echo(f"{r.run}{quant} {task}: {s.line()}")
        others = len(r.pass_rungs) - 1
        shared = f" (one reference pass with {others} other run{'s' * (others != 1)}: its time)" if others > 0 else ""
        echo(f"  {r.seconds:.1f} s, {r.decode_calls} decode calls per model{shared}; kept in {r.run / 'kld.json'}")


def _kld_plan(reference: str, runs: tuple[str, ...], *, limit, data_dir, data, force: bool, as_json: bool,
              kw: dict) -> None:
    """`kld --dry-run`: its plan and cost (run/kld_cost.py) on stdout, as text (console/plan.py) or JSON."""
    import shlex
    import sys

    from abricot_local.console.plan import kld as rendered
    from abricot_local.run.kld_cost import kld_cost

    cost = kld_cost(reference, list(runs), data_dir=data_dir, data=data, backend_values=backend_values(kw),
                    limit=limit, force=force, notify=say)
    command = shlex.join(["abricot-local", *sys.argv[1:]]) if sys.argv[1:] else ""
    if as_json:  # its texts in this command's flags as it is built (_json), never rendered over the JSON
        echo(_json(cost.to_json(), indent=1), rendered=True)
    else:
        echo(rendered(cost, command))


def _json(doc, *, indent: int) -> str:
    """``doc`` as `kld`'s ``--json`` prints it, the options its texts name (errors.opt: a plan's speed note's) written
    as this command's flags into each text before the whole is serialised (report.comparison.worded)."""
    import json

    from abricot_local.cli.options import flags
    from abricot_local.report.comparison import worded

    return json.dumps(worded(doc, flags), indent=indent)
