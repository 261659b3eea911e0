"""DISCOTEX (EVALITA 2023) sub-task 1 as the published 5-way multiple choice.

Built from the original test release (TED then Wikipedia, 1600 rows): per row,
its own TARGET and 3 TARGETs of other rows of the same file (distinct texts,
none equal to its own), the own TARGET at a position among A-D; the gold is
that position for CLASS 1 rows and E ("nessuna delle precedenti") for CLASS 0.
Both draws come from a generator seeded with (seed, source, row), so an item
never depends on --limit or on the other items. PROMPT and TARGET are
stripped of surrounding whitespace. A file with a UTF-8 BOM or CRLF line endings
(a copy saved on Windows) gives the release's items: the line endings are read as
LF, and the run's warnings say so (its recorded SHA-256 stays the file's own).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from abricot_local import fetch
from abricot_local.errors import DataError
from abricot_local.metrics import accuracy, with_ci_of
from abricot_local.tasks.base import DataSpec, Figure, Item, MetricInput, Task, TaskOptions, text_hash

DESCRIPTION = (
    "Ti verranno poste delle domande, nelle quali è presente un paragrafo, e come possibili "
    "risposte varie frasi che possono essere o meno il continuo.\nIndica la frase che "
    "rappresenta la continuazione del paragrafo oppure 'nessuna delle precedenti', se nessuna "
    "delle continuazioni è corretta."
)
PROMPT = (
    "Paragrafo: '{text}'\nDomanda: Quali delle seguenti frasi presenta una continuazione del "
    "precedente paragrafo?\nA. '{c0}'\nB. '{c1}'\nC. '{c2}'\nD. '{c3}'\nE. {c4}\nRisposta:"
)
NONE_OF_THEM = "nessuna delle precedenti"
LETTERS = ("A", "B", "C", "D", "E")
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


@dataclass(frozen=True)
class ReleaseTable:
    """The rows of one sub-task 1 TSV; ``crlf``: the file had CR or CRLF line endings, read as LF."""

    rows: list[dict[str, str]]
    crlf: bool = False


def read_release_tsv(path: Path) -> ReleaseTable:
    """Rows of a sub-task 1 TSV, validated; errors name the file, the line a record starts
    on, and the column. A UTF-8 BOM is skipped, and CRLF (or CR) line endings are read as LF,
    the release's, so a copy saved on Windows gives the release's very items (the note is the
    caller's to record: the file's SHA-256 stays its own)."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    crlf = "\r" in text
    if crlf:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
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
            if row["CLASS"].strip() not in ("0", "1"):
                raise DataError(f"{path}, line {line} (ID {row['ID']}): CLASS must be 0 or 1, got {row['CLASS']!r}")
            rows.append({c: row[c].strip() for c in COLUMNS})
    except csv.Error as exc:
        raise DataError(f"{path} is not a valid TSV file: {exc}") from None
    if len(rows) < 4:
        raise DataError(f"{path}: {len(rows)} rows; at least 4 are needed to draw 3 distractors")
    return ReleaseTable(rows, crlf)


def build_items(source_index: int, source: str, rows: list[dict[str, str]], seed: int) -> list[Item]:
    targets = [r["TARGET"] for r in rows]
    items = []
    for i, row in enumerate(rows):
        rng = np.random.default_rng([seed, source_index, i])
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
        choices = (*options, NONE_OF_THEM)
        cls = int(row["CLASS"])
        prompt = PROMPT.format(text=row["PROMPT"], c0=choices[0], c1=choices[1], c2=choices[2], c3=choices[3], c4=choices[4])
        prefix = DiscotexTask.prefix_text()
        items.append(
            Item(
                id=row["ID"],
                source=source,
                prefix=prefix,
                context=prefix + prompt,
                choices=choices,
                continuations=tuple(" " + letter for letter in LETTERS),
                gold=position if cls == 1 else 4,
                fields={"class": cls, "target_position": position},
            )
        )
    return items


def release_files() -> tuple[tuple[str, str, str], ...]:
    """(URL, file name, SHA-256) of each file of the sub-task 1 test release, pinned."""
    return tuple((RELEASE_URL.format(commit=RELEASE_COMMIT, folder=sub, name=name), name, sha)
                 for name, sub, sha in RELEASE.values())


def pull(folder: Path) -> list[Path]:
    """Download the sub-task 1 test release into ``folder``, verifying each SHA-256; a failure
    (fetch.FilesNotDownloaded) names every file still missing, with its URL, and why."""
    return fetch.download_files(release_files(), folder)


class DiscotexTask(Task):
    name = "discotex"
    version = "1"
    description = "DISCOTEX (EVALITA 2023) sub-task 1: which sentence continues a paragraph, 5-way"
    metric_names = ("accuracy", "accuracy_ted", "accuracy_wiki", "binary_accuracy")
    primary_metric = "accuracy"
    sources = tuple(RELEASE)
    chance = {"accuracy": 0.2, "accuracy_ted": 0.2, "accuracy_wiki": 0.2, "binary_accuracy": 0.5}
    figures = (Figure("confusion", metric="accuracy"),)
    data = DataSpec(
        key="discotex", kind="folder", files=tuple(name for name, _, _ in RELEASE.values()), pull=pull,
        how="--data-dir DIR (the DisCoTEX sub-task 1 test release)",
        description="DisCoTEX sub-task 1 test release (TED, Wikipedia), 1600 rows",
    )

    @staticmethod
    def prefix_text() -> str:
        """The text every item starts with: the description and a blank line."""
        return DESCRIPTION + "\n\n"

    def __init__(self, options: TaskOptions):
        super().__init__(options)
        self._notes: list[str] = []  # files read with their line endings normalised

    def items(self) -> list[Item]:
        folder = self.data_path()
        out: list[Item] = []
        self._notes = []
        for k, (source, (name, _, _)) in enumerate(RELEASE.items()):
            table = read_release_tsv(folder / name)
            if table.crlf:
                self._notes.append(f"{name} has CRLF line endings: read as LF, the release's, so the items are "
                                   "the release's (the recorded sha256 is this file's own)")
            out.extend(build_items(k, source, table.rows, self.options.seed))
        return out

    def warnings(self) -> list[str]:
        return list(self._notes)

    def label_of(self, index: int, item: Item) -> str:
        return f"{LETTERS[index]}. {item.choices[index]}"

    def prompt_hash(self) -> str:
        return text_hash(DESCRIPTION, PROMPT, NONE_OF_THEM, *LETTERS)

    def config(self) -> dict:
        return {"seed": self.options.seed, "gold_position_and_distractors_seed": self.options.seed}

    def metric_inputs(self, samples: list[dict]) -> tuple[MetricInput, ...]:
        pred = np.array([s["pred"] for s in samples])
        gold = np.array([s["gold"] for s in samples])
        said_none = pred == 4
        is_negative = np.array([s["class"] == 0 for s in samples], dtype=bool)
        return (MetricInput("accuracy", "accuracy", pred, gold),
                MetricInput("binary_accuracy", "accuracy", said_none, is_negative))

    def metrics(self, samples: list[dict]) -> dict:
        acc, binary = self.metric_inputs(samples)
        out = with_ci_of(acc, seed=self.options.seed)
        for source in RELEASE:
            mask = np.array([s["source"] == source for s in samples], dtype=bool)
            if mask.any():
                out[f"accuracy_{source}"] = accuracy(acc.x[mask], acc.y[mask])
        out.update(with_ci_of(binary, seed=self.options.seed))
        return out
