"""DISCOTEX (EVALITA 2023) sub-task 1 as the published 5-way multiple choice.

Items are the published rows (the hub dataset ``sapienzanlp/discotex``, test split, in order:
:mod:`discotex_rows`) when they are here: a folder of their Parquet files given with
``--data discotex=DIR`` or ``--data-dir DIR``, or, with no data given, the hub (its cache
offline). Only otherwise are they rebuilt from the original release (TED then Wikipedia,
1600 rows: :mod:`discotex_release`). The task's config records which (``items``), the files'
SHA-256 are the run's data.

Two wordings (``--prompt-variant``): ``card``, the task card's (the default), and ``ita-bench``,
ITA-Bench's YAML as lm-eval renders it. The description comes first, then the shots, then the
item's prompt; each shot is its prompt, " ", its gold letter and a blank line (lm-eval's
target and few-shot delimiters). ``--shots K`` (default 0) draws each item's shots from the
train split as lm-eval's default sampler does when the pool is not the evaluated split
(:func:`fewshot.lm_eval_draws`, seed ``--shot-seed``, default 1234, lm-eval's, never ``--seed``), for
every item in order: an item's shots never depend on --sample, --limit, --shard, the order or a resume.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from abricot_local.models import fetch
from abricot_local import errors
from abricot_local.errors import AbricotError, DataError, DownloadError, TaskError, opt
from abricot_local.metrics import accuracy, with_ci_of
from abricot_local.record.samples import Sample
from abricot_local.tasks import discotex_rows
from abricot_local.tasks.base import (CONTRACT, DataFile, DataSpec, Figure, Item, MetricInput, Task, TaskOptions,
                                      text_hash)
from abricot_local.tasks.discotex_release import (RELEASE, RELEASE_COMMIT, RELEASE_URL, TRAIN, TRAIN_STREAM,
                                                  read_release_tsv, release_note, table_rows)
from abricot_local.tasks.discotex_rows import NONE_OF_THEM, Row
from abricot_local.tasks.fewshot import LM_EVAL_SEED, lm_eval_draws

LETTERS = ("A", "B", "C", "D", "E")
TARGET_DELIMITER = " "  # lm-eval's default target_delimiter
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's default fewshot_delimiter

# The task card's wording (docs/protocols.md, DISCOTEX): the description is followed by a blank line.
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
# ITA-Bench (SapienzaNLP/ita-bench, tasks/adaptations/discotex/mc/discotex.yaml @ a0114e3): its
# description (ending in a blank line) and its Jinja doc_to_text ({{text}}, {{choices[k]}}), which
# lm-eval renders without escaping: the same text as these format fields.
ITA_BENCH_DESCRIPTION = (
    "Ti verranno poste delle domande nelle quali è presente un paragrafo, e come possibili risposte varie "
    "frasi che possono essere o meno la continuazione del paragrafo.\nIndica la frase che rappresenta la "
    "continuazione più probabile del paragrafo, oppure \"nessuna delle precedenti\" se nessuna delle "
    "continuazioni è corretta.\n\n"
)
ITA_BENCH_PROMPT = (
    "Paragrafo: \"{text}\"\nDomanda: Quali delle seguenti frasi è la continuazione più probabile del "
    "precedente paragrafo?\nA. \"{c0}\"\nB. \"{c1}\"\nC. \"{c2}\"\nD. \"{c3}\"\nE. {c4}\nRisposta:"
)


@dataclass(frozen=True)
class Wording:
    description: str  # what every context starts with, its blank line included
    prompt: str  # one row's question: format fields text, c0..c4
    source: str  # where the text comes from


WORDINGS = {
    "card": Wording(DESCRIPTION + "\n\n", PROMPT, "the sapienzanlp/discotex task card (docs/protocols.md)"),
    "ita-bench": Wording(ITA_BENCH_DESCRIPTION, ITA_BENCH_PROMPT,
                         "SapienzaNLP/ita-bench tasks/adaptations/discotex/mc/discotex.yaml @ a0114e3 (docs/protocols.md)"),
}
DEFAULT_WORDING = "card"


def render(wording: Wording, row: Row) -> str:
    c = row.choices
    return wording.prompt.format(text=row.text, c0=c[0], c1=c[1], c2=c[2], c3=c[3], c4=c[4])


def shot_text(wording: Wording, row: Row) -> str:
    """One shot as lm-eval writes it: the prompt, the target delimiter, the gold letter, the few-shot delimiter."""
    return render(wording, row) + TARGET_DELIMITER + LETTERS[row.label] + FEWSHOT_DELIMITER


@dataclass(frozen=True)
class Source:
    """Where the items come from: ``published`` rows (Parquet) or ``rebuilt`` from the release."""

    kind: str
    folder: Path  # what ``data_path()`` returns
    test: tuple[Path, ...]
    train: tuple[Path, ...]  # the few-shot pool's files (empty with 0 shots)
    origin: str  # for the record: whence the files came


def release_files() -> tuple[tuple[str, str, str], ...]:
    """(URL, file name, SHA-256) of each file of the sub-task 1 test release, pinned."""
    return tuple((RELEASE_URL.format(commit=RELEASE_COMMIT, folder=sub, name=name), name, sha)
                 for name, sub, sha in RELEASE.values())


def pull(folder: Path) -> list[Path]:
    """Download the sub-task 1 test release into ``folder``, verifying each SHA-256; a failure
    (fetch.FilesNotDownloaded) names every file still missing, with its URL, and why."""
    return fetch.download_files(release_files(), folder)


_BUILT: dict = {}  # (source kind, files' content, seed, shots, variant, shot seed) -> items, notes, pool size, sources
_BUILT_MAX, _BUILT_ITEMS = 16, 12_800  # the settings used last, up to 16 builds and as many items as 8 of the release's


def absolute(folder: Path) -> Path:
    """A data folder as the task records it (``config.items``, ``data_path()``): absolute, as ``data[].path`` is
    (os.path.abspath: symlinks kept), so the record says where whatever folder the run was started from."""
    return Path(os.path.abspath(folder))


def _identity(path: Path) -> tuple:
    """A data file as it is now: its path, inode, size, modification and change times (a file rewritten is another)."""
    st = Path(path).stat()
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _content(src: Source) -> tuple | None:
    """What the items of ``src``'s files hang on, or None (a file not there: the build says so): a release file
    (rebuilt items are a pure function of its bytes, their notes of its name and bytes) by its name and SHA-256,
    which hashing remembers by the file's identity (a file rewritten is hashed again; a copy of the same bytes
    elsewhere gives the same items); a Parquet file by its identity."""
    try:
        return tuple((f.name, fetch.sha256_file(f)) if src.kind == "rebuilt" else _identity(f)
                     for f in (*src.test, *src.train))
    except (OSError, AbricotError):
        return None


def _last_used(memo: dict, key, value=None):
    """``memo[key]`` (None when absent) moved to the end of ``memo``; with ``value``, stored there, the entries
    used longest ago dropped to keep the bounds. Values are never changed once stored: tuples of frozen items."""
    if value is None:
        value = memo.pop(key, None)
    else:
        while memo and (len(memo) >= _BUILT_MAX
                        or sum(len(v[0]) for v in memo.values()) + len(value[0]) > _BUILT_ITEMS):
            memo.pop(next(iter(memo)))
    if value is not None:
        memo[key] = value
    return value


class DiscotexTask(Task):
    name = "discotex"
    version = "1"
    contract = CONTRACT
    description = "DISCOTEX (EVALITA 2023) sub-task 1: which sentence continues a paragraph, 5-way"
    metric_names = ("accuracy", "accuracy_ted", "accuracy_wiki", "binary_accuracy")
    primary_metric = "accuracy"
    sources = tuple(RELEASE)  # the published rows have no source column: ("published",) then
    chance = {"accuracy": 0.2, "accuracy_ted": 0.2, "accuracy_wiki": 0.2, "binary_accuracy": 0.5}
    margins = {"accuracy": 0.02, "binary_accuracy": 0.02}
    figures = (Figure("confusion", metric="accuracy"),)
    sample_fields = {"class": int}  # 0: no continuation is right (gold E), 1: one is (binary_accuracy reads it)
    uses = ("shots", "prompt_variant", "shot_seed")
    prompt_variants = tuple(WORDINGS)
    chars_per_token = {"gemma3": 4.01, "gpt-2": 2.796, "llama-bpe": 3.497, "llama-spm": 3.269, "phi-3": 3.269,
                       "qwen2": 3.475, "smollm": 2.805}
    data = DataSpec(
        key="discotex", kind="folder", files=tuple(name for name, _, _ in RELEASE.values()), pull=pull,
        how=f"{opt('data_dir', 'DIR')} (the DisCoTEX release or Parquet rows)",
        description="DISCOTEX multiple choice: the published rows (sapienzanlp/discotex), else the DisCoTEX "
                    "sub-task 1 test release (TED, Wikipedia), 1600 rows",
    )

    def __init__(self, options: TaskOptions):
        super().__init__(options)
        self.variant = self.resolved_variant() or DEFAULT_WORDING
        if self.variant not in WORDINGS:
            raise TaskError(f"discotex has no prompt variant {self.variant!r}; use one of {', '.join(WORDINGS)}")
        self.wording = WORDINGS[self.variant]
        self.shots = 0 if options.shots is None else options.shots
        if self.shots < 0:
            raise TaskError(f"{opt('shots')} must be 0 or more")
        self.shot_seed = LM_EVAL_SEED if options.shot_seed is None else options.shot_seed  # never --seed's
        self._source: Source | None = None
        self._source_notes: list[str] = []  # why the published rows were not used
        self._notes: list[str] = []  # files not byte for byte the release
        self._items: tuple[Item, ...] | None = None
        self._pool_size = 0

    # -- where the items come from --------------------------------------------------------------
    def source(self) -> Source:
        if self._source is None:
            self._source = self._find()
        return self._source

    def _find(self) -> Source:
        opts = self.options
        for named, path in ((lambda p: opt("data", (self.data.key, p)), opts.data_for(self.data.key, self.name)),
                            (lambda p: opt("data_dir", p), opts.data_dir)):
            if path:
                folder = absolute(Path(path).expanduser())
                found = discotex_rows.in_folder(folder)
                if found is not None:
                    return self._published(found, named(path))
                return self._rebuilt()  # the release there, or Task.data_path's message on what it lacks
        return self._from_hub() or self._rebuilt()

    def _published(self, found: discotex_rows.Published, given: str) -> Source:
        train = found.files.get("train", ())
        if self.shots and not train:
            raise DataError(f"{opt('shots', self.shots)} draws shots from the train split, but {given} holds no train "
                            f"Parquet file (train-*.parquet beside test-*.parquet): add it, or use {opt('shots', 0)}")
        files = (*found.files["test"], *(train if self.shots else ()))
        folder = Path(os.path.commonpath([str(f.parent) for f in files]))
        return Source("published", folder, found.files["test"], train if self.shots else (), found.origin)

    def _from_hub(self) -> Source | None:
        """The published rows through the hub (its cache when offline or unreachable), else None.
        Why not is a warning only when the hub could be reached: offline, the config says it."""
        from abricot_local.models import hub_probe

        reachable = self.options.allow_download and not fetch.is_offline() and not hub_probe.unreachable()
        try:
            import pyarrow  # noqa: F401  (the published rows are Parquet)
        except ImportError:
            why = "reading them needs pyarrow: pip install pyarrow"
        else:
            try:
                found = discotex_rows.from_hub(("test", "train") if self.shots else ("test",),
                                               allow_download=self.options.allow_download)
                return self._published(found, f"the hub dataset {discotex_rows.HUB_REPO}")
            except (DownloadError, DataError) as err:  # (a note the run records: its options in the record's words)
                why = errors.render(err.raw(), errors.recorded_words).split("\n")[0]
        if reachable:
            self._source_notes.append(f"the published rows ({discotex_rows.HUB_REPO}) could not be had ({why[:160]}): "
                                      "items were rebuilt from the DisCoTEX release")
        return None

    def _rebuilt(self) -> Source:
        folder = absolute(Task.data_path(self))  # --data, --data-dir, the cache, a pull of the release
        test = tuple(folder / name for name, _, _ in RELEASE.values())
        return Source("rebuilt", folder, test, (self._pool_file(folder),) if self.shots else (),
                      f"the DisCoTEX release (github.com/davidecolla/DisCoTex@{RELEASE_COMMIT[:7]}) in {folder}")

    def _pool_file(self, folder: Path) -> Path:
        """Rebuilt items draw their shots from the TED train file (the Wikipedia one has no pinned hash)."""
        name, sub, sha = TRAIN
        path = folder / name
        url = RELEASE_URL.format(commit=RELEASE_COMMIT, folder=sub, name=name)
        if not path.is_file() and folder == absolute(self.cache_folder()) and self.options.allow_download:
            try:
                fetch.download_url(url, path, sha256=sha)
            except DownloadError:
                pass  # said below, with what to do
        if not path.is_file():
            raise DataError(f"{opt('shots', self.shots)} on rebuilt items draws shots from the TED train file, not in "
                            f"{folder}: save {url} there, or give the published Parquet rows "
                            f"({opt('data', ('discotex', 'DIR'))})")
        return path

    def data_path(self) -> Path:
        return self.source().folder

    def data_files(self) -> list[DataFile]:
        src = self.source()
        return [DataFile(f, fetch.sha256_file(f)) for f in (*src.test, *src.train)]

    def data_ref(self, files: list[Path]) -> str:
        if not files:
            raise DataError(f"task {self.name}: no data file recorded")
        return os.path.commonpath([str(f.parent) for f in files])

    # -- items ----------------------------------------------------------------------------------
    def _release_rows(self, path: Path, expected: str, stream: int, source: str, lazy: bool = False):
        table = read_release_tsv(path)
        note = release_note(path, table, fetch.sha256_file(path), expected)
        if note:
            self._notes.append(note)
        if lazy:  # the few-shot pool: only the drawn rows are built
            return table_rows(table, stream, source, self.options.seed, lazy=True)
        return table_rows(table, stream, source, self.options.seed)

    def rows_and_pool(self) -> tuple[list[Row], list[Row]]:
        """The evaluated rows and the few-shot pool, in order (also the docs of the lm-eval tasks)."""
        src = self.source()
        if src.kind == "published":
            self.sources = ("published",)
            rows = discotex_rows.read_rows(src.test, "test")
            return rows, discotex_rows.read_rows(src.train, "train") if self.shots else []
        rows = []
        for k, (source, (name, _, sha)) in enumerate(RELEASE.items()):
            rows += self._release_rows(src.folder / name, sha, k, source)
        pool = self._release_rows(src.train[0], TRAIN[2], TRAIN_STREAM, "ted_train", lazy=True) if self.shots else []
        return rows, pool

    def items(self) -> list[Item]:
        if self._items is not None:
            return list(self._items)
        src = self.source()
        key = (src.kind, _content(src), self.options.seed, self.shots, self.variant, self.shot_seed)
        built = _last_used(_BUILT, key) if key[1] is not None else None
        if built is not None:  # the same data and options: the same items (a session's runs, a test session's)
            self._items, notes, self._pool_size, sources = built
            self._notes = list(notes)
            self.sources = sources or self.sources
            return list(self._items)
        self._notes = []
        rows, pool = self.rows_and_pool()
        self._pool_size = len(pool)

        def same(i: int, j: int) -> bool:  # lm-eval drops a pool document equal to the item
            a, b = rows[i], pool[j]
            return (a.text, a.choices, a.label) == (b.text, b.choices, b.label)

        try:
            draws = lm_eval_draws(len(rows), len(pool), self.shots, seed=self.shot_seed, same_split=False, same=same)
        except TaskError as err:
            raise TaskError(f"discotex: {err.raw()}") from None
        description = self.wording.description
        out = []
        for row, draw in zip(rows, draws):
            shots = "".join(shot_text(self.wording, pool[j]) for j in draw)
            fields = dict(row.fields) | ({"shot_ids": [pool[j].id for j in draw]} if self.shots else {})
            out.append(Item(id=row.id, source=row.source,
                            context=description + shots + render(self.wording, row), choices=row.choices,
                            continuations=tuple(" " + letter for letter in LETTERS), gold=row.label, fields=fields))
        self._items = tuple(out)
        if key[1] is not None and _content(src) == key[1]:  # (the files not rewritten while they were read)
            _last_used(_BUILT, key, (self._items, tuple(self._notes), self._pool_size,
                                     self.sources if src.kind == "published" else None))
        return out

    def warnings(self) -> list[str]:
        return [*self._source_notes, *self._notes]

    def label_of(self, index: int, item: Item) -> str:
        return f"{LETTERS[index]}. {item.choices[index]}"

    def prompt_hash(self) -> str:
        if self.variant == DEFAULT_WORDING:  # the hash runs of earlier versions recorded
            return text_hash(DESCRIPTION, PROMPT, NONE_OF_THEM, *LETTERS)
        return text_hash(self.wording.description, self.wording.prompt, NONE_OF_THEM, *LETTERS, TARGET_DELIMITER,
                         FEWSHOT_DELIMITER)

    def config(self) -> dict:
        src = self.source()
        out: dict = {"seed": self.options.seed}
        if src.kind == "published":
            out |= {"items": f"published rows: {src.origin}", "ids": discotex_rows.ID_RULE}
        else:
            out |= {"items": f"rebuilt from {src.origin}", "gold_position_and_distractors_seed": self.options.seed}
        out |= {"prompt_variant": self.variant, "wording": self.wording.source, "shots": self.shots}
        if self.shots:
            if self._items is None:
                self.items()
            pool = ("the published train split" if src.kind == "published" else
                    f"{TRAIN[0]} only (TED; the Wikipedia train file has no pinned hash), rebuilt as the test items are")
            out |= {"shot_pool": f"{pool}, {self._pool_size} rows",
                    "shot_sampler": "lm-eval's default: per item in order, random.Random(seed).sample(pool, K)",
                    "shot_seed": self.shot_seed}
        return out

    def metric_inputs(self, samples: Sequence[Sample]) -> tuple[MetricInput, ...]:
        pred = np.array([s.pred for s in samples])
        gold = np.array([s.gold for s in samples])
        said_none = pred == 4
        is_negative = np.array([s.fields["class"] == 0 for s in samples], dtype=bool)
        return (MetricInput("accuracy", "accuracy", pred, gold),
                MetricInput("binary_accuracy", "accuracy", said_none, is_negative))

    def metric_counts(self, samples: Sequence[Sample]) -> dict[str, int]:
        counts = Counter(s.source for s in samples)
        return {f"accuracy_{source}": counts[source] for source in RELEASE if counts[source]}

    def metrics(self, samples: Sequence[Sample]) -> dict:
        acc, binary = self.metric_inputs(samples)
        out = with_ci_of(acc, seed=self.options.seed)
        for source in RELEASE:
            mask = np.array([s.source == source for s in samples], dtype=bool)
            if mask.any():
                out[f"accuracy_{source}"] = accuracy(acc.x[mask], acc.y[mask])
        out.update(with_ci_of(binary, seed=self.options.seed))
        return out
