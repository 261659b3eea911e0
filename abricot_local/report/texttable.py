"""Tables and prose as terminal text no wider than :data:`WIDTH` columns (pure; nothing printed).

:func:`grid` draws one table (aligned text, or markdown left whole). :func:`fit` draws an
aligned table within a width: long cells of the columns it may wrap go onto several
lines, and when the table is still too wide its other columns are split into blocks
that each repeat the key columns. :func:`wrap` folds a line of prose.

Every cell is shown harmless (console.safe: control characters as escapes, markdown's HTML
escaped); the text table shows at most :data:`CELL_MAX` characters of it (the rest counted, and
where to see it whole said), markdown every cell whole up to :data:`MARKDOWN_MAX`, so a hostile or
huge name (a 10 MB model name) costs linear time and a few lines.
"""

from __future__ import annotations

import re
import textwrap
from typing import Sequence

import pandas as pd

from abricot_local.report.safe import markup, visible

WIDTH = 120  # the text report's and compare's widest line
GAP = 2  # spaces between columns
CAP = 36  # a cell of a column that may wrap is folded onto lines this long
MIN_WRAP = 20  # ... and, to avoid splitting a table, this long
CELL_MAX = 240  # characters of a cell the text table shows; the rest is counted, and where it is whole said
WHOLE = "the markdown, csv and json formats show it whole"
WHOLE_DATA = "the csv and json formats show it whole"
MARKDOWN_MAX = 100_000  # markdown shows every cell whole but one past this (a hostile 10 MB name), cut as above


def shown(text, limit: int = CELL_MAX, whole: str = WHOLE) -> str:
    """A cell as a table shows it: its first ``limit`` characters (the rest counted, and ``whole``: where
    to see it whole), control characters as escapes (its newlines kept: a folded cell's lines)."""
    text = str(text)
    if len(text) <= limit:
        return visible(text, newlines=True)
    return visible(text[:limit], newlines=True) + f"... (+{len(text) - limit:,} characters; {whole})"


def wrap(text: str, width: int = WIDTH, indent: str = "") -> str:
    """One line of prose folded to ``width`` (continuation lines indented by ``indent``)."""
    return textwrap.fill(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False) \
        if len(text) > width else text


def _cut(word: str, width: int) -> list[str]:
    """A word longer than ``width`` broken after a ``/``, ``_``, ``-`` or ``.`` where one fits
    (linear: each piece is looked at once)."""
    out, start = [], 0
    while len(word) - start > width:
        at = max(word.rfind(c, start, start + width) for c in "/_-.,") - start
        at = at + 1 if at >= width // 2 else width
        out.append(word[start:start + at])
        start += at
    return out + [word[start:]]


def _fold(text: str, width: int, cut: bool = True) -> list[str]:
    """A cell's text as lines of at most ``width`` characters (words kept whole where they fit;
    with ``cut`` false always but for paths: a SHA-256 or a setting's name is never broken)."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            for piece in (_cut(word, width) if cut or "/" in word else [word]):  # a path may be cut after a /
                if line and len(line) + 1 + len(piece) <= width:
                    line += " " + piece
                else:
                    if line:
                        lines.append(line)
                    line = piece
        lines.append(line)
    return lines


def grid(df: pd.DataFrame, markdown: bool, *, ready: bool = False) -> str:
    """``df`` as an aligned text table (a header or cell holding ``\\n`` takes several lines) or
    markdown (each cell whole, up to :data:`MARKDOWN_MAX`, :func:`console.safe.markup`); ``ready``: cells
    already :func:`shown`."""
    if markdown:
        cell = lambda s: markup(" ".join(_lines(shown(s, MARKDOWN_MAX, WHOLE_DATA))))  # noqa: E731
        cols, rows = [cell(c) for c in df.columns], [[cell(v) for v in r] for r in df.itertuples(index=False)]
        lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    return _aligned([str(c) if ready else shown(c) for c in df.columns],
                    [[str(v) if ready else shown(v) for v in r] for r in df.itertuples(index=False)])


def _aligned(cols: list[str], rows: list[list[str]]) -> str:
    """A header and its rows (texts as shown) as an aligned text table."""
    widths = [_width(cols, rows, i) for i in range(len(cols))]
    out = []
    for r in [cols, None, *rows]:
        if r is None:
            out.append("  ".join("-" * w for w in widths))
            continue
        cells = [v.split("\n") for v in r]
        height = max(len(c) for c in cells)
        if r is cols:  # a folded header sits on the rule
            cells = [[""] * (height - len(c)) + c for c in cells]
        for k in range(height):
            out.append("  ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths)).rstrip())
    return "\n".join(out)


def _lines(text: str) -> list[str]:
    return str(text).split("\n")


# fit's tables: a header (``cols``) and rows of texts as shown, a column by its place (plain lists: fit measures and
# folds columns many times, and a DataFrame's column costs more to reach than all its texts to measure)
def _width(cols: list[str], rows: list[list[str]], k: int) -> int:
    return max(len(x) for v in [cols[k], *(r[k] for r in rows)] for x in v.split("\n"))


def _total(cols: list[str], rows: list[list[str]]) -> int:
    return sum(_width(cols, rows, k) for k in range(len(cols))) + GAP * (len(cols) - 1)


def _folded(rows: list[list[str]], k: int, target: int, cut: bool = False) -> list[list[str]]:
    return [[*r[:k], "\n".join(_fold(" ".join(r[k].split("\n")), target, cut)), *r[k + 1:]] for r in rows]


def _narrowed(cols: list[str], rows: list[list[str]], wraps: list[int], floor: int, width: int,
              cut: bool = False) -> list[list[str]]:
    """The wrap columns folded, the widest first, until the table fits or none is wider than ``floor``."""
    wraps = list(wraps)
    widths = [_width(cols, rows, k) for k in range(len(cols))]  # kept as columns are folded
    while wraps:
        total = sum(widths) + GAP * (len(cols) - 1)
        if total <= width:
            break
        col = max(wraps, key=widths.__getitem__)
        now = widths[col]
        target = max(floor, now - (total - width))
        if target < now:
            rows = _folded(rows, col, target, cut)
            widths[col] = _width(cols, rows, col)
        if widths[col] >= now:  # nothing left to fold in this column
            wraps.remove(col)
    return rows


def _short_headers(cols: list[str], rows: list[list[str]]) -> list[str]:
    """Headers wider than their cells folded after a ``.`` or a space (``task.metric`` on two lines)."""
    out = []
    for k, c in enumerate(cols):
        cells = max((len(x) for r in rows for x in r[k].split("\n")), default=0)
        if len(c) > cells:
            parts = re.split(r"(?<=[. ])", c)
            room = max(cells, max(len(x.rstrip()) for x in parts))
            lines = [""]
            for part in parts:
                if lines[-1] and len(lines[-1]) + len(part.rstrip()) > room:
                    lines.append("")
                lines[-1] += part
            c = "\n".join(x.rstrip() for x in lines)
        out.append(c)
    return out


def _named(cols: list[str], names: Sequence[str]) -> list[int]:
    """The places of the columns named in ``names`` (a folded header read as its one-line name)."""
    return [k for k, c in enumerate(cols) if c.replace("\n", "") in names or c in names]


def fit(df: pd.DataFrame, *, keys: int = 1, wrap_cols: Sequence[str] = (), groups: Sequence[Sequence[str]] = (),
        fold_last: Sequence[str] = (), width: int = WIDTH, keep_rows: bool = False) -> tuple[str, bool]:
    """``df`` as aligned text no wider than ``width``, and whether it had to be split in blocks.

    While the table is too wide: long cells of the ``wrap_cols`` are folded at spaces onto lines
    of at most :data:`CAP` characters (a word is never broken: a SHA-256, a setting's name); headers longer than their cells are folded; the wrap columns
    are narrowed down to :data:`MIN_WRAP`; then the columns after the first ``keys`` are
    split into blocks that each repeat those key columns (the columns of one of ``groups``
    stay in one block where they fit; a block leaves out the rows that have nothing in it but
    their keys; ``keep_rows``: every row in every block, a block left out only when no row has anything in it but
    ``-``); last, the ``fold_last`` columns (a folder's path) of a block still too wide are folded."""
    df = df.astype(str)
    cols, rows = [shown(c) for c in df.columns], [[shown(v) for v in r] for r in df.itertuples(index=False)]
    if _total(cols, rows) > width:
        for k in _named(cols, wrap_cols):
            if _width(cols, rows, k) > CAP:
                rows = _folded(rows, k, CAP)
    if _total(cols, rows) > width:
        cols = _short_headers(cols, rows)
    if _total(cols, rows) > width:
        narrow = _narrowed(cols, rows, _named(cols, wrap_cols), MIN_WRAP, width)
        if _total(cols, narrow) <= width:
            rows = narrow
    split = _total(cols, rows) > width and len(cols) > keys + 1
    parts = _blocks(cols, rows, keys, groups, width, keep_rows) if split else [(cols, rows)]
    return "\n\n".join(_aligned(c, _narrowed(c, r, _named(c, fold_last), MIN_WRAP, width, cut=True))
                       for c, r in parts), split


def _blocks(cols: list[str], rows: list[list[str]], keys: int, groups: Sequence[Sequence[str]], width: int,
            keep_rows: bool = False) -> list[tuple[list[str], list[list[str]]]]:
    key_cols, rest = list(range(keys)), list(range(keys, len(cols)))
    plain = {c: cols[c].replace("\n", "") for c in rest}
    widths = {c: _width(cols, rows, c) for c in range(len(cols))}  # the table is not changed here: measured once
    room = width - (sum(widths[c] for c in key_cols) + GAP * (len(key_cols) - 1))
    units: list[list] = []
    for c in rest:  # in column order; a group's columns together
        group = next((g for g in groups if plain[c] in g), None)
        if group is None:
            units.append([c])
        elif not any(c in u for u in units):
            units.append([x for x in rest if plain[x] in group])
    blocks: list[list] = [[]]
    size = lambda cols: sum(widths[c] + GAP for c in cols)  # noqa: E731
    for unit in units:
        if blocks[-1] and size(blocks[-1]) + size(unit) > room:
            blocks.append([])
        for c in unit:  # a group wider than a block is split column by column
            if blocks[-1] and size(blocks[-1]) + size([c]) > room:
                blocks.append([])
            blocks[-1].append(c)
    parts = []
    for block in blocks:
        keep = [any(r[c].strip() not in ("", "-") if keep_rows else r[c].strip() for c in block) for r in rows]
        if any(keep):
            parts.append(([cols[c] for c in key_cols + block],
                          [[r[c] for c in key_cols + block] for r, kept in zip(rows, keep) if kept or keep_rows]))
    return parts
