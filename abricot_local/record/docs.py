"""docs/RESULTS.md's field tables, generated from the record's dataclasses.

The page keeps its prose; each table sits between ``<!-- record:NAME -->`` and
``<!-- /record:NAME -->`` and is rewritten from the section NAME's fields (name,
type, when written, and the ``doc`` in each field's metadata).
``python -m abricot_local.record.docs docs/RESULTS.md`` rewrites the file;
tests/test_record.py checks the committed page equals what this writes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import MISSING
from pathlib import Path

from abricot_local.record.codec import Section, type_name, typed_fields
from abricot_local.record.samples import Sample
from abricot_local.record.schema import SECTIONS

BLOCK = re.compile(r"(<!-- record:(\w+) -->\n)(.*?)(<!-- /record:\2 -->)", re.S)
DOCUMENTED = {cls.__name__: cls for cls in (*SECTIONS, Sample)}


def _written(f) -> str:
    if f.default is MISSING and f.default_factory is MISSING:
        return "always (required)"
    return "when set" if f.metadata["write"] == "set" else "always"


def table(cls: type[Section]) -> str:
    """The section's docstring, then its fields as a markdown table."""
    rows = ["| field | type | written | content |", "|---|---|---|---|"]
    for f, tp in typed_fields(cls):
        doc = f.metadata["doc"].replace("|", "\\|")
        rows.append(f"| `{f.name}` | {type_name(tp)} | {_written(f)} | {doc} |")
    doc = " ".join((cls.__doc__ or "").split())
    return f"{doc}\n\n" + "\n".join(rows) + "\n"


def render(text: str) -> str:
    """``text`` with every record block rewritten from the dataclasses."""
    def block(m: re.Match) -> str:
        cls = DOCUMENTED.get(m.group(2))
        if cls is None:
            raise KeyError(f"docs name no record section {m.group(2)!r}")
        return f"{m.group(1)}{table(cls)}{m.group(4)}"

    return BLOCK.sub(block, text)


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/RESULTS.md")
    text = path.read_text(encoding="utf-8")
    new = render(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
