"""ABRICOT release loading: the published CSV as it is; also TSV, JSONL or Parquet, long or short names.

The release (``dataset_it.csv``, 127 rows) is UTF-8 with a byte-order mark, CRLF line
endings, 24 columns (``ID, domain, begin, end, text, target_token, ...``), ``end``
inclusive (``text[begin:end+1]`` is the target). CSV and TSV are read with Python's csv
module, so every text is kept byte for byte (a text ending in a space keeps it); a text or
target is stripped only to check that it is not empty. Names are matched in any case, with
spaces, hyphens or underscores, long (``abstractness mean``) or short (``abs_mean``). A NUL
byte in a text is refused, naming the line.

``pull`` downloads the release from its GitHub home at the pinned commit, SHA-256 verified; that SHA-256 is also
the release the tasks' published rows were made on (their ``DataSpec.release``: a run on other data is said and not
compared with the rows, tasks/release.py).
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path

from abricot_local.errors import DataError
from abricot_local.jsonfiles import BadJSON, loads

RELEASE_FILE = "dataset_it.csv"
RELEASE_COMMIT = "ab4a167db4327bcc8faaa153f780e004042ac274"
RELEASE_REPO = "aramelior/ABRICOT-ABstRactness-and-Inclusiveness-in-COntexT"
RELEASE_URL = f"https://raw.githubusercontent.com/{RELEASE_REPO}/{RELEASE_COMMIT}/{RELEASE_FILE}"
RELEASE_SHA256 = "5dfe6577961b20d8b1fd3439ed32152fdf615963dd93ca925c912aa19f136eac"
RELEASE_ROWS = 127

SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")

# canonical name -> accepted spellings (normalised: lower case, underscores)
ALIASES = {
    "id": ("id",),
    "target": ("target_token", "token", "target"),
    "lemma": ("target_lemma", "lemma"),
    "text": ("text", "sentence", "frase"),
    "begin": ("begin", "start"),
    "end": ("end",),
    "domain": ("domain", "source"),
    "inc_mean": ("inclusiveness_mean", "inc_mean"),
    "inc_std": ("inclusiveness_std", "inc_std"),
    "abs_mean": ("abstractness_mean", "abs_mean"),
    "abs_std": ("abstractness_std", "abs_std"),
}
REQUIRED = ("target", "text", "abs_mean", "inc_mean")


@dataclass(frozen=True)
class Row:
    id: str
    target: str
    text: str
    domain: str
    abs_mean: float
    inc_mean: float
    abs_std: float | None
    inc_std: float | None


def normalise(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lstrip("\ufeff").strip().lower())


def _read_table(path: Path) -> tuple[list[str], list[dict], list[int]]:
    """(column names, records, the line of the file each record starts on; its index + 1 for
    Parquet). CSV, TSV and JSON lines are read here, so each error names its line."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):
            return _read_delimited(path, "," if suffix == ".csv" else "\t")
        if suffix == ".jsonl":
            return _read_jsonl(path)
        frame = _read_parquet(path, suffix)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    records = frame.to_dict("records")
    return list(frame.columns), records, list(range(1, len(records) + 1))


def _read_delimited(path: Path, delimiter: str) -> tuple[list[str], list[dict], list[int]]:
    """The file as published: a BOM skipped, CRLF or LF, quoted fields kept byte for byte."""
    text = path.read_bytes().decode("utf-8").lstrip("\ufeff")  # a BOM (or a BOM saved twice) skipped
    import io

    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader, [])
        records, lines = [], []
        while True:
            line = reader.line_num + 1
            record = next(reader, None)
            if record is None:
                break
            if not any(cell.strip() for cell in record):
                continue  # a blank line
            records.append(dict(zip(header, record)))
            lines.append(line)
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: not valid {'CSV' if delimiter == ',' else 'TSV'} "
                        f"({exc})") from None
    _closed_quotes(path, text, delimiter)
    return header, records, lines


def _closed_quotes(path: Path, text: str, delimiter: str) -> None:
    """Refuse a quoted field never closed: the lenient reader takes the rest of the file into it
    (reported before as an empty column many rows later); the line it opens on is named."""
    import io

    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    start = 1
    try:
        while next(reader, None) is not None:
            start = reader.line_num + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise DataError(f"{path}, line {start}: a quoted field (\"...) opens on this line and is never closed; "
                            "close its quote (\") or remove it") from None


def _read_parquet(path: Path, suffix: str):
    if suffix != ".parquet":
        raise DataError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except ImportError:
        raise DataError(f"reading {path.name} needs pyarrow: pip install pyarrow") from None


def _read_jsonl(path: Path) -> tuple[list[str], list[dict], list[int]]:
    columns: dict[str, None] = {}
    records, lines = [], []
    with path.open(encoding="utf-8-sig") as fh:  # a BOM is skipped, as pandas does for CSV
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = loads(line)
            except BadJSON as exc:  # not JSON, nested past MAX_DEPTH (no RecursionError), a huge integer
                raise DataError(f"{path}, line {n} {exc}") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}, line {n}: a JSON object {{\"key\": value, ...}} is needed, "
                                f"got {_json_kind(rec)}")
            columns.update(dict.fromkeys(rec))
            records.append(rec)
            lines.append(n)
    return list(columns), records, lines


def _json_kind(value) -> str:
    kind = {list: "an array", dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")
    return f"{kind} ({json.dumps(value, default=str)[:40]})" if value is not None else kind


def _text_cell(path: Path, line: int, col: str, value, *, number_ok: bool) -> str:
    """A text cell as published ("" when empty: null, or Parquet's NaN for a null); an id or a
    domain may be an integer. A list, an object, a number or a boolean where text is needed is
    refused, naming the row (Parquet's null would be the word "nan" in the prompt, a list its repr)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    if number_ok and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if hasattr(value, "tolist") and not isinstance(value, numbers.Number):  # a Parquet list: a numpy array
        value = value.tolist()
    raise DataError(f"{path}, row {line}, column {col}: {_json_kind(value)} where text is needed")


def _columns(path: Path, names) -> dict[str, str]:
    found: dict[str, str] = {}
    normal = {normalise(n): n for n in names}
    for canon, spellings in ALIASES.items():
        for s in spellings:
            if s in normal:
                found[canon] = normal[s]
                break
    missing = [c for c in REQUIRED if c not in found]
    if missing:
        want = ", ".join(f"{ALIASES[c][0]} (or {ALIASES[c][-1]})" for c in missing)
        raise DataError(f"{path}: missing column(s) {want}; columns present: {', '.join(map(str, names))}")
    return found


def _number(path: Path, line: int, col: str, value, *, unit: bool) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if unit:
            raise DataError(f"{path}, row {line}, column {col}: empty; a number in [0, 1] is needed")
        return None
    try:
        if isinstance(value, (bool, list, dict)):  # JSON true is no score
            raise TypeError
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"{path}, row {line}, column {col}: {value!r} is not a number") from None
    if unit and (math.isnan(x) or not 0.0 <= x <= 1.0):
        raise DataError(f"{path}, row {line}, column {col}: {value!r} is not a number in [0, 1]")
    if math.isinf(x):  # a sample holds it: JSON has no Infinity
        raise DataError(f"{path}, row {line}, column {col}: {value!r} is not a finite number")
    return None if math.isnan(x) else x


def _span_ok(text: str, target: str, begin, end) -> bool:
    try:
        b, e = int(float(begin)), int(float(end))
    except (TypeError, ValueError, OverflowError):  # not a number, NaN, inf or 1e400: no span
        return False
    return text[b : e + 1] == target  # the release's end is inclusive


def load_rows(path: Path) -> tuple[list[Row], int]:
    """Validated rows and the number whose begin/end do not point at the target."""
    names, records, lines = _read_table(path)
    cols = _columns(path, names)
    rows, bad_spans, seen = [], 0, set()
    for k, (rec, at) in enumerate(zip(records, lines)):
        line = k + 1
        get = lambda c: rec.get(cols[c]) if c in cols else None  # noqa: E731
        cell = {col: _text_cell(path, line, cols[col], get(col), number_ok=col in ("id", "domain"))
                for col in ("text", "target", "id", "domain") if col in cols}
        for col, value in cell.items():
            if "\0" in value:
                where = f"line {at}" if path.suffix.lower() != ".parquet" else f"row {at}"
                raise DataError(f"{path}, {where} (row {line}), column {cols[col]}: a NUL byte (\\x00) in the text; "
                                "remove it: a prompt cannot hold one")
        text, target = cell["text"], cell["target"]  # as published: not stripped
        for col, val in (("text", text), ("target", target)):
            if not val.strip():
                raise DataError(f"{path}, row {line}, column {cols[col]}: empty")
        raw_id = cell.get("id", "").strip()
        rid = raw_id or f"row-{line}"
        if rid in seen:
            raise DataError(f"{path}, row {line}, column {cols.get('id', 'ID')}: duplicate id {rid!r}")
        seen.add(rid)
        if "begin" in cols and "end" in cols and not _span_ok(text, target, get("begin"), get("end")):
            bad_spans += 1
        rows.append(
            Row(
                id=rid,
                target=target,
                text=text,
                domain=cell.get("domain", "").strip() or "abricot",
                abs_mean=_number(path, line, cols["abs_mean"], get("abs_mean"), unit=True),
                inc_mean=_number(path, line, cols["inc_mean"], get("inc_mean"), unit=True),
                abs_std=_number(path, line, cols.get("abs_std", ""), get("abs_std"), unit=False) if "abs_std" in cols else None,
                inc_std=_number(path, line, cols.get("inc_std", ""), get("inc_std"), unit=False) if "inc_std" in cols else None,
            )
        )
    if not rows:
        raise DataError(f"{path} holds no rows")
    return rows, bad_spans


def pull(folder: Path) -> list[Path]:
    """Download the release (``dataset_it.csv``) from its GitHub home at the pinned commit into
    ``folder``, verifying its SHA-256; a failure (``fetch.FilesNotDownloaded``) names the file, its
    URL and why."""
    from abricot_local.models import fetch

    return fetch.download_files(((RELEASE_URL, RELEASE_FILE, RELEASE_SHA256),), folder)
