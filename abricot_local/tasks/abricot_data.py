"""ABRICOT release loading: CSV, TSV, JSONL or Parquet, long or short column names.

The release documents ID, target token, target lemma, text, begin, end, domain,
inclusiveness mean/std, abstractness mean/std; the hub loader calls them
``target_token``, ``abs_mean``, ... Names are matched in any case, with spaces,
hyphens or underscores.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from abricot_local.errors import DataError

SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
HUB_DATASET = "gpucce/abricot"

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
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _read_table(path: Path) -> tuple[list[str], list[dict]]:
    """(column names, records) of a data file; JSON lines are read here, line by line, so
    each must be an object and an error names its line."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            return _read_jsonl(path)
        frame = _read_frame(path, suffix)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    return list(frame.columns), frame.to_dict("records")


def _read_frame(path: Path, suffix: str):
    import pandas as pd

    if suffix == ".csv":
        return pd.read_csv(path, encoding="utf-8", dtype=str, keep_default_na=False)
    if suffix == ".tsv":
        return pd.read_csv(path, sep="\t", encoding="utf-8", dtype=str, keep_default_na=False)
    if suffix == ".parquet":
        try:
            return pd.read_parquet(path)
        except ImportError:
            raise DataError(f"reading {path.name} needs pyarrow: pip install pyarrow") from None
    raise DataError(f"{path}: unsupported file type {suffix!r}; use one of {', '.join(SUFFIXES)}")


def _read_jsonl(path: Path) -> tuple[list[str], list[dict]]:
    columns: dict[str, None] = {}
    records = []
    with path.open(encoding="utf-8-sig") as fh:  # a BOM is skipped, as pandas does for CSV
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}, line {n}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}, line {n}: a JSON object {{\"key\": value, ...}} is needed, "
                                f"got {_json_kind(rec)}")
            columns.update(dict.fromkeys(rec))
            records.append(rec)
    return list(columns), records


def _json_kind(value) -> str:
    kind = {list: "an array", dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")
    return f"{kind} ({json.dumps(value)[:40]})" if value is not None else kind


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
    except (TypeError, ValueError):
        raise DataError(f"{path}, row {line}, column {col}: {value!r} is not a number") from None
    if unit and (math.isnan(x) or not 0.0 <= x <= 1.0):
        raise DataError(f"{path}, row {line}, column {col}: {value!r} is not a number in [0, 1]")
    return None if math.isnan(x) else x


def _span_ok(text: str, target: str, begin, end) -> bool:
    try:
        b, e = int(float(begin)), int(float(end))
    except (TypeError, ValueError):
        return False
    return text[b : e + 1] == target or text[b:e] == target


def load_rows(path: Path) -> tuple[list[Row], int]:
    """Validated rows and the number whose begin/end do not point at the target."""
    names, records = _read_table(path)
    cols = _columns(path, names)
    rows, bad_spans, seen = [], 0, set()
    for k, rec in enumerate(records):
        line = k + 1
        get = lambda c: rec.get(cols[c]) if c in cols else None  # noqa: E731
        for col in ("text", "target", "id", "domain"):
            if isinstance(get(col), (list, dict)):
                raise DataError(f"{path}, row {line}, column {cols[col]}: {_json_kind(get(col))} where text is needed")
        text, target = str(get("text") or "").strip(), str(get("target") or "").strip()
        for col, val in (("text", text), ("target", target)):
            if not val:
                raise DataError(f"{path}, row {line}, column {cols[col]}: empty")
        raw_id = "" if get("id") is None else str(get("id")).strip()
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
                domain=str(get("domain") or "").strip() or "abricot",
                abs_mean=_number(path, line, cols["abs_mean"], get("abs_mean"), unit=True),
                inc_mean=_number(path, line, cols["inc_mean"], get("inc_mean"), unit=True),
                abs_std=_number(path, line, cols.get("abs_std", ""), get("abs_std"), unit=False) if "abs_std" in cols else None,
                inc_std=_number(path, line, cols.get("inc_std", ""), get("inc_std"), unit=False) if "inc_std" in cols else None,
            )
        )
    if not rows:
        raise DataError(f"{path} holds no rows")
    return rows, bad_spans


DATA_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".parquet")
URL_RE = re.compile(r"https?://[^\s'\"()<>]+")


def pull(folder: Path) -> list[Path]:
    """Fetch the release from the hub dataset: its data files, or the URLs its loading script names."""
    from abricot_local import fetch
    from abricot_local.errors import DownloadError

    files = fetch.hub_dataset_files(HUB_DATASET)
    data = [f for f in files if Path(f).suffix.lower() in DATA_SUFFIXES]
    got: list[Path] = []
    if data:
        for name in data:
            src = fetch.hub_dataset_download(HUB_DATASET, name)
            dest = folder / ("abricot_" + Path(name).name if not Path(name).name.startswith("abricot") else Path(name).name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            got.append(dest)
        return got
    scripts = [f for f in files if f.endswith(".py")]
    urls: list[str] = []
    for script in scripts:
        text = Path(fetch.hub_dataset_download(HUB_DATASET, script)).read_text(encoding="utf-8", errors="replace")
        urls += [u.rstrip(".,;") for u in URL_RE.findall(text) if "osf.io" in u or u.lower().endswith(DATA_SUFFIXES)]
    if not urls:
        raise DownloadError(
            f"the hub dataset {HUB_DATASET} holds neither data files nor a loading script with a data URL; "
            "download the release by hand and give it with --data abricot=FILE"
        )
    for k, url in enumerate(dict.fromkeys(urls)):
        suffix = next((s for s in DATA_SUFFIXES if url.lower().split("?")[0].endswith(s)), ".csv")
        got.append(fetch.download_url(url, folder / f"abricot_{k}{suffix}" if k else folder / f"abricot{suffix}", sha256=None))
    return got
