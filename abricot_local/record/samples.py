"""One line of ``samples-<task>.jsonl`` (and of a checkpoint) as a validated view, and the
one validation of a task's samples, used wherever they are written or read.

A task builds its samples as :class:`Sample` (``Task.sample``) and every reader gets them as
such. The fields every task writes are typed; a task's own fields (DISCOTEX ``class``, ABRICOT
``human_mean``...) are the one mapping :attr:`Sample.fields`. A line is refused, naming the
file and the line, when it is not an object, lacks ``id``, ``logprobs``, ``gold`` or
``pred``, or does not hold together (:func:`problem`): no log-prob, a log-prob that is
NaN or infinite (a finished run never has one: the finite guard stops the run), as many
log-probs as choices / continuations, ``gold`` and ``pred`` choice indices, ``pred`` the
highest log-prob's (ties: the earlier). Ids are unique within a file.

A finished run's samples (:func:`run_samples`) are read strictly: the file lies inside the
run folder, has no torn line, holds exactly the record's ``n`` items, and each line the
task's own fields its metrics read, of their types (the task declares them, its reader passes
them: :func:`check_fields`); otherwise one error naming the file (and the line and id, where
they can be known); its file and count checks alone, for a reader showing the record (:func:`entry_counted`).
A torn last line is forgiven
only in a checkpoint (:func:`read_samples` with ``repair``), which ``--resume`` rescores.
Samples about to be written are validated alike (:func:`check_line`, :func:`check_rows`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from abricot_local.core import argmax
from abricot_local.errors import ResultsError
from abricot_local.jsonfiles import TornLineError, jsonl_rows, read_jsonl_data, read_jsonl_lines
from abricot_local.record.codec import Invalid, Section, parse, spec
from abricot_local.record.outputs import samples_name
from abricot_local.record.schema import TaskEntry


@dataclass(frozen=True, kw_only=True)
class Sample(Section):
    """One scored item (a line of `samples-<task>.jsonl`). Other keys: the task's own fields (below)."""

    # Built by Task.sample with the task's own fields in `extra` (Sample(id=..., extra={...})), read by
    # every reader; `fields` is that mapping, read-only. (The docstring above is docs/RESULTS.md's.)

    id: str = spec("the item id from the data (unique within a task)")
    source: str | None = spec("where the item comes from (DISCOTEX: `ted` or `wiki`; ABRICOT: the row's domain)",
                              default=None)
    context: str | None = spec("the exact text the choices were scored after (few-shot prefix included)",
                               default=None)
    choices: tuple[str, ...] = spec("the choices' texts", default=())
    continuations: tuple[str, ...] | None = spec("the strings scored after `context`, one per choice "
                                                 "(`\" A\"` .. `\" E\"`, `\" 1\"` .. `\" 5\"`)", default=None)
    continuation_tokens: tuple[tuple[int, ...], ...] | None = spec(
        "the token ids of each continuation, as tokenized in context", default=None)
    logprobs: tuple[float, ...] = spec("per choice, the log-likelihood of its continuation given the context: "
                                       "the sum of its tokens' log-probabilities (natural log)")
    gold: int = spec("index of the correct choice")
    pred: int = spec("index of the highest `logprobs` (ties go to the earlier choice)")
    gold_label: Any = spec("the correct answer as a reader knows it (DISCOTEX `\"B. <sentence>\"`, ABRICOT "
                           "the rating `\"1\"`..`\"5\"`)", default=None)
    pred_label: Any = spec("the model's answer, likewise", default=None)

    @property
    def fields(self) -> Mapping[str, Any]:
        """The task's own fields (JSON values: DISCOTEX ``class``, ABRICOT ``human_mean``...), read-only."""
        return MappingProxyType(self.extra)

    @cached_property
    def line(self) -> dict[str, Any]:
        """The line as written (read-only by convention; what the writers write)."""
        return self.to_dict()

    def get(self, key: str, default=None):
        """Any field of the line by its key, a task's own included."""
        return self.line.get(key, default)


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past any float
        return False


def problem(s: Sample) -> str | None:
    """What makes one sample not hold together, or None (see the module's docstring)."""
    n = len(s.logprobs)
    if not n:
        return "it holds no log-prob"
    for name, values in (("choices", s.choices), ("continuations", s.continuations),
                         ("continuation_tokens", s.continuation_tokens)):
        if values and len(values) != n:
            return f"it holds {n} log-prob(s) for {len(values)} {name}"
    bad = [k for k, v in enumerate(s.logprobs) if not _finite(v)]
    if bad:
        shown = repr(s.logprobs[bad[0]]) if isinstance(s.logprobs[bad[0]], float) else "a number past any float"
        more = f" ({len(bad)} of {n} not finite)" if len(bad) > 1 else ""
        return f"logprobs[{bad[0]}] is {shown}{more}: a log-prob is a finite number"
    for name, value in (("gold", s.gold), ("pred", s.pred)):
        if not 0 <= value < n:
            shown = value if abs(value) < 10 ** 12 else "a number this large"
            return f"{name} {shown} is not a choice index (0..{n - 1}: {n} choices)"
    best = argmax(s.logprobs)
    if s.pred != best:
        return f"pred {s.pred} is not the choice of the highest log-prob ({best})"
    return None


def unwritable(s: Sample) -> str | None:
    """What keeps a sample a task built from being written as strict JSON: a NaN or infinite float
    in its own fields (a reader takes such a line, written by an earlier version: plots name it), or a
    value JSON has not (a NumPy number a task's ``sample()`` added)."""
    for key, value in s.extra.items():
        where = _not_finite(value, key)
        if where and where[1]:
            return f"{where[0]} is not a finite number: JSON has no NaN or Infinity (null says \"none\")"
        if where:
            return f"{where[0]} is not a JSON value (a string, number, boolean, null, list or object)"
    return None


def _not_finite(value, key: str) -> tuple[str, bool] | None:
    """Where in ``value`` (a task's field) a float is NaN or infinite (``(where, True)``), or a value is not
    JSON (``(where, False)``), or None."""
    stack = [(value, key)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return f"{at} ({v!r})", True
        if not (v is None or isinstance(v, (str, int, float, list, tuple, dict))) or \
                isinstance(v, dict) and any(not isinstance(k, str) for k in v):
            return f"{at} (a {type(v).__module__}.{type(v).__qualname__})", False
        if isinstance(v, dict):
            stack.extend((x, f"{at}.{k}") for k, x in v.items())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{at}[{k}]") for k, x in enumerate(v))
    return None


def check_line(value: Any, where: str) -> Sample:
    """One sample validated: a :class:`Sample` a task built (about to be written), a dict (a task
    of contract 1's line) or a parsed JSON value (read); ``where`` (the file and the line) names it
    in the error. A sample built in code is checked as its written line will be read, and holds no
    NaN or Infinity (:func:`unwritable`)."""
    try:
        sample = Sample.from_dict(value.line if isinstance(value, Sample) else value)
    except Invalid as err:
        raise ResultsError(f"{where} is malformed: {err}") from None
    why = problem(sample) or (unwritable(sample) if isinstance(value, Sample) else None)
    if why:
        raise ResultsError(f"{where} is malformed (id {sample.id!r}): {why}")
    return sample


def check_fields(sample: Sample, where: str, task: str, fields: Mapping[str, Any]) -> None:
    """Refuse a read sample that lacks one of the task's own fields its metrics read (``fields``: each
    one's type, as :mod:`record.codec` reads it; the task declares them: ``Task.sample_fields``) or
    holds one of another type; ``where`` names the file and the line."""
    found = field_problem(sample, fields)
    if found and found[1] is None:
        raise ResultsError(f"{where}: the samples of task {task} lack its field {found[0]!r} (id {sample.id!r}): "
                           "the file holds another task's samples, or was changed")
    if found:
        raise ResultsError(f"{where} is malformed (id {sample.id!r}): {found[1]}")


def field_problem(sample: Sample, fields: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """The first of a task's own ``fields`` (``Task.sample_fields``: each one's type) that ``sample`` lacks
    (``(name, None)``) or holds of another type (``(name, what is wrong)``), or None: the one rule its readers
    (:func:`check_fields`) and its writer (run/folder.py, before a sample is written) keep."""
    for name, tp in fields.items():
        if name not in sample.extra:
            return name, None
        try:
            parse(tp, sample.extra[name], name)
        except Invalid as err:
            return name, err.raw()
    return None


def _key(s: Sample) -> str:
    return json.dumps(s.line, sort_keys=True, allow_nan=True)


def parse_samples(rows: Iterable[tuple[int, Any]], where: str, *, same_twice: bool = False, task: str = "",
                  fields: Mapping[str, Any] = MappingProxyType({})) -> list[Sample]:
    """Validated samples from (line number, value) pairs of ``where``, ids unique, each holding the task's
    own ``fields`` (:func:`check_fields`). With ``same_twice`` (a checkpoint) a line repeated whole is kept
    once; else a second line of one id is an error naming both lines."""
    out, seen = [], {}
    for number, value in rows:
        sample = check_line(value, f"{where} line {number}")
        check_fields(sample, f"{where} line {number}", task, fields)
        if sample.id in seen:
            first, kept = seen[sample.id]
            if same_twice and _key(kept) == _key(sample):
                continue
            other = "the same line" if _key(kept) == _key(sample) else "other content"
            raise ResultsError(f"{where}: id {sample.id!r} is on line {first} and again on line {number} "
                               f"({other}): ids are unique within a task")
        seen[sample.id] = (number, sample)
        out.append(sample)
    return out


def check_rows(rows: Sequence[Any], where: str | Path, n: int | None = None) -> list[Sample]:
    """The samples about to be written to ``where``, validated as a reader will (unique ids,
    as many as the record's ``n``)."""
    if n is not None and len(rows) != n:
        raise ResultsError(f"{len(rows)} samples to write to {where} for a record of n = {n}; nothing written")
    return parse_samples(enumerate(rows, 1), str(where))


def read_samples(path: Path, *, repair: bool = False, required: bool = True, task: str = "",
                 fields: Mapping[str, Any] = MappingProxyType({})) -> list[Sample]:
    """Every sample of a samples file or checkpoint, in file order. ``required``: a missing
    file is an error (a finished run's file, read whole: a torn line is an error); else it
    holds nothing yet (a checkpoint: a torn last line is dropped, cut with ``repair``).
    ``fields``: the own fields of ``task`` each line must hold (:func:`check_fields`)."""
    path = Path(path)
    if required and not repair:
        return _finished(path, task, fields)
    rows = _lines(path, repair=repair, required=required)
    return parse_samples(rows, str(path), same_twice=not required, task=task, fields=fields)


def _lines(path: Path, *, repair: bool = False, required: bool = True) -> list[tuple[int, Any]]:
    """The JSON lines of a samples file or checkpoint, as :func:`read_samples` reads them (not yet samples)."""
    if required and not path.exists():  # there but no regular file: read_jsonl_lines says what it is
        raise ResultsError(f"{path} is missing (results.json names it)")
    try:
        return read_jsonl_lines(path, repair=repair, torn_ok=not required)
    except TornLineError as err:
        raise _cut(err) from None


def _cut(err: TornLineError) -> ResultsError:
    seen = re.search(rb'"id"\s*:\s*"((?:[^"\\]|\\.){1,200})"', err.text)
    who = f" (item {seen.group(1).decode('utf-8', 'replace')})" if seen else ""
    return ResultsError(f"{err}{who}: the file was cut; a finished run's samples are written whole")


# A finished run's samples file read again holding the same bytes (SHA-256) gives the samples it gave (the same
# frozen Samples, in a new list) and its count of lines, without parsing it again: `report`, `compare`, `check` and
# a suite of tests read one run's files many times. Only what read whole without error is kept: MEMO_FILES files of
# MEMO_BYTES in all at most (the least recently read go first); a file read again with other bytes is read anew.
MEMO_FILES, MEMO_BYTES, MEMO_COUNTS = 128, 16 * 2**20, 4096
_parsed: OrderedDict[tuple, tuple[int, tuple[Sample, ...]]] = OrderedDict()  # (digest, task, fields) -> (size, samples)
_counts: OrderedDict[bytes, int] = OrderedDict()  # digest -> its lines
_memo_lock = threading.Lock()


def _finished_bytes(path: Path) -> tuple[bytes, bytes]:
    """A finished run's samples file's bytes (refused as :func:`_lines` refuses it) and their SHA-256."""
    if not path.exists():
        raise ResultsError(f"{path} is missing (results.json names it)")
    data = read_jsonl_data(path)
    return data, hashlib.sha256(data).digest()


def _finished_rows(data: bytes, path: Path) -> list[tuple[int, Any]]:
    try:
        return jsonl_rows(data, path, torn_ok=False)
    except TornLineError as err:
        raise _cut(err) from None


def _finished(path: Path, task: str, fields: Mapping[str, Any]) -> list[Sample]:
    """:func:`read_samples` of a finished run's file (required, nothing repaired), kept by its bytes."""
    data, digest = _finished_bytes(path)
    try:
        key: tuple | None = (digest, task, tuple(fields.items()))
        hash(key)
    except TypeError:  # a field's type that cannot be a key: read every time
        key = None
    with _memo_lock:
        hit = _parsed.get(key) if key is not None else None
        if hit is not None:
            _parsed.move_to_end(key)
            return list(hit[1])
    samples = parse_samples(_finished_rows(data, path), str(path), task=task, fields=fields)
    with _memo_lock:
        _remember_count(digest, len(samples))
        if key is not None and len(data) <= MEMO_BYTES:
            _parsed[key] = (len(data), tuple(samples))
            while len(_parsed) > MEMO_FILES or sum(size for size, _ in _parsed.values()) > MEMO_BYTES:
                _parsed.popitem(last=False)
    return samples


def _remember_count(digest: bytes, lines: int) -> None:
    _counts[digest] = lines
    _counts.move_to_end(digest)
    while len(_counts) > MEMO_COUNTS:
        _counts.popitem(last=False)


def _finished_count(path: Path) -> int:
    """The lines of a finished run's samples file, each read as JSON (refused as :func:`_lines` refuses it)."""
    data, digest = _finished_bytes(path)
    with _memo_lock:
        if digest in _counts:
            _counts.move_to_end(digest)
            return _counts[digest]
    lines = len(_finished_rows(data, path))
    with _memo_lock:
        _remember_count(digest, lines)
    return lines


def samples_path(folder: Path, name: str, task: str) -> Path:
    """``name`` (a results.json ``samples_file``) inside the run ``folder``, or an error: an
    absolute path, ``..`` or a link leading out of the folder is refused."""
    folder = Path(folder)
    given = Path(name)
    inside = not given.is_absolute() and ".." not in given.parts and given.parts not in ((), (".",))
    path = folder / given
    if inside:
        try:
            inside = path.resolve().is_relative_to(folder.resolve()) and path.resolve() != folder.resolve()
        except (OSError, RuntimeError):  # a link loop
            inside = False
    if not inside:
        raise ResultsError(f"{folder / 'results.json'}: tasks.{task}.samples_file {name!r} is not a file inside "
                           "the run folder; a run's samples files lie in its folder")
    own = samples_name(task)
    if given.as_posix() != own:  # another task's file would be read as this task's samples
        raise ResultsError(f"{folder / 'results.json'}: tasks.{task}.samples_file {name!r} is not this task's "
                           f"samples file ({own}): a run writes each task's samples to its own file; the record "
                           "was changed")
    return path


def run_samples(folder: Path, name: str, task: str, n: int | None,
                fields: Mapping[str, Any] = MappingProxyType({})) -> list[Sample]:
    """The samples of one task of a finished run in ``folder`` (``name``: its ``samples_file``),
    validated (each holding the task's own ``fields``: :func:`check_fields`), and exactly the ``n``
    items its record counts (None: any number; `check` names the missing items itself, from the
    rebuilt ones)."""
    path = samples_path(folder, name, task)
    samples = read_samples(path, task=task, fields=fields)
    _counted(folder, path, task, len(samples), n)
    return samples


def _counted(folder: Path, path: Path, task: str, held: int, n: int | None) -> None:
    """The one count check of a finished run's samples file: it holds the ``n`` items its record counts (None:
    any number), else an error naming the file and the count."""
    if n is not None and held != n:
        what = (f"{n - held} item(s) missing: `abricot-local check {folder}` names them" if held < n
                else f"{held - n} more than recorded")
        raise ResultsError(f"{path} holds {held} sample(s) but results.json records n = {n} for task "
                           f"{task} ({what}); the file or the record was changed")


def entry_samples(folder: Path, entry: TaskEntry, task: str, *, counted: bool = True,
                  fields: Mapping[str, Any] = MappingProxyType({})) -> list[Sample]:
    """:func:`run_samples` of a task's record entry (``counted``: hold exactly its ``n``; ``fields``: the
    task's own fields each line holds, of their types)."""
    return run_samples(folder, entry.samples_file or samples_name(task), task, entry.n if counted else None, fields)


def entry_counted(folder: Path, entry: TaskEntry, task: str) -> None:
    """:func:`entry_samples`' file and count checks alone (inside the folder, no torn line, exactly the entry's
    ``n`` lines), each line read as JSON, not yet as a sample: a reader showing the record (`report`'s tables)
    stops on a file that lost or gained lines, and leaves a line's own damage to the readers of its samples."""
    path = samples_path(Path(folder), entry.samples_file or samples_name(task), task)
    _counted(Path(folder), path, task, _finished_count(path), entry.n)
