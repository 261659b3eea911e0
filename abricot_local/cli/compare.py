"""`compare`: finished runs paired item by item, with one verdict per pair (compare.py)."""

from __future__ import annotations

import click

from abricot_local.cli.app import cli
from abricot_local.cli.options import OutputPath, data_options, models_file_option
from abricot_local.cli.report import WORDS, finished_runs, read_runs, written
from abricot_local.core import DEFAULT_SEED
from abricot_local.errors import UsageError


@cli.command()
@click.argument("runs", nargs=-1, type=click.Path(), metavar="RUN RUN [RUN ...]")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json"]), default="table",
              show_default=True, help="Output format (table: aligned text within 120 columns; csv: one row per "
              "pair, task and metric).")
@click.option("-o", "--output", type=OutputPath(dir_okay=False), default=None, help="Write to FILE, not stdout.")
@click.option("--tolerance", type=float, default=1e-3, show_default=True,
              help="Nats: runs with the same predictions and every |delta log-prob| within it are numerically close.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Level of the verdicts and of the best group (the power figures stay at 5% / 80%).")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seed of the paired bootstrap.")
@click.option("--margin", type=float, default=None, help="The difference that does not matter, in each metric's own "
              "units, for the equivalence verdicts (default: the task's per metric, e.g. 0.02 accuracy).")
@click.option("--reference", default=None, metavar="RUN", help="The run every other is judged against (a folder or "
              "a label; default: the highest-precision quant of the same model, else the first run; on a task it does "
              "not have, that default among the task's runs).")
@click.option("--near-tie", type=float, default=None, help="Nats: a changed answer whose reference run's top two "
              "choices were closer than this is a near tie (default 0.5, docs/compare.md).")
@click.option("--by-id", "by_id", is_flag=True, help="Pair items on their id alone, each pair one item scored "
              "under two contexts: two --seed runs, prompt variants or shot counts (is the result sensitive to "
              "them?); never a same-prompt comparison of two models (docs/compare.md).")
@click.option("--strict", is_flag=True, help="Fail on an incomplete run instead of skipping it with a note.")
@data_options
@models_file_option
def compare(runs: tuple[str, ...], fmt: str, output: str | None, tolerance: float, alpha: float, seed: int,
            margin: float | None, reference: str | None, near_tie: float | None, by_id: bool, strict: bool,
            data: tuple[str, ...], data_dir: str | None, models_file: str | None) -> None:
    """Compare finished runs item by item: the items they share (same id, same scored context),
    every recorded setting that differs, paired differences with their CI and test, and one
    verdict per pair (identical, numerically close, cannot tell apart, different); each run against
    its reference with a margin (equivalent, better, not worse, worse, cannot tell yet), and the answers that
    changed (near ties or decisive). Each task is compared among the runs that have it; a note names the
    runs without it and the pairs that share no task. --by-id pairs the items on their id alone (runs of
    two seeds: is the result sensitive to the seed?), said in every verdict.

    RUN: a run folder, or a folder holding runs (searched recursively), as `report` takes them; an
    lm-eval output folder too, its tasks' data found with --data/--data-dir, else beside the runs or in
    the cache. A task's size N (the verdicts' finite-population correction) is the one the runs recorded;
    else (an lm-eval output, an older run) it is counted from the data the runs recorded, else from
    --data/--data-dir (a run copied from another machine), else the cache.
    Exits 0 whatever the verdicts. See docs/compare.md."""
    from abricot_local.analysis.population import given_data
    from abricot_local.api.comparison import check_alpha, compare_runs
    from abricot_local.report.comparison import render
    from abricot_local.models.registry import load_registry
    from abricot_local.tasks.options import data_pairs

    check_alpha(alpha)
    if output:
        from abricot_local.record.outputs import output_file

        output_file(output)  # before the runs are read
    if not runs:
        raise UsageError("compare needs at least two runs: give two run folders, or a folder holding them")
    registry = load_registry(models_file)
    given = given_data(data_pairs(data), data_dir)  # where a task's N is counted when the runs' data is elsewhere
    found = read_runs(finished_runs(runs, strict), registry, data, data_dir)
    tie = {} if near_tie is None else {"near_tie": near_tie}
    result = compare_runs(found, tolerance=tolerance, alpha=alpha, seed=seed, margin=margin, reference=reference,
                          given=given, by_id=by_id, **tie)
    written(render(result, fmt, WORDS), output)  # its options in this command's flags as it was built
