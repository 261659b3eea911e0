"""The HTML report's forest plots (report/forest.py lays them out, the page draws them): no two texts overlap and
none leaves the figure, from the figure's own coordinates with the text widths the layout estimates. The cases a
browser showed wrong: the chance label over the title (one run of the reference), a chance label past the right
edge (chance above every value) or over the title (below every value); and long names, many runs, published rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from abricot_local.report import forest

REFERENCE = Path(__file__).parent / "reference"
KEY = "discotex.accuracy"


def assert_legible(fig: dict) -> None:
    boxes = forest.text_boxes(fig["shapes"])
    for x0, y0, x1, y1, text in boxes:
        assert 0 <= x0 and x1 <= fig["width"] and 0 <= y0 and y1 <= fig["height"], (text, x0, y0, x1, y1, fig["width"])
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), f"{a} overlaps {b}"


def column(chance, key=KEY):
    task, metric = key.split(".", 1)
    return {"key": key, "task": task, "metric": metric, "chance": chance}


def row(label, value, lo=None, hi=None, kind="run", key=KEY):
    return {"label": label, "kind": kind, "cells": {key: [value, lo, hi]}}


def test_the_reference_runs_figures_keep_their_texts_apart():
    """One run (the chance label was drawn over the title) and both reference runs, as the page gets them."""
    from abricot_local.report import html, tables

    for runs in (["gemma-3-270m"], ["gemma-3-270m", "smollm2-135m"]):
        data = html.report_data(tables.build([REFERENCE / r for r in runs]), figures=False)
        (fig,) = data["forests"]
        assert fig["caption"] == "discotex: accuracy per run; dashed line: chance level"
        assert [s[2] for s in fig["shapes"] if s[0] == "text" and "chance" in s[2]] == ["chance 0.20"]
        assert_legible(fig)
        names = [s[3] for s in fig["shapes"] if len(s) == 4]
        assert names == [r["label"] for r in data["rows"]]  # each run's row, with its whole name as the tooltip


@pytest.mark.parametrize("chance", [0.9, -0.5, 0.25, 0.0, 1.0])  # above, below, amid the values; at an end
def test_a_chance_label_stays_in_its_band_and_inside_the_figure(chance):
    fig = forest.figure(column(chance), [row("gemma-3-270m", 0.25, 0.142, 0.402), row("m", 0.0, -0.1, 0.1)])
    assert_legible(fig)
    (label,) = [s for s in fig["shapes"] if s[0] == "text" and s[2].startswith("chance ")]
    (line,) = [s for s in fig["shapes"] if s[0] == "line" and s[1].get("class") == "chance"]
    assert abs(label[1]["x"] - line[1]["x1"]) == 3  # beside its line


def test_long_names_many_runs_and_published_rows_keep_their_texts_apart():
    longer = "gemma-3-270m-it-qat-q4_0-unquantized-requantized-imatrix-q3_k_s"
    rows = [row(longer, 0.3, 0.2, 0.4), row("W" * 56, 0.31), row("MODEL-Q4_K_M-ÄÖÜ-模型", 0.2)]
    rows += [row(f"model-{k}", k / 30, None, None) for k in range(20)]
    rows += [row("llama-3.1-70b", 0.41, kind="published"), row("nan-run", float("nan"))]
    key = "a_task_with_a_long_name@some_protocol.a_metric_with_a_long_name"
    fig = forest.figure(column(0.2, key), [{**r, "cells": {key: r["cells"][KEY]}} for r in rows])
    assert_legible(fig)
    names = {s[3]: s[2] for s in fig["shapes"] if len(s) == 4}
    assert names[longer] == longer[:27] + "\u2026" + longer[-28:] and names["W" * 56] == "W" * 56
    assert "llama-3.1-70b (published)" in names and "nan-run" not in names
    assert fig["caption"].endswith("; not drawn: nan-run (nan)")


def test_the_width_estimate_holds_dejavu_sans():
    """The estimate is at least what DejaVu Sans (Debian's sans-serif, the widest of the usual ones) draws."""
    pytest.importorskip("matplotlib")
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    measure = TextToPath()
    for bold in (False, True):
        font = FontProperties(family="DejaVu Sans", size=forest.FONT, weight="bold" if bold else "normal")
        for text in ("discotex.accuracy (dot: value, bar: 95% CI)", "WMWMW@%", "gemma-3-270m (Q4_K_M)", "chance -0.50",
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz 0123456789 _-.,:;()[]"):
            real = measure.get_text_width_height_descent(text, font, ismath=False)[0]  # px at the font's size
            assert forest.text_width(text, bold=bold) >= real, (text, bold)


def test_a_long_run_name_in_a_png_title_is_broken_to_the_figure_width(tmp_path, monkeypatch):
    """plots.py's titles: a run's long name (up to 200 characters) made the PNG wider than the figure
    (bbox_inches="tight"), so the page (420 px) and Markdown shrank all its text; each title line now fits."""
    pytest.importorskip("matplotlib")
    import json
    import shutil

    from abricot_local.report import plots, tables

    name = "gemma-3-270m-it-qat-q4_0-unquantized-requantized-imatrix-q3_k_s-" + "W" * 40
    run = tmp_path / "run"
    shutil.copytree(REFERENCE / "gemma-3-270m", run)
    doc = json.loads((run / "results.json").read_text(encoding="utf-8"))
    doc["model"]["name"] = doc["model"]["alias"] = name
    (run / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(plots, "_save", lambda fig, path: fig)  # drawn, not saved
    fig, _ = plots.confusion(tables.build([run]).runs[0], tmp_path / "c.png", "discotex")
    box = fig.axes[0]._left_title.get_window_extent(fig.canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.get_figwidth() * fig.dpi, (box, fig.get_figwidth() * fig.dpi)
    title = fig.axes[0].get_title(loc="left")
    assert title.replace("\n", "").startswith(name) and title.count("\n") >= 3  # the name broken, whole
