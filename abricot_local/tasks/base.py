"""The task contract: what a task declares, so that no shared module needs its name.

A task is items to score plus metrics computed from sample records alone: ``sample()``
makes each scored item a :class:`~abricot_local.record.Sample` (the task's own fields in its
``extra``), and ``metrics()`` / ``metric_inputs()`` take the samples exactly as read back from
``samples-<task>.jsonl``, so every number in results.json can be recomputed from the sample files.

This is version :data:`CONTRACT` of the contract; a task says which it is written for in
``contract`` (a task of another version is refused when its class is loaded).

Besides ``items()``, ``metrics()`` and ``data_files()``, a task declares:

- ``metric_inputs()``: each CI metric's per-item inputs (:class:`MetricInput`), so
  two runs can be compared item by item without knowing the task (analysis/compare.py);

- ``data``: a :class:`DataSpec`: the ``--data KEY=PATH`` key (tasks of one release share it), a folder or a
  file, how to pull it, how to get it by hand, the release its published rows were made on (tasks/release.py);
- ``protocols``: how each published source ran the task (:class:`Protocol`: the settings it
  fixes, its precision); the first is the default, ``--protocol NAME`` picks one, and a run
  may hold a task under several (its instances are keyed ``task@protocol``, :attr:`Task.key`;
  under several prompt variants, ``--prompt-variant all``, ``task[@protocol]~variant``);
- ``references()``: published results (:class:`Reference`), each made under a protocol;
- ``figures``: the figures that suit its metrics (:class:`Figure`);
- ``sample_fields``: its own sample fields that ``metrics()`` reads, with their types (a samples
  file that lacks one, or holds one of another type, is refused when read);
- ``chance``: each metric's chance level; ``margins``: the difference that does not matter, per
  metric (``compare``'s equivalence verdicts; ``default_margin`` for the others);
- ``warnings()``, ``config()`` (right before and after ``items()``),
  ``group`` (``--tasks GROUP`` runs every task of the group).

Tasks are plugins: found through the entry-point group ``abricot_local.tasks``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import replace, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from abricot_local.core import Request, Scored, argmax, cached_prefix
from abricot_local.errors import DataError, MissingDataError
from abricot_local.record.samples import Sample
from abricot_local.tasks import item_check
from abricot_local.tasks.options import TaskOptions

CONTRACT = 2  # the task contract's version: 2, samples are record.Sample (1 took dicts: no longer run)


@dataclass(frozen=True)
class Item:
    """One scored question. ``context`` is the exact text before the continuation; the part of it
    kept in the KV cache between items follows from that text alone (``prefix``)."""

    id: str
    source: str
    context: str
    choices: tuple[str, ...]
    continuations: tuple[str, ...]
    gold: int
    fields: dict[str, Any] = field(default_factory=dict, compare=False)  # extra sample fields
    parse_special: bool = False

    def __post_init__(self):  # checked as made (tasks/item_check.py): NumPy scalars taken as Python values
        for name, value in item_check.checked(self).items():
            object.__setattr__(self, name, value)

    @property
    def prefix(self) -> str:
        """The cached prefix of the context (:func:`abricot_local.core.cached_prefix`)."""
        return cached_prefix(self.context)

    def request(self) -> Request:
        return Request(context=self.context, continuations=self.continuations, label=self.id,
                       parse_special=self.parse_special)

    def in_chat(self, turn: str) -> Item:
        """This item scored in a chat template: ``turn``, its context rendered as the one user turn (special
        tokens parsed); the answer follows the generation prompt directly, so each continuation loses its
        leading space ("1", not " 1"), as under lm-eval's --apply_chat_template."""
        return replace(self, context=turn, parse_special=True, continuations=tuple(c.lstrip(" ")
                                                                                  for c in self.continuations))


@dataclass(frozen=True, eq=False)
class MetricInput:
    """One CI metric's per-item inputs: ``stat`` (``accuracy``, ``pearson`` or ``spearman``,
    the keys of ``metrics.ROW_STATS``) of ``x`` (the prediction side) against ``y`` (the gold
    side), one entry per sample, in the order of the samples given."""

    name: str
    stat: str
    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class DataFile:
    path: Path
    sha256: str


@dataclass(frozen=True)
class DataSpec:
    """Where a task's data lives and how to get it.

    ``key``: the ``--data KEY=PATH`` key and the cache folder ``data/KEY``;
    ``kind``: ``"folder"`` (PATH is a folder of ``files``) or ``"file"`` (PATH
    is one file); ``pull``: downloads into a folder and returns the paths (None:
    no public download; ``abricot-local data pull TASK`` runs it); ``how``: the offline
    alternative, one short line (e.g. "--data-dir DIR, a folder holding ..."): how a user gives the
    data by hand; ``release``: the SHA-256 of each file of the release the task's published rows were made on
    (none: no rows, or no pinned release): other data is said and judged by tasks/release.py.
    """

    key: str
    kind: str
    how: str
    files: tuple[str, ...] = ()
    pull: Callable[[Path], list[Path]] | None = None
    description: str = ""
    release: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """How one published source ran a task: ``settings`` it fixes (task config keys and values:
    a run is compared with the source's rows only when every one matches), the ``precision`` of
    the weights it scored ("" when the source does not say), and where each fact comes from."""

    name: str  # --protocol NAME
    source: str  # the Reference.source whose rows it made
    settings: tuple[tuple[str, Any], ...]
    precision: str = ""
    facts: str = ""  # where the settings are read from (docs)

    def fixes(self, key: str) -> bool:
        return any(k == key for k, _ in self.settings)

    def value(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self.settings if k == key), default)

    def differences(self, config: dict) -> tuple[str, ...]:
        """Each setting of a run's task ``config`` that differs from this protocol's, as
        ``shots 3, published 0`` (a setting the config lacks counts as differing)."""
        return tuple(f"{key} {_shown(config.get(key))}, published {_shown(want)}"
                     for key, want in self.settings if config.get(key) != want)


def _shown(value: Any) -> str:
    return "not recorded" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Reference:
    """One published result: ``value`` of ``metric`` on ``task`` for ``model`` in ``source``.

    ``protocol`` is how the source ran it (a run is compared with the row only when its
    task settings match every setting the protocol fixes). ``aliases``: other spellings of
    the source in a registry entry's ``reproduces`` field.
    """

    source: str
    model: str
    task: str
    metric: str
    value: float
    protocol: Protocol | None = None
    aliases: tuple[str, ...] = ()
    key: str = ""  # the run's key of the task instance made under ``protocol`` ("": ``task``)
    release: tuple[str, ...] = ()  # the SHA-256 of the data it was made on (baselines: the task's data.release)

    @property
    def label(self) -> str:
        return f"{self.model} ({self.source})"

    @property
    def instance(self) -> str:
        """The run's key of the task instance this row is held against (``key``, else ``task``)."""
        return self.key or self.task


@dataclass(frozen=True)
class Figure:
    """A figure that suits a task's metrics, drawn by report/plots.py for each run.

    ``kind``: ``"confusion"`` (gold against prediction over the choices) or
    ``"scatter"``: ``metric``'s model side (its MetricInput's ``x``) against sample field ``x`` (its ``y``),
    the metric's value in the title; with no ``metric``, the prediction + 1 against ``x``.
    """

    kind: str
    x: str = ""
    x_label: str = ""
    metric: str = ""


def text_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class Task(ABC):
    """A benchmark task: built from data files, scored through any backend."""

    name: str
    version: str
    contract: int = 1  # the contract version the task is written for; a task declares CONTRACT
    description: str = ""
    metric_names: tuple[str, ...] = ()
    primary_metric: str = ""
    chance: dict[str, float] = {}
    # `compare --margin`'s default per metric, in its own units: a difference that does not matter (docs/compare.md)
    margins: dict[str, float] = {}
    default_margin: float = 0.02  # a metric the task gives no margin (an accuracy: 0.02)
    figures: tuple[Figure, ...] = ()
    # its own sample fields (Item.fields) that metrics() reads, each with its JSON type as record.codec reads it
    # (int, float, float | None...): a finished run's samples line that lacks one, or holds one of another
    # type, is refused when read (record.samples.check_fields), by every reader alike
    sample_fields: dict[str, Any] = {}
    group: str | None = None
    sources: tuple[str, ...] = ()  # the item sources the data holds (a warning names any not scored)
    # Which of TaskOptions' per-task options (tasks.uses.declared(): shots, prompt_variant...) the task reads:
    # one it does not declare reaches it at its default, and a run that gives it is refused or named as unused.
    uses: tuple[str, ...] = ()
    prompt_variants: tuple[str, ...] = ()  # its wordings (with "prompt_variant" in uses), the default first
    # the values an option it uses takes, where TaskOptions' field leaves them to the tasks (``declared_choices``):
    # the command line's choices are every task's together (tasks.declared_choices)
    choices: dict[str, tuple[str, ...]] = {}
    option_notes: tuple[str, ...] = ()  # options given that it does not use (set by tasks.make_task; recorded)
    key_variant: str = ""  # the prompt variant its key names (``TASK~VARIANT``; set by tasks.make_task)
    protocols: tuple[Protocol, ...] = ()  # the published sources' protocols; the first is the default
    # the shots it scores with when neither --shots nor its protocol sets them: with none drawn, an option only
    # shots read (shot_seed) is not used (tasks.uses.draws_shots)
    default_shots: int = 0
    # characters per token of the items' text (prompts as scored) per tokenizer family, measured
    # (bench/chars_per_token.py): how `run --dry-run` estimates the tokens of a model that is not here;
    # a family not declared: the family's ratio over every task's text (run/chars_per_token.py)
    chars_per_token: dict[str, float] = {}
    data: DataSpec

    def __init_subclass__(cls, **kwargs):
        """A task's own ``items()`` names the task and its class in an item's refusal (item_check.ItemError)."""
        super().__init_subclass__(**kwargs)
        if "items" in cls.__dict__:
            cls.items = item_check.naming(cls.__dict__["items"])

    def __init__(self, options: TaskOptions):
        if options.prompt_variant is None and self.prompt_variants and \
                not any(p.fixes("prompt_variant") for p in self.protocols):  # not given: the task's default wording
            from dataclasses import replace

            options = replace(options, prompt_variant=(self.prompt_variants[0],))
        self.options = options
        if options.protocol is not None and self.protocols and self.protocol is None:
            from abricot_local.errors import UsageError

            raise UsageError(f"task {self.name} has no protocol {options.protocol!r}; its protocols: "
                             f"{', '.join(p.name for p in self.protocols)}")

    def margin(self, metric: str) -> float:
        """The difference in ``metric`` that does not matter: the task's ``margins`` entry, else its default."""
        return float(self.margins.get(metric, self.default_margin))

    # -- protocols ---------------------------------------------------------------------------
    @property
    def protocol(self) -> Protocol | None:
        """The protocol this instance runs under: ``--protocol``'s, else the task's first."""
        if self.options.protocol is None:
            return self.protocols[0] if self.protocols else None
        return next((p for p in self.protocols if p.name == self.options.protocol), None)

    @property
    def key(self) -> str:
        """The name a run records this instance under: the task's name, with ``@PROTOCOL`` when
        its protocol is not the task's default (one run may hold both: ``abricot_abs@calamita``), and
        ``~VARIANT`` when it is one of several prompt variants other than its default (``make_task``)."""
        p = self.protocol
        key = self.name if p is None or p == self.protocols[0] else f"{self.name}@{p.name}"
        return f"{key}~{self.key_variant}" if self.key_variant else key  # one of several prompt variants

    def resolved_variant(self) -> str | None:
        """The prompt variant this instance scores: given, else its protocol's, else the task's first."""
        if not self.prompt_variants:
            return None
        given = self.options.prompt_variant  # one variant: make_task gives each instance its own
        return self.setting("prompt_variant", given[0] if given else None, self.prompt_variants[0])

    def setting(self, key: str, given: Any, default: Any = None) -> Any:
        """A setting as resolved: given on the command line, else the protocol's, else ``default``."""
        if given is not None:
            return given
        p = self.protocol
        return p.value(key, default) if p is not None and p.fixes(key) else default

    def settings(self) -> dict:
        """The resolved value of every setting some protocol of this task fixes (no data read):
        what a published row is compared on, and what tells a run's instances apart."""
        return {}

    @abstractmethod
    def items(self) -> list[Item]:
        """All items in release order (``--limit`` takes the first N)."""

    @abstractmethod
    def metrics(self, samples: Sequence[Sample]) -> dict:
        """Metrics from sample records (see module docstring)."""

    def metric_inputs(self, samples: Sequence[Sample]) -> tuple[MetricInput, ...]:
        """Each CI metric's per-item inputs over ``samples`` (in their order): what a paired
        comparison of two runs resamples. The default suits any task: ``accuracy``, the
        samples' ``pred`` against their ``gold``. A task whose CI metrics are others
        overrides it (and computes those metrics from it, so the two cannot drift apart)."""
        pred = np.array([s.pred for s in samples])
        gold = np.array([s.gold for s in samples])
        return (MetricInput("accuracy", "accuracy", pred, gold),)

    # -- data ------------------------------------------------------------------------------
    def cache_folder(self) -> Path:
        from abricot_local.models import fetch

        return fetch.cache_dir() / "data" / self.data.key

    def data_path(self) -> Path:
        """The folder or file holding this task's data: ``--data KEY=PATH``, ``--data-dir``,
        the cache, or a download into the cache. :class:`DataError` when none has it."""
        from abricot_local.tasks.data import locate

        return locate(self)

    def data_files(self) -> list[DataFile]:
        """The data files used, with their SHA-256."""
        from abricot_local.models import fetch

        path = self.data_path()
        files = [path / f for f in self.data.files] if self.data.kind == "folder" else [path]
        return [DataFile(f, fetch.sha256_file(f)) for f in files]

    def data_ref(self, files: list[Path]) -> str:
        """What ``--data KEY=...`` must say to find these recorded files again."""
        if not files:
            raise DataError(f"task {self.name}: no data file recorded")
        return str(files[0].parent if self.data.kind == "folder" else files[0])

    def data_status(self) -> tuple[str | None, str]:
        """(where the data is, or None; a one-line note) without downloading anything."""
        from dataclasses import replace

        probe = type(self)(replace(self.options, allow_download=False))
        try:
            return str(probe.data_path()), "found"
        except MissingDataError as err:
            return None, err.one_line()
        except DataError as err:
            return None, str(err)

    # -- declarations ----------------------------------------------------------------------
    def references(self) -> tuple[Reference, ...]:
        """Published results for this task (none by default)."""
        return ()

    def warnings(self) -> list[str]:
        """Warnings about the data, known once ``items()`` ran."""
        return []

    def metric_counts(self, samples: Sequence[Sample]) -> dict[str, int]:
        """The items behind each metric of ``metrics(samples)`` that is not over all of them (a source's
        accuracy: that source's items); a metric not named is over every sample."""
        return {}

    def config(self) -> dict:
        """Task settings that can change a number."""
        return {"seed": self.options.seed}

    def prompt_hash(self) -> str:
        """A hash of the prompt templates, recorded in the provenance."""
        return ""

    def sample(self, item: Item, scored: Scored) -> Sample:
        """The sample record of one scored item; ``item.fields`` are its own fields."""
        pred = argmax(scored.logprobs)
        sample = Sample(id=item.id, source=item.source, context=item.context, choices=tuple(item.choices),
                        continuations=tuple(item.continuations),
                        continuation_tokens=tuple(tuple(t) for t in scored.continuation_tokens),
                        logprobs=tuple(scored.logprobs), gold=item.gold, pred=pred,
                        gold_label=self.label_of(item.gold, item), pred_label=self.label_of(pred, item),
                        extra=dict(item.fields))
        return sample

    def label_of(self, index: int, item: Item) -> str:
        """The answer a choice index stands for, as a reader knows it (the choice text)."""
        return item.choices[index]
