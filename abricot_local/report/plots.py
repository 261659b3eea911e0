"""Figures of a report (PNG, Agg canvas; no pyplot, no display, no global state).

matplotlib is an optional dependency (the ``plot`` extra) and is imported
only inside these functions, so ``import abricot_local`` never needs it.
"""

from __future__ import annotations

import io
import math
import pickle
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from abricot_local.report.forest import text_width
from abricot_local.report.safe import visible
from abricot_local.errors import ResultsError, UsageError, opt
from abricot_local.gguf.file import quant_of
from abricot_local.report.tables import Report, Run, metric_keys, no_interval, no_interval_words, value_words
from abricot_local.tasks.base import Figure

JITTER = 0.12  # +- uniform jitter on the 1..5 predictions, seeded
JITTER_SEED = 0
DPI = 110
TITLE_PT = 9  # a figure's title
DRAWN_MAX = 128  # PNGs this process keeps (_DRAWN)
_DRAWN: dict = {}  # what a figure shows, with matplotlib's settings -> its PNG: a figure drawn again is not redrawn
_SHOWS = weakref.WeakKeyDictionary()  # a figure -> what it shows (_new_figure)


def needs_matplotlib():
    """The one rule of every ``--plot``: matplotlib's Figure and Agg canvas, else a UsageError with the install
    hint; a command calls it when it reads its options, before it prints or writes anything."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError(f'{opt("plot_dir")} needs matplotlib: pip install "abricot-local[plot]"') from None
    return Figure, FigureCanvasAgg


def _new_figure(width: float, height: float, *shows):
    """An empty figure; ``shows``: every value its caller draws on it, pickled (-0.0 and 0.0 apart, an array by its
    bytes): :func:`_save` writes the PNG of a figure drawn before from the same values without drawing it again."""
    Figure, FigureCanvasAgg = needs_matplotlib()
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    _SHOWS[fig] = pickle.dumps((width, height, DPI, shows))
    return fig


def _save(fig, path: Path) -> Path:
    """The figure written whole (a rename), never through or over a link (record.outputs); cropped to what it shows
    as ``bbox_inches="tight"`` crops it (the same PNG), measured without savefig's extra draw of the whole figure."""
    from matplotlib import rcParams

    from abricot_local.jsonfiles import atomic_write
    from abricot_local.record.outputs import output_file

    key = _SHOWS[fig], repr(sorted(dict.items(rcParams)))  # every figure is made by _new_figure
    if key not in _DRAWN:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight" if fig.get_layout_engine() else fig.get_tightbbox(
            fig.canvas.get_renderer()).padded(rcParams["savefig.pad_inches"]))
        while len(_DRAWN) >= DRAWN_MAX:
            del _DRAWN[next(iter(_DRAWN))]
        _DRAWN[key] = png.getvalue()
    atomic_write(output_file(path), _DRAWN[key])
    return path


def _metric_text(m, why: dict[str, str]) -> str:
    """A metric (tables.Metric) in a figure's title as the report's tables say it (tables.value_words), a withheld
    interval with why, in the words of the text report's note (``why``: tables.no_interval); "n/a": none recorded."""
    if m is None:
        return "n/a"
    if m.key in why:
        return f"{value_words(m.value, None)} {no_interval_words(why[m.key])}"
    return value_words(m.value, m.ci)


def run_slugs(runs) -> list[str]:
    """A distinct file-name stem per run: its label (with the quant when the label lacks it)."""
    return _distinct([_slug(run.label if _names_quant(run) else f"{run.label}-{run.quant}", "run") for run in runs])


def _slug(text: str, empty: str = "x") -> str:
    """``text`` as a figure file name's part: letters, digits, ``._-`` (100 at most), every other run of
    characters one ``_``. Stricter than names.path_part (which keeps ``:``, spaces, ``#``, ``%``, ``?``): a
    figure is linked from Markdown and HTML, where those break a relative link (``a:b.png`` reads as a URL scheme)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text[:400]).strip("._-")[:100] or empty


def file_stems(names) -> list[str]:
    """A distinct file-name stem per name (a task or metric name from a record: a ``/``, ``..``
    or a control character never reaches the path)."""
    return _distinct([_slug(name) for name in names])


def _distinct(stems: list[str]) -> list[str]:
    """Each stem, a second one the same numbered (``a``, ``a-2``)."""
    out: list[str] = []
    for base in stems:
        stem, k = base, 2
        while stem in out:
            stem, k = f"{base}-{k}", k + 1
        out.append(stem)
    return out


def _names_quant(run: Run) -> bool:
    """Whether the run's label already says its quant (or there is none to say)."""
    return not run.quant or bool(quant_of(run.label))


def _title(run: Run) -> str:
    return visible(run.label if _names_quant(run) else f"{run.label} ({run.quant})")[:200]


def heading(lines: list[str], fig, points: float = TITLE_PT) -> str:
    """A figure's title lines, each broken (after a ``-``, ``_``, ``.`` or space where it can) to fit the figure's
    width: one long line (a run's name runs to 200 characters) would widen the PNG past its width
    (``bbox_inches="tight"``), and the page and Markdown, which show it at their width, would shrink every text.
    ``points``: the text's size (a figure's notes under its axes are smaller than its title)."""
    size = points * DPI / 72  # px
    room = fig.get_figwidth() * DPI * 0.8  # the title starts at the axes' left edge
    out: list[str] = []
    for line in lines:
        row = ""
        for part in re.findall(r"[^-_. ]*[-_. ]?", line)[:-1]:
            if row and text_width(row + part, size) > room:
                out.append(row.rstrip())
                row = ""
            row += part
            while text_width(row, size) > room:  # one part wider than the figure: cut where it fills it
                cut = max(1, max(k for k in range(len(row) + 1) if text_width(row[:k], size) <= room))
                out.append(row[:cut])
                row = row[cut:]
        out.append(row)
    return "\n".join(out)


def _field(sample, name: str, run: Run, task: str) -> float:
    """A sample's numeric field a figure plots (e.g. ABRICOT's human_mean), or an error naming it."""
    value = sample.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ResultsError(f"{run.path} {task} item {sample.id}: {name} is {value!r}, not a number to plot")
    return value


def _metric_input(run: Run, task: str, samples, figure: Figure):
    """The per-item inputs of ``figure.metric`` (the task's :class:`MetricInput`): what the metric correlates,
    its model side (``x``) against the sample field ``figure.x`` (its ``y``); else an error naming why not."""
    from abricot_local.errors import AbricotError

    where = f"{run.path} {task}: the figure's metric {figure.metric}"
    try:
        inputs = run.task(task).instance().metric_inputs(list(samples))
    except AbricotError as err:
        raise ResultsError(f"{where}: its inputs cannot be made ({err.raw().splitlines()[0]})") from None
    found = next((m for m in inputs if m.name == figure.metric), None)
    if found is None:
        raise ResultsError(f"{where} is not one of the metrics the task gives inputs of (metric_inputs: "
                           f"{', '.join(m.name for m in inputs) or 'none'}): nothing to plot it from")
    if not len(found.x) == len(found.y) == len(samples):
        raise ResultsError(f"{where}: its inputs hold {len(found.x)} and {len(found.y)} values for {len(samples)} "
                           "items (metric_inputs gives one per sample)")
    return found


def _side_name(samples, values: np.ndarray) -> str:
    """The task's own sample field holding ``values`` (a metric's model side), or ""."""
    for name in (samples[0].fields if samples else {}):
        got = [s.fields.get(name) for s in samples]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in got) and \
                np.array_equal(np.array(got, dtype=float), values, equal_nan=True):
            return name
    return ""


def scatter(run: Run, task: str, path: Path, figure: Figure, primary: str = "") -> tuple[Path, list[str]]:
    """What ``figure.metric`` correlates, one dot per item: its model side (the task's MetricInput ``x``)
    against the sample field ``figure.x``, which must be the metric's other side (its ``y``); with no
    metric, the model's choice (pred + 1). A side that is the choice is drawn jittered over the choices.
    An item whose value is NaN or infinite is left out, and counted in the notes returned."""
    samples = run.samples_of(task)
    human = np.array([_field(s, figure.x, run, task) for s in samples], dtype=float)
    choice = np.array([s.pred + 1 for s in samples], dtype=float)
    pred, side = choice, ""
    if figure.metric:
        inp = _metric_input(run, task, samples, figure)
        if not np.array_equal(np.asarray(inp.y, dtype=float), human, equal_nan=True):
            raise ResultsError(f"{run.path} {task}: {figure.metric} correlates its model side with another "
                               f"vector than the sample field {figure.x}: a scatter against {figure.x} would not "
                               f"show it (the figure's x must be the metric's MetricInput y)")
        pred = np.asarray(inp.x, dtype=float)
        side = "" if np.array_equal(pred, choice) else _side_name(samples, pred)
    is_choice = np.array_equal(pred, choice)
    jitter = np.random.default_rng(JITTER_SEED).uniform(-JITTER, JITTER, len(pred)) if is_choice \
        else np.zeros(len(pred))
    y_name = "the model's choice" if is_choice else side or f"{figure.metric}'s model side"
    x_bad = ~np.isfinite(human)
    y_bad = ~np.isfinite(pred) & ~x_bad
    notes = [f"{path.name}: {int(bad.sum())} item(s) with a non-finite {name} not drawn"
             for bad, name in ((x_bad, figure.x), (y_bad, y_name)) if bad.any()]
    keep = ~(x_bad | y_bad)
    human, pred, jitter = human[keep], pred[keep], jitter[keep]
    m = {x.name: x for x in run.metric_values if x.task == task}
    cont, main = m.get(figure.metric), m.get(primary)
    n_choices = max((len(s.logprobs) for s in samples), default=5)
    x_label, y_label = figure.x_label or figure.x, f"model's choice (1-{n_choices}, jittered)" if is_choice else \
        f"{side} ({figure.metric}'s model side)" if side else y_name
    lines = [f"{_title(run)} - {task} (n={len(samples)})"]
    why = no_interval(run)
    if figure.metric:
        lines.append(f"{figure.metric}: {_metric_text(cont, why)}")
    if main is not None and primary != figure.metric:
        lines.append(f"{primary} (the task's main metric): {_metric_text(main, why)}")
    for bad, name in ((x_bad, figure.x), (y_bad, y_name)):
        if bad.any():
            lines.append(f"{int(bad.sum())} item(s) not drawn: {name} is not finite")
    fig = _new_figure(6.0, 4.6, human, pred + jitter, is_choice, n_choices, x_label, y_label, lines)
    ax = fig.add_subplot()
    ax.scatter(human, pred + jitter, s=22, alpha=0.6, color="#2b6cb0", edgecolors="none")
    if is_choice:
        ax.set_ylim(0.5, n_choices + 0.5)
        ax.set_yticks(list(range(1, n_choices + 1)))
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    ax.set_title(heading(lines, fig), fontsize=TITLE_PT, loc="left")
    return _save(fig, path), notes


def confusion(run: Run, path: Path, task: str, figure: Figure | None = None) -> tuple[Path, list[str]]:
    """Gold (rows) against prediction (columns) over the choices (their answer labels), as counts."""
    samples = run.samples_of(task)
    conts = max((s.continuations or () for s in samples), key=len, default=())
    k = max((len(s.logprobs) for s in samples), default=len(conts))
    counts = np.zeros((k, k), dtype=int)
    for s in samples:
        if not (0 <= s.gold < k and 0 <= s.pred < k):
            raise ResultsError(f"{run.path} {task} item {s.id}: gold {s.gold} or pred {s.pred} is not one of "
                               f"its {k} choices")
        counts[s.gold, s.pred] += 1
    ticks = [c.strip() for c in conts] if len(conts) == k else [str(i + 1) for i in range(k)]
    name = figure.metric if figure and figure.metric else "accuracy"
    acc = next((x for x in run.metric_values if x.task == task and x.name == name), None)
    lines = [f"{_title(run)} - {task} (n={len(samples)})", f"{name} {_metric_text(acc, no_interval(run))}"]
    fig = _new_figure(5.2, 4.6, counts, ticks, lines)
    ax = fig.add_subplot()
    im = ax.imshow(counts, cmap="Blues")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(k), ticks)
    ax.set_yticks(range(k), ticks)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    top = counts.max() or 1
    for g in range(k):
        for p in range(k):
            ax.text(p, g, str(counts[g, p]), ha="center", va="center", fontsize=9,
                    color="white" if counts[g, p] > top / 2 else "black")
    ax.set_title(heading(lines, fig), fontsize=TITLE_PT, loc="left")
    return _save(fig, path), []


def _finite(v) -> bool:
    return v is not None and math.isfinite(v)


def published_rows(report: Report, key: str) -> list:
    """The published rows a ``task.metric`` figure draws: those of that task instance (a row made under
    another protocol, ``abricot_abs@calamita``'s, belongs to its own instance's figure), with a finite value."""
    return [r for r in report.baselines if f"{r.instance}.{r.metric}" == key and _finite(r.value)]


def bars(report: Report, key: str, path: Path, slugs: list[str]) -> tuple[Path, list[str]]:
    """One bar per run with its 95% CI as whiskers; published values as dashed lines. What cannot
    be drawn (a NaN or infinite value or bound) is left out and named, on the figure and in
    the notes returned; a CI that does not contain its value is drawn as recorded, and named."""
    fig, notes = bars_figure(report, key, slugs)
    return _save(fig, path), [f"{path.name}: {n}" for n in notes]


def bars_figure(report: Report, key: str, slugs: list[str]):
    """:func:`bars`'s figure, not saved, and its notes."""
    labels, values, whiskers, notes = [], [], [], []
    for run, slug in zip(report.runs, slugs):
        why = no_interval(run)
        m = next((x for x in run.metric_values if x.key == key), None)
        if m is None:
            continue
        labels.append(slug)
        values.append(m.value if _finite(m.value) else None)
        if not _finite(m.value):
            notes.append(f"{_title(run)}: the value is {m.value}, no bar")
        if m.ci and all(_finite(b) for b in m.ci) and m.ci[0] > m.ci[1]:
            notes.append(f"{_title(run)}: the CI [{m.ci[0]:.3f}, {m.ci[1]:.3f}] is reversed (its lower bound above "
                         "its upper one), no whisker")
        elif m.ci and all(_finite(b) for b in m.ci):
            lo, hi = m.ci
            whiskers.append((len(labels) - 1, lo, hi))
            if _finite(m.value) and not lo <= m.value <= hi:
                notes.append(f"{_title(run)}: the CI [{lo:.3f}, {hi:.3f}] does not contain the value {m.value:.3f} "
                             "(drawn as recorded)")
        elif m.key in why:  # withheld (the 10-answer rule): said as the text report says it
            notes.append(f"{_title(run)}: {no_interval_words(why[m.key])}; no whisker")
        elif m.ci:
            notes.append(f"{_title(run)}: the CI [{m.ci[0]}, {m.ci[1]}] is not finite, no whisker")
    refs = [(b.label, b.value) for b in published_rows(report, key)]
    fig = _new_figure(max(5.0, 1.1 * len(labels) + 3.5), 4.4, labels, values, whiskers, refs, key, notes)
    ax = fig.add_subplot()
    x = np.arange(len(labels))
    drawn = [k for k, v in enumerate(values) if v is not None]
    ax.bar(x[drawn], [values[k] for k in drawn], color="#4a90c2", width=0.6)
    for k, v in enumerate(values):
        if v is None:
            ax.annotate("not drawn", (k, 0), ha="center", va="bottom", fontsize=7, color="#cf222e")
    if whiskers:  # centre and half-width: any recorded interval, whether or not it holds its value
        at, lo, hi = (np.array(c, dtype=float) for c in zip(*whiskers))
        ax.errorbar(at, (lo + hi) / 2, yerr=(hi - lo) / 2, fmt="none", ecolor="black", capsize=5, lw=1.2)
    ax.set_xticks(x, labels, rotation=25, ha="right", fontsize=8)
    ax.set_xlim(-0.6, max(len(labels), 1) - 0.4)  # a run with no bar keeps its place (and its "not drawn")
    ax.axhline(0, color="grey", lw=0.8)
    if refs:
        cmap = ["#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#ff7f0e", "#17becf"]
        for (label, value), color in zip(refs, cmap * (len(refs) // len(cmap) + 1)):
            ax.axhline(value, ls="--", lw=1, color=color, label=f"{label}: {value:.2f}")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), title="published", title_fontsize=7)
    ax.set_ylabel(key)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"{key} per run (whiskers: 95% CI)", fontsize=9, loc="left")
    if notes:  # below the axes and their tick labels (the run names), never over them
        below = ax.get_tightbbox(fig.canvas.get_renderer()).transformed(fig.transFigure.inverted()).y0
        fig.text(0.01, below - 0.02, heading(notes, fig, 7), fontsize=7, va="top", color="#cf222e")
    return fig, notes


def _task_class(name: str):
    """The registered class of a recorded task (None for a task this install does not know)."""
    from abricot_local.errors import TaskError
    from abricot_local.tasks import task_class

    try:
        return task_class(name)
    except TaskError:
        return None


@dataclass(frozen=True)
class Figures:
    paths: tuple[Path, ...]  # the figures written, in order
    notes: tuple[str, ...] = ()  # what could not be drawn (a figure, or values in one)


def write_plots(report: Report, out_dir: str | Path, *, metrics: tuple[str, ...] = (),
                bar_charts: bool = True) -> Figures:
    """Every figure of a report into ``out_dir`` (``bar_charts``: the per-metric bars too).
    A figure that cannot be drawn is left out and named in the notes; the others are written."""
    needs_matplotlib()  # fail early, with the install hint, when matplotlib is missing
    from abricot_local.record.outputs import output_folder

    out = output_folder(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(f"cannot create the plot folder {out}: {exc.strerror or exc}") from None
    slugs = run_slugs(report.runs)
    jobs = []
    for run, slug in zip(report.runs, slugs):
        for task, task_stem in zip(run.tasks, file_stems(run.tasks)):
            cls = _task_class(task)
            for fig in getattr(cls, "figures", ()):
                path = out / f"{slug}-{task_stem}-{fig.kind}.png"
                if fig.kind == "scatter":
                    jobs.append((path, lambda p=path, r=run, t=task, f=fig, c=cls:
                                 scatter(r, t, p, f, getattr(c, "primary_metric", ""))))
                elif fig.kind == "confusion":
                    jobs.append((path, lambda p=path, r=run, t=task, f=fig: confusion(r, p, t, f)))
    if bar_charts:
        keys = metric_keys(report, metrics)
        for key, stem in zip(keys, file_stems(keys)):
            path = out / f"bar-{stem}.png"
            jobs.append((path, lambda p=path, k=key: bars(report, k, p, slugs)))
    paths, notes = [], []
    for path, draw in jobs:
        try:
            written, more = draw()
        except (ResultsError, ValueError) as err:  # bad data in one figure: the others are still drawn
            notes.append(f"{path.name}: not drawn ({err})")
            continue
        paths.append(written)
        notes += more
    return Figures(tuple(paths), tuple(notes))
