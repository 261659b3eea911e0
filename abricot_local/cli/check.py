"""`check` (re-score a recorded run) and `merge` (join a run's shards)."""

from __future__ import annotations

import sys

import click

from abricot_local.cli.app import cli, echo
from abricot_local.cli.options import (FiniteRange, OutputPath, backend_values, data_options, model_dir_option,
                                       recheck_options, run_option)
from abricot_local.cli.progress import progress as make_progress


@cli.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(), metavar="SHARD_OUT [SHARD_OUT ...]")
@click.option("--out", type=OutputPath(), required=True, help="Folder for the merged run.")
def merge(shards: tuple[str, ...], out: str) -> None:
    """Join the complete shards of one run (run --shard K/N) into the run they stand for."""
    from abricot_local.run.merge import merge as join

    path = join(list(shards), out, shard_command)
    echo(merged_text(path.parent))
    echo(f"\nmerged {len(shards)} shard(s) into {path}")


def shard_command(model: str, options: dict, shard: str, out) -> str:
    """The `run` command that scores ``shard`` with ``options`` (run.merge_advice.shard_options: by field name, a
    list joined by commas; ``data``, key -> path: a --data KEY=PATH each) into ``out``, folded to fit
    (errors.fold_command, after the advice's two spaces)."""
    from abricot_local.errors import command_words, fold_command

    given = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in options.items() if k != "data"}
    data = [w for k, path in options.get("data", {}).items() for w in command_words(data=f"{k}={path}")[1:]]
    return fold_command([*command_words("run", model, **given), *data, *command_words(shard=shard, out=str(out))[1:]],
                        "  ")[2:]


def merge_command(folders, out) -> str:
    """The `merge` command that joins the shard ``folders`` into ``out`` (what `runs` says under its list)."""
    from abricot_local.errors import command_words, fold_command

    return fold_command(command_words("merge", *map(str, folders), out=str(out)), "  ")[2:]


def merged_text(folder) -> str:
    """The merged run as `run` says a finished run (cli/run.py's _done_text, from its record): its summary, its
    published verdict (judged on every item by merge), an --until-settled run's verdict."""
    from abricot_local import console
    from abricot_local.analysis.loading import load_run

    run = load_run(folder)
    record, published = run.record, run.record.published
    unheld = published.reproduces if record.synthetic and published is not None and published.reproduces else ""
    sequential = console.settled(record)
    lines = [console.summary(record), "", console.verdict(published, run.quant, unheld=unheld,
                                                          backend=record.backend, skipped=record.skipped)]
    return "\n".join(lines + (["", sequential] if sequential else []))


@cli.command()
@click.argument("out", type=click.Path())
@run_option("sample", help="Re-score only N items, drawn with the run's seed.")
@click.option("--atol", type=FiniteRange(min=0), default=None,
              help="Largest log-prob difference accepted.  [default: 0 (exact) where the re-scoring is "
                   "bit-identical (the recorded kernel path, an exact engine, threads that do not matter); "
                   "1e-3 where the numbers may move (another kernel path, threads that matter, the batched "
                   "engine); the batched engine's drift with --sample]")
@click.option("--model", "model_path", default=None,
              help="The model (a path or any name `run` takes), if it moved; its SHA-256 must be the recorded one.")
@model_dir_option
@data_options
@recheck_options
@click.option("--exact", is_flag=True,
              help="Demand the recorded numbers (same predictions, log-probs within --atol) even when this "
                   "machine's kernel path (build, CPU features, devices) differs from the recorded one.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(out: str, sample: int | None, atol: float, model_path: str | None, data: tuple[str, ...],
          data_dir: str | None, exact: bool, as_json: bool, model_dirs: tuple[str, ...], **kw) -> None:
    """Re-score the run in OUT with its recorded model, data and options; exit 1 if it does not reproduce.

    On another kernel path than the recorded one (another build, CPU features or devices: it is
    said first) the numbers may move: the run is re-scored and compared item by item (compare's
    verdict), and the check fails only when the verdict is `different`, or with --exact. Data that moved:
    --data-dir DIR (each task's DIR/KEY/, else DIR, as `run` finds it) or --data TASK=PATH, else the
    recorded paths, else this machine's data cache."""
    from abricot_local.run.check import check_run, report_json
    from abricot_local.console.listings import check_text

    progress, close = make_progress()
    try:
        rep = check_run(out, sample=sample, atol=atol, model=model_path, data_dir=data_dir, data=data,
                        backend_values=backend_values(kw), progress=progress, exact=exact,
                        notice=lambda text: echo(f"check: {text}", err=True), model_dirs=model_dirs)
    except KeyboardInterrupt:  # 130, as `run`: not 1, which means "NOT reproduced"
        from abricot_local.backends import exit_process

        close()
        echo(f"check interrupted: nothing checked, {out} left as it was", err=True)
        exit_process(130)
    finally:
        close()
    if as_json:  # its texts in this command's flags as it is built, never rendered over the JSON
        from abricot_local.cli.options import flags

        echo(report_json(rep, flags), rendered=True)
    else:
        echo(check_text(rep))
    sys.exit(0 if rep.passed else 1)
