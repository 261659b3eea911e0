"""DISCOTEX's published multiple-choice rows: the hub dataset ``sapienzanlp/discotex`` (Parquet).

What is known of it (from its dataset card, not from the files, which no development machine
could reach): columns ``text`` (the paragraph), ``choices`` (5 strings, the last "nessuna delle
precedenti") and ``label`` (0-4, the gold choice); an older revision also had ``id`` (int64) and
``target``; splits ``train`` (16000 rows) and ``test`` (1600); the card's ``configs`` map split
S to the files ``data/S-*`` (``datasets`` reads the matching files in name order, and so do we).

A folder given by hand may hold them in that layout (``DIR/data/test-*.parquet``), as the
parquet-converter's branch lays them out (``DIR/default/test/*.parquet``), or just the files
(``DIR/test-*.parquet``). Rows keep their order; an item's id is the row's ``id`` when the
files have that column, else ``test-K`` (K: the row's 0-based position in the split, over its
files in name order): :data:`ID_RULE`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from abricot_local.errors import DataError, DownloadError

HUB_REPO = "sapienzanlp/discotex"
NONE_OF_THEM = "nessuna delle precedenti"
SPLITS = ("test", "train")
# how a folder may hold split S: the hub's layout, the parquet-converter's, or just the files
LAYOUTS = ("data/{split}-*.parquet", "default/{split}/*.parquet", "{split}/*.parquet", "{split}-*.parquet")
HUB_PATTERN = "data/{split}-*"  # the dataset card's configs: data_files
ID_RULE = "the rows' id column when the files have one, else '<split>-<row position, 0-based, over the split's files>'"
MAX_ID = 200  # an id is short and on one line (a paragraph is not an id)


@dataclass(frozen=True)
class Row:
    """One multiple-choice row (published, or rebuilt from the release): ``choices`` are the 5
    answers A-E, ``label`` the gold one's index; ``fields``: extra sample fields."""

    id: str
    text: str
    choices: tuple[str, ...]
    label: int
    source: str = "published"
    fields: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Published:
    """Where the published rows were found: the files of each split, and whence they came."""

    files: dict[str, tuple[Path, ...]]  # split -> its Parquet files, in name order
    origin: str  # "hub sapienzanlp/discotex@<commit>" or "the folder DIR"
    revision: str | None = None  # the hub commit, when known


def split_files(folder: Path, split: str) -> tuple[Path, ...]:
    """The Parquet files of ``split`` in ``folder``, in the first layout that has any."""
    for layout in LAYOUTS:
        found = sorted(p for p in folder.glob(layout.format(split=split)) if p.is_file())
        if found:
            return tuple(found)
    return ()


def in_folder(folder: Path) -> Published | None:
    """The published rows in ``folder`` (its test split at least), or None."""
    if not folder.is_dir():
        return None
    files = {s: split_files(folder, s) for s in SPLITS}
    if not files["test"]:
        return None
    return Published({s: f for s, f in files.items() if f}, f"the folder {folder}")


def _commit_of(path: Path) -> str | None:
    parts = path.parts
    if "snapshots" in parts:
        k = len(parts) - 1 - parts[::-1].index("snapshots")
        if k + 1 < len(parts) and re.fullmatch(r"[0-9a-f]{40}", parts[k + 1]):
            return parts[k + 1]
    return None


def from_hub(splits: tuple[str, ...], *, allow_download: bool) -> Published:
    """The published rows through the Hugging Face hub (its cache; a download when allowed and
    online): the files of each split in ``splits``. :class:`DownloadError` when they cannot be had."""
    from abricot_local.models import fetch

    names = fetch.hub_dataset_files(HUB_REPO, local_only=not allow_download)
    files: dict[str, tuple[Path, ...]] = {}
    for split in splits:
        wanted = sorted(n for n in names if fnmatch.fnmatch(n, HUB_PATTERN.format(split=split))
                        and n.endswith(".parquet"))
        if not wanted:
            raise DownloadError(f"the hub dataset {HUB_REPO} has no {HUB_PATTERN.format(split=split)} Parquet file")
        files[split] = tuple(fetch.hub_dataset_download(HUB_REPO, n, progress=False, local_only=not allow_download)
                             for n in wanted)
    commit = _commit_of(files[splits[0]][0])
    return Published(files, f"hub {HUB_REPO}@{commit or 'unknown commit'}", commit)


def _arrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("reading the published DISCOTEX rows (Parquet) needs pyarrow: "
                        "pip install pyarrow") from None
    return pq


def _text(value, path: Path, where: str, column: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path}, {where}: column {column} must be non-empty text, got {str(value)[:40]!r}")
    if "\0" in value:
        raise DataError(f"{path}, {where}: column {column} holds a NUL byte")
    return value


def read_rows(files: tuple[Path, ...], split: str) -> list[Row]:
    """The rows of ``split`` from its Parquet files, validated; errors name the file and the row."""
    pq = _arrow()
    rows: list[Row] = []
    for path in files:
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow's errors are many; each means "not this file"
            raise DataError(f"{path} is not a readable Parquet file ({type(exc).__name__}: {exc})"[:300]) from None
        missing = [c for c in ("text", "choices", "label") if c not in table.column_names]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} "
                            f"(has: {', '.join(table.column_names) or 'nothing'})")
        has_id = "id" in table.column_names
        for k, rec in enumerate(table.to_pylist()):
            where = f"row {k}"
            position = len(rows)
            ident = str(rec["id"]) if has_id and rec["id"] is not None else f"{split}-{position}"
            if len(ident) > MAX_ID or "\n" in ident or "\0" in ident or not ident.strip():
                raise DataError(f"{path}, {where}: id {ident[:40]!r}... is not an id (over {MAX_ID} characters, "
                                "or a line break): are the columns swapped?")
            text = _text(rec["text"], path, where, "text")
            choices = rec["choices"]
            if not isinstance(choices, list) or len(choices) != 5:
                raise DataError(f"{path}, {where}: choices must be 5 strings, got {str(choices)[:60]}")
            choices = tuple(_text(c, path, where, f"choices[{j}]") for j, c in enumerate(choices))
            if choices[4] != NONE_OF_THEM:
                raise DataError(f"{path}, {where}: the last choice must be {NONE_OF_THEM!r}, got {choices[4][:40]!r}")
            label = rec["label"]
            if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= 4:
                raise DataError(f"{path}, {where}: label must be 0-4, got {label!r}")
            rows.append(Row(ident, text, choices, label, fields=(("class", int(label != 4)),)))
    if not rows:
        raise DataError(f"the {split} split ({', '.join(str(p) for p in files)}) holds no row")
    return rows
