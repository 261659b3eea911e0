"""The original DisCoTEX release (EVALITA 2023, sub-task 1 TSVs) and the multiple-choice rows
rebuilt from it when the published rows are not here.

Per row of a file: its own TARGET and 3 TARGETs of other rows of the same file (distinct texts,
none equal to its own), the own TARGET at a position among A-D; the gold is that position for
CLASS 1 rows and E ("nessuna delle precedenti") for CLASS 0. Both draws come from a generator
seeded with (seed, stream, row), so a row never depends on --limit or on the other rows. PROMPT
and TARGET are stripped of surrounding whitespace. A file with a UTF-8 BOM or CRLF line endings
(a copy saved on Windows) is read with LF line endings; whether its text then is the release's
is checked against the release's SHA-256 (:func:`release_note`).
"""

from __future__ import annotations

from collections.abc import Sequence

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from abricot_local.errors import DataError
from abricot_local.tasks.discotex_rows import MAX_ID, NONE_OF_THEM, Row

COLUMNS = ("ID", "PROMPT", "TARGET", "CLASS")
RELEASE_COMMIT = "e113774f1b5f9c1eb4ea5581767429241ebb8cc9"
RELEASE_URL = "https://raw.githubusercontent.com/davidecolla/DisCoTex/{commit}/data/{folder}/{name}"
# source -> (file name, folder in the repository, sha256)
RELEASE = {
    "ted": (
        "discotex_1_ted_test_set_release.tsv",
        "test/gold",
        "4834dd5557d32e1308a8f750cefaafb672ccbd842e3fc973062edef3702d68b7",
    ),
    "wiki": (
        "discotex_1_wiki_test_set_release.tsv",
        "test/gold",
        "7cbb756772378d78640841679db1d28d12b5fe841403603a94d7bdc9354b01a4",
    ),
}
# The few-shot pool of rebuilt items: the TED train file (8000 rows). The Wikipedia train file
# exists upstream but has no pinned SHA-256 here, so a rebuilt pool is TED only, and says so.
TRAIN = ("discotex_1_ted_train_set_release.tsv", "train",
         "bad0cfe525b0d72831631e11fa122af4dc522532479e9b516a2ab9cda70e6bd2")
TRAIN_STREAM = 2  # the pool's construction draws: apart from the test files' streams 0 (ted) and 1 (wiki)


@dataclass(frozen=True)
class ReleaseTable:
    """The rows of one sub-task 1 TSV; ``crlf``: the file had CR or CRLF line endings, read as LF;
    ``sha256_as_read``: the SHA-256 of the text as read (LF, no BOM), to compare with the release's."""

    rows: list[dict[str, str]]
    crlf: bool = False
    sha256_as_read: str = ""


def read_release_tsv(path: Path) -> ReleaseTable:
    """Rows of a sub-task 1 TSV, validated; errors name the file, the line a record starts
    on, and the column. A UTF-8 BOM is skipped, and CRLF (or CR) line endings are read as LF.
    Columns are checked for shape (an ID is short and on one line: a file with ID and PROMPT
    swapped is refused), and a NUL byte anywhere is refused with its line. The same bytes are read
    once per process (a table's rows are shared: read them, never change them)."""
    try:
        raw = path.read_bytes()
        if raw in _READ:
            table = _READ[raw] = _READ.pop(raw)  # kept as the last used
            return ReleaseTable(list(table.rows), table.crlf, table.sha256_as_read)
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    table = _parse_release(path, text)
    if len(_READ) >= 8:
        _READ.pop(next(iter(_READ)))
    _READ[raw] = table
    return ReleaseTable(list(table.rows), table.crlf, table.sha256_as_read)


_READ: dict[bytes, ReleaseTable] = {}  # a file's bytes -> its table, this process (the 8 used last)


def _parse_release(path: Path, text: str) -> ReleaseTable:
    crlf = "\r" in text
    if crlf:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise DataError(f"{path}, line {line}: a NUL byte; the release has none (a damaged or binary file?)")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    rows = []
    try:
        header = next(reader, [])
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise DataError(
                f"{path}: missing column(s) {', '.join(missing)} (header has: {', '.join(header) or 'nothing'})"
            )
        while True:
            line = reader.line_num + 1  # where the next record starts (it may span lines)
            record = next(reader, None)
            if record is None:
                break
            if not record:
                continue  # a blank line
            row = dict(zip(header, record))
            for col in COLUMNS:
                if not (row.get(col) or "").strip():
                    raise DataError(f"{path}, line {line}: column {col} is empty")
            ident = row["ID"].strip()
            if len(ident) > MAX_ID or "\n" in ident:
                raise DataError(f"{path}, line {line}: column ID holds {ident[:30]!r}..., not an id (over {MAX_ID} "
                                "characters or a line break): are the columns swapped?")
            if row["CLASS"].strip() not in ("0", "1"):
                raise DataError(f"{path}, line {line} (ID {ident}): CLASS must be 0 or 1, got {row['CLASS']!r}")
            rows.append({c: row[c].strip() for c in COLUMNS})
    except csv.Error as exc:
        raise DataError(f"{path} is not a valid TSV file: {exc}") from None
    if len(rows) < 4:
        raise DataError(f"{path}: {len(rows)} rows; at least 4 are needed to draw 3 distractors")
    return ReleaseTable(rows, crlf, hashlib.sha256(text.encode("utf-8")).hexdigest())


def release_note(path: Path, table: ReleaseTable, sha256: str, expected: str) -> str | None:
    """What a run must say about a release file that is not byte for byte the release (None
    when it is): its line endings or byte-order mark were set to the release's, or its text differs."""
    if sha256 == expected:
        return None
    if table.sha256_as_read == expected:
        how = "CRLF line endings: read as LF" if table.crlf else "a byte-order mark: skipped"
        return (f"{path.name} has {how}, the release's, so the items are the release's (the recorded sha256 is "
                "this file's own)")
    return (f"{path.name} differs from the DisCoTEX release (sha256 {sha256[:12]}..., the release's "
            f"{expected[:12]}...): items are built from this file, not from the published release")


def build_rows(stream: int, source: str, rows: list[dict[str, str]], seed: int) -> list[Row]:
    """The multiple-choice rows rebuilt from one file's rows (``stream``: the file's own draws)."""
    targets = [r["TARGET"] for r in rows]
    return [_build_row(i, stream, source, rows, targets, seed) for i in range(len(rows))]


_BUILT: dict[tuple, Sequence[Row]] = {}  # (text's sha256, stream, source, seed, lazy) -> its rows, this process
_BUILT_MAX = 8


def table_rows(table: ReleaseTable, stream: int, source: str, seed: int, lazy: bool = False) -> Sequence[Row]:
    """:func:`build_rows` of a table read by :func:`read_release_tsv` (``lazy``: as :class:`LazyRows`),
    built once per process for the same text, stream, source and seed: the rows are frozen, and a
    sweep's runs, or a test session's, share them."""
    key = (table.sha256_as_read, stream, source, seed, lazy)
    if key in _BUILT:
        _BUILT[key] = _BUILT.pop(key)  # kept as the last used: the oldest use is dropped first
    else:
        if len(_BUILT) >= _BUILT_MAX:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = LazyRows(stream, source, table.rows, seed) if lazy else tuple(build_rows(stream, source,
                                                                                              table.rows, seed))
    return _BUILT[key] if lazy else list(_BUILT[key])


class LazyRows(Sequence):
    """:func:`build_rows`' rows, each built when first asked for (a few-shot pool: only its drawn rows
    are needed, and a row's draws depend on nothing but its index), equal row for row."""

    def __init__(self, stream: int, source: str, rows: list[dict[str, str]], seed: int):
        self._args = (stream, source, rows, [r["TARGET"] for r in rows], seed)
        self._built: dict[int, Row] = {}

    def __len__(self) -> int:
        return len(self._args[2])

    def __getitem__(self, i):  # an int index (the sampler's); a slice builds its rows
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if i not in self._built:
            stream, source, rows, targets, seed = self._args
            self._built[i] = _build_row(i, stream, source, rows, targets, seed)
        return self._built[i]


def _build_row(i: int, stream: int, source: str, rows: list[dict[str, str]], targets: list[str], seed: int) -> Row:
    row = rows[i]
    rng = np.random.default_rng([seed, stream, i])
    position = int(rng.integers(0, 4))  # drawn first: independent of the file's length
    distractors: list[str] = []
    for j in rng.permutation(len(rows)):
        t = targets[j]
        if j != i and t != row["TARGET"] and t not in distractors:
            distractors.append(t)
            if len(distractors) == 3:
                break
    if len(distractors) < 3:
        raise DataError(f"{source}: fewer than 3 distinct other TARGETs for row {row['ID']}")
    options = distractors[:position] + [row["TARGET"]] + distractors[position:]
    cls = int(row["CLASS"])
    return Row(row["ID"], row["PROMPT"], (*options, NONE_OF_THEM), position if cls == 1 else 4, source,
               (("class", cls), ("target_position", position)))
