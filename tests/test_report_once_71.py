"""`report` computes each thing once, with the same output: a figure is drawn once per PNG (its crop measured without
savefig's ``bbox_inches="tight"`` extra draw; the same bytes), a figure drawn again in this process (the page and
``--plot``, or a second report of the same runs) is written from its PNG, not redrawn; texttable.fit measures plain
lists, not DataFrame columns (the same text); tables._harmless sets again only the columns it changes (the same
frame). Reference runs (DISCOTEX) and a fake-backend ABRICOT run (4 items: withheld intervals, a bar chart's notes)."""

from __future__ import annotations

import copy
import io
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE

from abricot_local.report import tables, texttable

REFERENCE = Path(__file__).parent / "reference"
ABRICOT = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
METRICS = ("abricot_abs.pearson_continuous",)  # a bar chart with a note (a withheld interval) and published rows


@pytest.fixture
def plots(monkeypatch):
    """report.plots with an empty store of drawn figures, and each Figure.draw counted (``plots.draws``)."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from abricot_local.report import plots

    monkeypatch.setattr(plots, "_DRAWN", {})
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(self) or real(self, renderer))
    monkeypatch.setattr(plots, "draws", draws, raising=False)
    return plots


@pytest.fixture
def runs(finished_run):
    return [str(REFERENCE / "gemma-3-270m"), str(finished_run("run", "fake", *ABRICOT))]


def test_each_figure_is_drawn_once_and_is_the_png_savefig_tight_writes(plots, runs, tmp_path, monkeypatch):
    real, drawn = plots._save, {}

    def save(fig, path):
        tight = io.BytesIO()  # the PNG savefig's bbox_inches="tight" writes (it draws the figure twice)
        copy.deepcopy(fig).savefig(tight, format="png", dpi=plots.DPI, bbox_inches="tight")
        before = len(plots.draws)
        real(fig, path)
        drawn[path.name] = len(plots.draws) - before
        assert path.read_bytes() == tight.getvalue(), path.name
        return path

    monkeypatch.setattr(plots, "_save", save)
    figs = plots.write_plots(tables.build(runs), tmp_path, metrics=METRICS)
    names = [p.name for p in figs.paths]
    assert f"bar-{METRICS[0]}.png" in names and any("no whisker" in n for n in figs.notes)  # notes under its axes
    assert {n.rsplit("-", 1)[1] for n in names} == {"scatter.png", "confusion.png", f"{METRICS[0]}.png"}, names
    assert len(drawn) == len(names) >= 4 and set(drawn.values()) == {1}, drawn  # was 2: savefig's "tight"


def test_a_figure_drawn_again_is_written_from_its_png_and_one_changed_is_drawn_again(plots, runs, tmp_path):
    first = plots.write_plots(tables.build(runs), tmp_path / "a", metrics=METRICS)
    assert len(plots.draws) == len(first.paths)
    again = plots.write_plots(tables.build(runs), tmp_path / "b", metrics=METRICS)  # e.g. the page, then --plot
    assert len(plots.draws) == len(first.paths)  # none drawn again
    assert [p.name for p in again.paths] == [p.name for p in first.paths]
    assert [p.read_bytes() for p in again.paths] == [p.read_bytes() for p in first.paths]
    changed = tmp_path / "gemma"  # a run named otherwise: its figure (its title) drawn again, none of the others
    shutil.copytree(runs[0], changed)
    doc = json.loads((changed / "results.json").read_text(encoding="utf-8"))
    doc["model"]["name"] = doc["model"]["alias"] = "gemma-renamed"
    (changed / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    plots.write_plots(tables.build([str(changed), runs[1]]), tmp_path / "d", metrics=METRICS)
    assert len(plots.draws) == len(first.paths) + 1


def test_a_figure_drawn_under_other_settings_is_drawn_again(plots, tmp_path):
    import matplotlib

    def drawn(name):
        fig = plots._new_figure(1.0, 1.0, "the same values")
        fig.add_subplot().set_title("t")
        plots._save(fig, tmp_path / name)
        return len(plots.draws)

    assert drawn("a.png") == 1 and drawn("b.png") == 1
    with matplotlib.rc_context({"font.size": 7}):
        assert drawn("c.png") == 2
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes() != (tmp_path / "c.png").read_bytes()


def test_a_figure_is_known_by_every_value_it_shows(plots):
    key = lambda *shows: plots._SHOWS[plots._new_figure(5.0, 4.0, *shows)]  # noqa: E731
    apart = [key(np.array([0.0])), key(np.array([-0.0])), key(np.array([0.0], dtype=np.float32)), key([1]), key([1.0]),
             key(["a"]), key(("a",)), key("a", None), key(np.zeros((2, 1))), key(np.zeros((1, 2)))]
    assert len(set(apart)) == len(apart)
    assert key(np.array([0.5, 1.0]), ["t", "u"], None) == key(np.array([0.5, 1.0]), ["t", "u"], None)


# -- texttable.fit: the DataFrame construction it replaces, kept here as the reference ---------------------------
def _width(df, col):
    return max(len(x) for v in [str(col), *map(str, df[col])] for x in str(v).split("\n"))


def _total(df):
    return sum(_width(df, c) for c in df.columns) + texttable.GAP * (len(df.columns) - 1)


def _folded(df, col, target, cut=False):
    out = df.copy()
    out[col] = ["\n".join(texttable._fold(" ".join(str(v).split("\n")), target, cut)) for v in df[col]]
    return out


def _narrowed(df, wraps, floor, width, cut=False):
    wraps = [c for c in wraps if c in df.columns]
    while wraps:
        widths = [_width(df, c) for c in df.columns]
        total = sum(widths) + texttable.GAP * (len(df.columns) - 1)
        if total <= width:
            break
        col = max(wraps, key=dict(zip(df.columns, widths)).__getitem__)
        now = _width(df, col)
        target = max(floor, now - (total - width))
        folded = _folded(df, col, target, cut) if target < now else df
        if _width(folded, col) >= now:
            wraps.remove(col)
        df = folded
    return df


def _short_headers(df):
    names = {}
    for c in df.columns:
        cells = max((len(x) for v in df[c] for x in str(v).split("\n")), default=0)
        if len(str(c)) > cells:
            parts = re.split(r"(?<=[. ])", str(c))
            lines = [""]
            for part in parts:
                if lines[-1] and len(lines[-1]) + len(part.rstrip()) > max(cells, max(len(x.rstrip()) for x in parts)):
                    lines.append("")
                lines[-1] += part
            names[c] = "\n".join(x.rstrip() for x in lines)
    return df.rename(columns=names)


def _named(df, names):
    return [c for c in df.columns if str(c).replace("\n", "") in names or str(c) in names]


def _blocks(df, keys, groups, width, keep_rows=False):
    key_cols, rest = list(df.columns[:keys]), list(df.columns[keys:])
    plain = {c: str(c).replace("\n", "") for c in rest}
    room = width - _total(df[key_cols])
    units = []
    for c in rest:
        group = next((g for g in groups if plain[c] in g), None)
        if group is None:
            units.append([c])
        elif not any(c in u for u in units):
            units.append([x for x in rest if plain[x] in group])
    blocks = [[]]
    size = lambda cols: sum(_width(df, c) + texttable.GAP for c in cols)  # noqa: E731
    for unit in units:
        if blocks[-1] and size(blocks[-1]) + size(unit) > room:
            blocks.append([])
        for c in unit:
            if blocks[-1] and size(blocks[-1]) + size([c]) > room:
                blocks.append([])
            blocks[-1].append(c)
    parts = []
    for block in blocks:
        part = df[key_cols + block]
        keep = [any(v.strip() not in ("", "-") if keep_rows else v.strip() for v in row)
                for row in part[block].itertuples(index=False)]
        if any(keep):
            parts.append(part if keep_rows else part[keep])
    return parts


def reference_fit(df, *, keys=1, wrap_cols=(), groups=(), fold_last=(), width=texttable.WIDTH, keep_rows=False):
    shown = texttable.shown
    df = df.astype(str)
    df = pd.DataFrame([[shown(v) for v in r] for r in df.itertuples(index=False)], columns=[shown(c) for c in df.columns],
                      index=df.index, dtype=object) if len(df) else df.rename(columns=shown)
    if _total(df) > width:
        for c in _named(df, wrap_cols):
            if _width(df, c) > texttable.CAP:
                df = _folded(df, c, texttable.CAP)
    if _total(df) > width:
        df = _short_headers(df)
    if _total(df) > width:
        narrow = _narrowed(df, _named(df, wrap_cols), texttable.MIN_WRAP, width)
        if _total(narrow) <= width:
            df = narrow
    split = _total(df) > width and len(df.columns) > keys + 1
    parts = _blocks(df, keys, groups, width, keep_rows) if split else [df]
    parts = [_narrowed(part, _named(part, fold_last), texttable.MIN_WRAP, width, cut=True) for part in parts]
    return "\n\n".join(_grid(part) for part in parts), split


def _grid(df):
    cols, rows = [str(c) for c in df.columns], [[str(v) for v in r] for r in df.itertuples(index=False)]
    widths = [max(len(x) for v in [c, *(r[i] for r in rows)] for x in v.split("\n")) for i, c in enumerate(cols)]
    out = []
    for r in [cols, None, *rows]:
        if r is None:
            out.append("  ".join("-" * w for w in widths))
            continue
        cells = [v.split("\n") for v in r]
        height = max(len(c) for c in cells)
        if r is cols:
            cells = [[""] * (height - len(c)) + c for c in cells]
        for k in range(height):
            out.append("  ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths)).rstrip())
    return "\n".join(out)


WORDS = ["a", "bb", "gemma-3-270m-it-qat-q4_0", "/runs/sweep/gemma-3-270m-q4_k_m/a/b", "0.123 [0.101, 0.214]", "-", "",
         " ", "x" * 70, "notes: a note that goes on for a while", "abricot_abs.pearson", "multi\nline", "\x1b[31m",
         "sha256:" + "f" * 64, "y" * 300, "q8_0 vs q4_k_m: differs by more than 0.05"]
NAMES = ["model", "quant", "source", "folder", "notes", "discotex.n", "abricot_abs.pearson_continuous", "x.y z",
         "reference", "verdict", "answers changed", "difference [90% CI]"]


def test_fit_draws_the_text_the_dataframe_construction_drew():
    rng = random.Random(71)
    seen = set()
    for _ in range(40):
        names = rng.sample(NAMES, rng.randint(1, len(NAMES)))
        rows = [[rng.choice([1, 2.5, None, float("nan")]) if rng.random() < 0.1 else
                 " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5))) for _ in names]
                for _ in range(rng.randint(0, 6))]
        df = pd.DataFrame(rows, columns=names) if rows else pd.DataFrame(columns=names)
        kw = dict(keys=rng.randint(0, 3), wrap_cols=tuple(rng.sample(names, rng.randint(0, len(names)))),
                  groups=tuple(tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(rng.randint(0, 2))),
                  fold_last=tuple(rng.sample(names, rng.randint(0, min(2, len(names))))),
                  width=rng.choice([24, 40, 60, 80, 120, 200]), keep_rows=rng.random() < 0.3)
        got = texttable.fit(df, **kw)
        assert got == reference_fit(df, **kw), (df.to_dict(), kw)
        seen.add(got[1])
    assert seen == {True, False}  # tables split in blocks, and whole


def test_fit_measures_two_columns_of_one_name_each_by_its_own_cells():
    """A name twice (a metric named ``n`` beside a task's ``TASK.n``): each column measured by its own cells (the
    DataFrame construction read ``df[name]`` as both columns, measured them by their header, and drew the table
    wider than asked)."""
    df = pd.DataFrame([["a", "one two three four five six", "seven eight nine ten eleven"]],
                      columns=["model", "t.n", "t.n"])
    text, split = texttable.fit(df, wrap_cols=("t.n",), width=40)
    assert split and max(map(len, text.splitlines())) <= 40
    assert "one two three four five six" in text and "seven eight nine ten eleven" in text


# -- tables._harmless: the frame it made, with the columns nothing changes in left as they are ------------------
def _reference_harmless(df, namer=None):
    from abricot_local.report.comparison import worded
    from abricot_local.report.safe import visible

    out = df.rename(columns=lambda c: visible(c))
    for k in range(len(out.columns)):
        if not pd.api.types.is_numeric_dtype(out.dtypes.iloc[k]):
            out.iloc[:, k] = out.iloc[:, k].map(lambda v: visible(worded(v, namer)) if isinstance(v, str) else v)
    return out


def test_harmless_makes_the_frame_it_made():
    from abricot_local.cli.report import WORDS as namer
    from abricot_local.errors import opt

    df = pd.DataFrame({"model": ["a", "b\x1b[2J", "c"], "notes": ["", f"see {opt('plot_dir')}", None],
                       "plain": ["x", "y", "z"], "mixed": [True, None, "t"], "value": [0.5, float("nan"), 1.0],
                       "n": pd.array([1, None, 3], dtype="Int64"), "bad\x07name": ["1", "2", "3"]})
    for frame in (df, df.astype({"model": object, "plain": object}), df.iloc[:0]):
        for words in (None, namer):
            got, want = tables._harmless(frame, words), _reference_harmless(frame, words)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert list(got.columns) == list(want.columns) and got.astype(str).values.tolist() == \
                want.astype(str).values.tolist()
    assert tables._harmless(df, namer)["notes"].tolist()[1] != f"see {opt('plot_dir')}"  # a column that changes
