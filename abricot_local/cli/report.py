"""`runs` (run folders and their states) and `report` (tables, html, figures over finished runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from abricot_local.cli.app import cli, echo
from abricot_local.cli.options import OutputPath, data_options, flags, models_file_option
from abricot_local.errors import ResultsError, UsageError, render
from abricot_local.paths import once_each


WORDS = flags  # the one door of report's and compare's documents: the options their texts name as these flags


def written(text: str, output: str | None, path: Path | None = None) -> None:
    """A document of report's or compare's, its texts in :data:`WORDS` as it was built (tables.render's ``namer``):
    into ``path`` (the -o ``output`` given), else on stdout; as it is, never rendered again."""
    if output:
        from abricot_local.jsonfiles import atomic_write

        atomic_write(path or Path(output), text if text.endswith("\n") else text + "\n")
        echo(f"wrote {output}", err=True)
    else:
        echo(text, nl=not text.endswith("\n"), rendered=True)


def _run_states(paths: tuple[str, ...]):
    from abricot_local.run.states import find_runs

    if not paths and not Path("results").is_dir():
        raise UsageError("no results/ folder here (runs write there by default); give the run folders or a folder of runs")
    return find_runs(paths or ("results",))


@cli.command("runs")
@click.argument("folders", nargs=-1, type=click.Path(), metavar="[DIR ...]")
def runs_(folders: tuple[str, ...]) -> None:
    """List the run folders in DIR (default results/, searched recursively): complete, running,
    interrupted or stopped (N of M items saved; --resume continues), failed (with the error)."""
    from abricot_local.console.listings import runs_text
    from abricot_local.run.states import find_runs

    default = Path("results")
    states = once_each(find_runs(folders or (str(default),)), lambda s: s.path) if folders or default.is_dir() else []  # one given must exist
    if states:
        from abricot_local.cli.check import merge_command
        from abricot_local.run.shards_listed import listed

        echo("\n".join([runs_text(states), *listed(states, merge_command)]))
    else:
        looked = ", ".join(folders) or f"{default.resolve()}" + ("" if default.is_dir() else " (no such folder yet)")
        echo(f"no run folder in {looked}", err=True)


def finished_runs(paths: tuple[str, ...], strict: bool) -> list[str]:
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
            echo(f"note: skipped {s.path} ({s.describe()})", err=True)
    done = list(dict.fromkeys(str(s.path) for s in states if s.complete))
    if not done:
        raise ResultsError(f"no finished run in {', '.join(paths) or 'results'}")
    return done


def _data_hint(err: ResultsError) -> str:
    """How `report` and `compare` give an lm-eval output's tasks' data, after an error saying it is not here."""
    from abricot_local.analysis.lm_eval_input import DataNotHere

    if not isinstance(err, DataNotHere):
        return ""
    return "; give it with " + " ".join(f"--data {k}=PATH" for k in err.keys) + " or --data-dir DIR"


def _checked(path: str | None, folder: bool) -> Path | None:
    """A file or folder given to write to, refused before any run is read when it is a link, read-only or
    a run's own (record.outputs)."""
    if not path:
        return None
    from abricot_local.record.outputs import output_file, output_folder

    return (output_folder if folder else output_file)(path)


def _metrics_named(doc, patterns: tuple[str, ...], given: str) -> None:
    """--metrics: a pattern that selects no metric of the runs is said (every one: refused, naming theirs)."""
    from abricot_local.analysis.overview import metric_keys, unmatched

    missed = unmatched(doc, patterns)
    if missed and len(missed) == len(patterns):
        keys = metric_keys(doc)
        raise UsageError(f"--metrics {given}: no metric of these runs matches; theirs: {', '.join(keys[:12])}"
                         + (f" and {len(keys) - 12} more" if len(keys) > 12 else ""))
    for p in missed:
        echo(f"note: --metrics {p} matches no metric of these runs", err=True)


def read_runs(folders: list[str], registry, data: tuple[str, ...], data_dir: str | None, read=None):
    """The finished runs at ``folders``, read together (``read``: analysis.loading.load_all, or
    report.tables.build: lm-eval outputs' data from --data/--data-dir, then from what the runs
    recorded); an lm-eval output that cannot be read is one note, and left out."""
    from abricot_local.analysis.loading import load_all
    from abricot_local.tasks.options import data_pairs

    def skipped(path: str, err: ResultsError) -> None:
        echo(f"note: skipped {path}: {render(err.raw(), flags)}{_data_hint(err)}", err=True)

    try:
        return (read or load_all)(folders, registry=registry, data=data_pairs(data), data_dir=data_dir, skip=skipped)
    except ResultsError as err:
        if not _data_hint(err):
            raise
        raise ResultsError(f"{err}{_data_hint(err)}") from None


@cli.command()
@click.argument("runs", nargs=-1, type=click.Path(), metavar="[OUT ...]")
@click.option("--strict", is_flag=True, help="Fail on an incomplete run instead of skipping it with a note.")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv", "json", "html", "lm-eval"]),
              default="table", show_default=True, help="Output format. csv is one plain table (with --table all: the "
              "runs table); html: one self-contained page to explore the runs, best with -o; lm-eval: lm-eval's "
              "results layout (results_*.json, samples_<task>_*.jsonl per model) in the -o folder.")
@click.option("-o", "--output", type=OutputPath(), default=None,
              help="Write the report to FILE, not stdout (--format lm-eval: into the folder DIR).")
@click.option("--table", "which", type=click.Choice(["all", "runs", "published", "quant", "prompts", "samples"]),
              default="all", show_default=True, help="Which table: runs + published rows, published-in-CI checks, "
              "quant comparison, prompts (each task scored under several prompt variants: does the ranking hold?), "
              "samples (every item of every run and task: labels, correct, p_0.. choice probabilities; csv or json).")
@click.option("--metrics", default="", help="Comma-separated metric names or TASK.METRIC patterns (e.g. accuracy,mytask.*).")
@click.option("--plot", "plot_dir", type=OutputPath(), default=None, help="Write PNG figures into this folder (needs matplotlib).")
@click.option("--verify", is_flag=True, help="Recompute every task's metrics from its samples file, and the published "
              "verdict from the recorded metrics and the published rows; exit 1 on a difference.")
@data_options
@models_file_option
def report(runs: tuple[str, ...], strict: bool, fmt: str, output: str | None, which: str, metrics: str,
           plot_dir: str | None, verify: bool, data: tuple[str, ...], data_dir: str | None,
           models_file: str | None) -> None:
    """Tables of finished runs: metrics with 95% CIs, published baselines, agreement across quants.

    OUT: run folders, or folders holding runs (searched recursively; default results/); an lm-eval
    output folder too, its tasks' data found with --data/--data-dir, else beside the runs or in the cache.
    A task's size N (the quant ladder's and the HTML page's verdicts) is counted as compare counts it: from the
    data the runs recorded, else from --data/--data-dir (runs copied from another machine), else the cache.
    Incomplete runs are skipped with a note (--strict: an error)."""
    from abricot_local.report import tables as rep
    from abricot_local.models.registry import load_registry

    patterns = tuple(p.strip() for p in metrics.split(",") if p.strip())
    if fmt == "lm-eval" and not output:
        raise UsageError("--format lm-eval writes a folder: give it with -o DIR")
    if output and fmt != "lm-eval" and Path(output).is_dir():
        raise UsageError(f"-o {output} is a folder; give a file to write the report to")
    if fmt == "lm-eval":
        from abricot_local.analysis.lm_eval_output import inside_a_run

        home = inside_a_run(Path(output).absolute())
        if home is not None:
            raise UsageError(f"-o {output} is inside the run folder {home}: the export would be read as a second "
                             "run there; give a folder outside any run")
    out = _checked(output, fmt == "lm-eval")
    if plot_dir:
        from abricot_local.report.plots import needs_matplotlib

        needs_matplotlib()  # before any output: not a report printed, then refused
        _checked(plot_dir, True)
    registry = load_registry(models_file)
    doc = read_runs(finished_runs(runs, strict), registry, data, data_dir, read=rep.build)
    _metrics_named(doc, patterns, metrics)
    if not verify and fmt not in ("html", "lm-eval"):  # a samples file that lost lines (or gained some) stops here,
        from abricot_local.analysis.loading import counted  # the file and the count named; the page and the export
        # read every sample (RunTask.samples stops so), --verify says it as its own "not verified"

        counted(doc.runs)
    if fmt == "lm-eval":
        from abricot_local.analysis.lm_eval_output import export

        for run in doc.runs:
            if run.lm_eval:
                raise UsageError(f"{run.path} is an lm-eval output already; --format lm-eval writes runs of "
                                 "abricot-local")
        for run in doc.runs:
            echo(f"wrote {export(run, Path(output))}", err=True)
        return
    if which == "samples":
        from abricot_local.report import sample_table

        text = sample_table.render(doc, fmt)
    elif fmt == "html":
        from abricot_local.report.html import render_html

        text = render_html(doc, metrics=patterns, namer=WORDS)
    else:
        text = rep.render(doc, fmt, table=which, metrics=patterns, namer=WORDS)
    written(text, output, out)  # its options in this command's flags as it was built, in a file as on stdout
    if plot_dir:
        from abricot_local.report import plots

        drawn = plots.write_plots(doc, plot_dir, metrics=patterns)
        for note in drawn.notes:
            echo(f"note: {note}", err=True)
        echo(f"wrote {len(drawn.paths)} figure(s) to {plot_dir}", err=True)
    if verify:
        from abricot_local.analysis.overview import holds_verdict, verdict_differences
        from abricot_local.errors import AbricotError

        bad, code = [], 1
        for run in doc.runs:
            try:
                bad += [f"recomputed metrics differ: {run.path} {tc.task}: {', '.join(tc.mismatches)}"
                        for tc in rep.recompute(run) if not tc.ok]
                bad += [f"published verdict differs: {run.path} {line}" for line in verdict_differences(run)]
            except AbricotError as err:  # a samples file that is not this run's (the line, the count)
                bad.append(f"not verified: {err}")
                code = err.exit_code
        for line in bad:
            echo(line, err=True)
        if bad:
            sys.exit(code)
        held = sum(map(holds_verdict, doc.runs))
        said = (f", and the published verdicts of {held} of them match those made again from their metrics and "
                "the published rows" if held else "; none recorded a published verdict to check")
        echo(f"verified: the metrics of {len(doc.runs)} run(s) match their samples files{said}", err=True)


