"""Text from outside (folder and file names, model names, task and metric names read from a
results.json) made harmless before it reaches a terminal or a markup table.

:func:`visible` is the one helper every such text goes through: a control character (ANSI
and OSC escapes start with ESC; C1 controls; DEL), a bidirectional override or a line
separator is written as its escape (``\\x1b``, ``\\u202e``), so it is seen instead of acted
on; within a line (``newlines=False``) a newline, carriage return or tab is escaped too. It
is linear in the text. :func:`markup` escapes a markdown table cell's HTML as well. Imports
nothing of the project: the renderers below console/ (report, texttable) use it too. :func:`csv_text`
writes a CSV whose cells a spreadsheet shows as text, never runs as formulas.
"""

from __future__ import annotations

import html
import re

# C0 controls but newline and tab, DEL, C1 controls; the bidirectional controls; line and
# paragraph separators (which some terminals and editors take as a newline)
_ANY = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_TEXT = re.compile(f"[{_ANY}]")
_IN_LINE = re.compile(f"[{_ANY}\n\t]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(text, newlines: bool = False) -> str:
    """``text`` with every character that a terminal would act on written as its escape;
    ``newlines``: a multi-line text whose newlines and tabs are kept (a whole output)."""
    return (_IN_TEXT if newlines else _IN_LINE).sub(_escape, str(text))


def markup(text) -> str:
    """A markdown table cell: visible, its HTML escaped (``<script>`` shows as text), ``|`` escaped."""
    return html.escape(visible(text), quote=False).replace("|", "\\|")


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")  # a number written as text stays as it is
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads a cell starting with as a formula


def cell(text) -> str:
    """A CSV cell a spreadsheet shows as text: one starting like a formula (``=``, ``+``, ``-``,
    ``@``, a tab, a carriage return; not a plain number such as ``-0.5``) gets a leading ``'``
    (OWASP's advice against CSV injection)."""
    text = str(text)
    return "'" + text if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text) else text


def csv_text(frame) -> str:
    """A pandas frame as CSV (no index, no last newline) whose text cells and headers are
    :func:`cell`; numbers are written as they are."""
    out = frame.rename(columns=cell)
    for k in range(out.shape[1]):
        column = out.iloc[:, k]
        if any(isinstance(v, str) for v in column):  # object or string dtype
            out.isetitem(k, column.map(lambda v: cell(v) if isinstance(v, str) else v))
    return out.to_csv(index=False).rstrip("\n")
