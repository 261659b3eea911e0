"""The HTML report's forest plots, laid out here and drawn by the page (assets/report.js) as SVG.

One figure per metric: a row per run or published value (a dot or diamond, the 95% CI as a bar), the
task's chance level as a dashed line. Every text has its own band, so none is drawn over another and none
leaves the figure: the title on top, the chance label in a band of its own between the title and the plot
area (beside its line, on the side where it fits), the names left of the plot area (their margin as wide as
the longest), the tick labels under it. A text's width is estimated from its font size and its characters
(:func:`text_width`, sized for DejaVu Sans, the widest of the usual sans-serif fonts), and the page draws
the texts at those places: :func:`text_boxes` gives the boxes the layout keeps apart. A run's withheld interval
(no bar) is said in the caption, with why, as the PNG figures and the tables say it (frames.no_interval_words).
"""

from __future__ import annotations

import math

from abricot_local.analysis.frames import no_interval_words

FONT = 11  # px: the page's svg text (assets/report.css)
BOLD = 1.15  # a bold text (the title) this much wider
ASCENT, DESCENT = 0.95, 0.25  # a text's box above and below its baseline, in font sizes
LINE = 16  # px from one band's baseline to the next's
LABEL_MAX = 56  # a longer name is cut in its middle (its start and its end, the quant, kept), whole in its tooltip
PLOT_W, RIGHT, ROW_H, GAP = 330, 20, 20, 8  # px: the plot area with its right pad, a row, the names' gap
NARROW, WIDE = set(" .,:;'!|()[]{}/\\-ijlft"), set("mwMW%@")


def text_width(text: str, size: float = FONT, bold: bool = False) -> float:
    """An upper estimate of a text's width in px: per character a share of the font size (narrow marks,
    lower case and digits, capitals, the widest letters; any other script as wide as its size)."""
    em = sum(0.4 if c in NARROW else 1.0 if c in WIDE or not c.isascii() else 0.8 if c.isupper() else 0.64
             for c in text)
    return em * size * (BOLD if bold else 1.0)


def text_boxes(shapes: list) -> list[tuple[float, float, float, float, str]]:
    """(x0, y0, x1, y1, text) of each text of a figure's shapes, as :func:`text_width` estimates them."""
    out = []
    for tag, attrs, *text in shapes:
        if tag != "text":
            continue
        w = text_width(text[0], bold="font-weight" in attrs)
        x0 = attrs["x"] - {"start": 0, "middle": w / 2, "end": w}[attrs.get("text-anchor", "start")]
        out.append((x0, attrs["y"] - ASCENT * FONT, x0 + w, attrs["y"] + DESCENT * FONT, text[0]))
    return out


def short_name(name: str) -> str:
    return name[:27] + "\u2026" + name[-28:] if len(name) > LABEL_MAX else name


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fmt(v, d: int = 3) -> str:
    """The page's number format (report.js fmt): ``d`` decimals, else inf, -inf or nan."""
    if _finite(v):
        return f"{v + 0.0:.{d}f}"  # + 0.0: a -0.0 as 0 (toFixed's way)
    return "inf" if v == math.inf else "-inf" if v == -math.inf else "nan"


def _ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    step = 10.0 ** math.floor(math.log10((hi - lo) / 4))
    mult = next((m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 6), 10)
    out, t = [], math.ceil(lo / (step * mult)) * step * mult
    while t <= hi:
        out.append((t, f"{0.0 if abs(t) < 1e-12 else t:.{2 if step * mult < 0.1 else 1}f}"))
        t += step * mult
    return out


def figure(column: dict, rows: list[dict]) -> dict | None:
    """The forest plot of one leaderboard column (html._leaderboard's column and rows): its size, its shapes
    (``[tag, attributes]``, a text ``[tag, attributes, text]``, a name ``[..., text, its whole name]``) and its
    caption; None when no row has the metric (only a caption when no value is finite)."""
    key, chance = column["key"], column["chance"]
    drawn = [r for r in rows if key in r["cells"] and _finite(r["cells"][key][0])]
    missing = [f"{r['label']} ({_fmt(r['cells'][key][0])})" for r in rows
               if key in r["cells"] and not _finite(r["cells"][key][0])]
    untold = "; not drawn: " + ", ".join(missing) if missing else ""
    if not drawn:
        return {"caption": key + untold, "shapes": []} if missing else None
    full = [r["label"] + (" (published)" if r["kind"] == "published" else "") for r in drawn]
    names = [short_name(n) for n in full]
    title = f"{key} (dot: value, bar: 95% CI)"
    xs = [v for r in drawn for v in r["cells"][key][:3] if _finite(v)] + ([chance] if _finite(chance) else [])
    lo, hi = min(xs), max(xs)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.06
    lo, hi = lo - pad, hi + pad
    ticks = _ticks(lo, hi)
    left = max(120, GAP + 6 + math.ceil(max(text_width(n) for n in names)))
    right = max(RIGHT, math.ceil(max((text_width(text) for _, text in ticks), default=0) / 2) + 2)  # a tick's label
    width = max(left + PLOT_W, math.ceil(text_width(title, bold=True)) + 8)

    def X(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - right)

    bands = [14] + ([14 + LINE] if _finite(chance) else [])  # the title's baseline, then the chance label's
    top = bands[-1] + DESCENT * FONT + 8  # the plot area under the last band
    height = math.ceil(top + ROW_H * len(drawn) + 30)
    shapes: list = [["text", {"x": 4, "y": bands[0], "font-weight": 600}, title]]
    for t, text in ticks:
        shapes += [["line", {"x1": X(t), "x2": X(t), "y1": top - 4, "y2": height - 24, "class": "grid"}],
                   ["text", {"x": X(t), "y": height - 10, "text-anchor": "middle"}, text]]
    if _finite(chance):
        label, at = "chance " + _fmt(chance, 2), X(chance)
        fits_right = at + 3 + text_width(label) <= width - 2
        shapes += [["line", {"x1": at, "x2": at, "y1": top - 6, "y2": height - 24, "class": "chance"}],
                   ["text", {"x": at + 3 if fits_right else at - 3, "y": bands[1], "class": "chance-label",
                             "text-anchor": "start" if fits_right else "end"}, label]]
    for i, (r, name) in enumerate(zip(drawn, names)):
        y, v = top + ROW_H * i + ROW_H / 2, r["cells"][key]
        shapes.append(["text", {"x": left - GAP, "y": y + 4, "text-anchor": "end"}, name, full[i]])
        if _finite(v[1]) and _finite(v[2]):
            shapes.append(["line", {"x1": X(v[1]), "x2": X(v[2]), "y1": y, "y2": y, "class": "whisker"}])
        if r["kind"] == "published":
            shapes.append(["rect", {"x": X(v[0]) - 4, "y": y - 4, "width": 8, "height": 8, "class": "pub",
                                    "transform": f"rotate(45 {X(v[0])} {y})"}])
        else:
            shapes.append(["circle", {"cx": X(v[0]), "cy": y, "r": 4.5, "class": "run"}])
    # a withheld interval (a cell's 4th element, html._leaderboard): no whisker, and why, as the PNG figures say it
    withheld = "".join(f"; {name}: {no_interval_words(r['cells'][key][3])}, no whisker"
                       for r, name in zip(drawn, full) if len(r["cells"][key]) > 3)
    return {"width": width, "height": height, "shapes": shapes,
            "caption": f"{column['task']}: {column['metric']} per run; dashed line: chance level{withheld}{untold}"}
