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
    cols = [str(c) if ready else shown(c) for c in df.columns]
    rows = [[str(v) if ready else shown(v) for v in r] for r in df.itertuples(index=False)]
    widths = [max(len(x) for v in [c, *(r[i] for r in rows)] for x in v.split("\n")) for i, c in enumerate(cols)]
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


def _width(df: pd.DataFrame, col) -> int:
    return max(len(x) for v in [str(col), *map(str, df[col])] for x in _lines(v))


def _total(df: pd.DataFrame) -> int:
    return sum(_width(df, c) for c in df.columns) + GAP * (len(df.columns) - 1)


def _folded(df: pd.DataFrame, col, target: int, cut: bool = False) -> pd.DataFrame:
    out = df.copy()
    out[col] = ["\n".join(_fold(" ".join(_lines(v)), target, cut)) for v in df[col]]
    return out


def _narrowed(df: pd.DataFrame, wraps: list[str], floor: int, width: int, cut: bool = False) -> pd.DataFrame:
    """The wrap columns folded, the widest first, until the table fits or none is wider than ``floor``."""
    wraps = [c for c in wraps if c in df.columns]
    while wraps:
        widths = [_width(df, c) for c in df.columns]  # each column measured once a round (_total's sum)
        total = sum(widths) + GAP * (len(df.columns) - 1)
        if total <= width:
            break
        col = max(wraps, key=dict(zip(df.columns, widths)).__getitem__)
        now = _width(df, col)
        target = max(floor, now - (total - width))
        folded = _folded(df, col, target, cut) if target < now else df
        if _width(folded, col) >= now:  # nothing left to fold in this column
            wraps.remove(col)
        df = folded
    return df


def _short_headers(df: pd.DataFrame) -> pd.DataFrame:
    """Headers wider than their cells folded after a ``.`` or a space (``task.metric`` on two lines)."""
    names = {}
    for c in df.columns:
        cells = max((len(x) for v in df[c] for x in _lines(v)), default=0)
        if len(str(c)) > cells:
            parts = re.split(r"(?<=[. ])", str(c))
            lines = [""]
            for part in parts:
                if lines[-1] and len(lines[-1]) + len(part.rstrip()) > max(cells, max(len(x.rstrip()) for x in parts)):
                    lines.append("")
                lines[-1] += part
            names[c] = "\n".join(x.rstrip() for x in lines)
    return df.rename(columns=names)


def _named(df: pd.DataFrame, names: Sequence[str]) -> list:
    """The columns of ``df`` named in ``names`` (a folded header read as its one-line name)."""
    return [c for c in df.columns if str(c).replace("\n", "") in names or str(c) in names]


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
    df = pd.DataFrame([[shown(v) for v in r] for r in df.itertuples(index=False)], columns=[shown(c) for c in df.columns],
                      index=df.index, dtype=object) if len(df) else df.rename(columns=shown)
    if _total(df) > width:
        for c in _named(df, wrap_cols):
            if _width(df, c) > CAP:
                df = _folded(df, c, CAP)
    if _total(df) > width:
        df = _short_headers(df)
    if _total(df) > width:
        narrow = _narrowed(df, _named(df, wrap_cols), MIN_WRAP, width)
        if _total(narrow) <= width:
            df = narrow
    split = _total(df) > width and len(df.columns) > keys + 1
    parts = _blocks(df, keys, groups, width, keep_rows) if split else [df]
    parts = [_narrowed(part, _named(part, fold_last), MIN_WRAP, width, cut=True) for part in parts]
    return "\n\n".join(grid(part, False, ready=True) for part in parts), split


def _blocks(df: pd.DataFrame, keys: int, groups: Sequence[Sequence[str]], width: int,
            keep_rows: bool = False) -> list[pd.DataFrame]:
    key_cols, rest = list(df.columns[:keys]), list(df.columns[keys:])
    plain = {c: str(c).replace("\n", "") for c in rest}
    room = width - _total(df[key_cols])
    units: list[list] = []
    for c in rest:  # in column order; a group's columns together
        group = next((g for g in groups if plain[c] in g), None)
        if group is None:
            units.append([c])
        elif not any(c in u for u in units):
            units.append([x for x in rest if plain[x] in group])
    blocks: list[list] = [[]]
    widths = {c: _width(df, c) for c in dict.fromkeys(rest)}  # df is not changed here: each column measured once
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
        part = df[key_cols + block]
        keep = [any(v.strip() not in ("", "-") if keep_rows else v.strip() for v in row)
                for row in part[block].itertuples(index=False)]
        if any(keep):
            parts.append(part if keep_rows else part[keep])
    return parts
