"""The data and the metric of abricot-local's lm-eval tasks (the YAML files beside this module).

lm-eval imports this file by its path (``!function loaders.NAME``). The documents come from the
files `run` reads, found as `run` finds them (lm-eval's metadata: ``--metadata '{"data": {"abricot":
FILE, "discotex": DIR}}'``, or simple_evaluate's ``TaskManager(metadata=...)``: each task's own,
keyed as `run --data KEY=PATH`; ``'{"data": PATH}'``: one path for every task, refused with the
per-task form by a task that cannot read it; or ``'{"data_dir": DIR}'``, else abricot-local's cache;
offline: nothing is downloaded, and `abricot-local data pull TASK` fills the cache), checked as `run`
checks them (a file that is not the pinned release byte for byte is said as a warning). Never a hub
loading script. An error or a warning names an option in the lm-eval door's words (:func:`_door`: the
data as lm-eval's metadata gives it, the shots as its num_fewshot, each in both of lm-eval's doors).

ABRICOT documents are ``{"id", "prompt", "choices", "label"}``: ``prompt`` is the item's text as
`run` writes it (``--shots 0``), ``label`` the gold index (round(5 * mean), 5 -> 4). DISCOTEX
documents are the published rows' columns, ``{"text", "choices", "label"}`` (lm-eval drops a pool
document equal to the item, as `run` does), with the train split as the few-shot pool.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from contextlib import contextmanager
from typing import Any

from abricot_local.errors import Namer

log = logging.getLogger("abricot_local.lm_eval")

LETTERS = ["A", "B", "C", "D", "E"]
PER_TASK = '{"abricot": FILE, "discotex": DIR}'  # metadata's data, each task's own (the door writes it: _door)


def _door() -> Namer:
    """The errors.Namer of what these tasks say: the lm-eval door's (lm_eval/requests.py door_words: the data as
    lm-eval's metadata gives it, by requests.metadata_words, and the shots as its num_fewshot, each in both of
    lm-eval's doors: its command line's ``--metadata``, simple_evaluate's ``TaskManager(metadata=...)``)."""
    from abricot_local.lm_eval.requests import door_words

    return door_words  # (lm_eval/requests.py: the door's words, these tasks' metadata among them)


_PROBE_SHOTS = 1  # the shots :func:`_discotex` asks for to find the few-shot pool


def _door_unprobed() -> Namer:
    """The door's words (:func:`_door`), the probe's shots (:data:`_PROBE_SHOTS`) named without a value: a value no
    user gave (lm-eval's num_fewshot never reaches these loaders); another value (advice: ``--num_fewshot 0``) kept."""
    from abricot_local.errors import NONE

    def write(name: str, value: Any) -> str:
        probe = name == "shots" and value is not NONE and str(value) == str(_PROBE_SHOTS)
        return door.write(name, NONE if probe else value)

    door = _door()
    return Namer(write, door.join, door.call)


def _pairs(data: Any, key: str) -> tuple[tuple[str, str], ...]:
    """``--metadata``'s ``data`` as `run`'s --data pairs: a {key: path} dict (tasks.options.data_pairs: a key
    no task reads refused), else one path, for the task reading data ``key``."""
    from abricot_local.errors import AbricotError
    from abricot_local.tasks.options import data_pairs

    if not data:
        return ()
    if isinstance(data, dict):
        try:
            return data_pairs(data)
        except AbricotError as err:
            raise err.said_by(_door()) from None
    return ((key, os.fspath(data) if isinstance(data, os.PathLike) else str(data)),)


def _options(shots: int, variant: str | None, data: tuple[tuple[str, str], ...] = (), data_dir: Any = None):
    from abricot_local.tasks.base import TaskOptions

    return TaskOptions(data=data, data_dir=str(data_dir) if data_dir else None,
                       shots=shots, prompt_variant=variant, allow_download=False)


@contextmanager
def _reading(task: str, data: Any):
    """A task's data read; an error in the door's words (:func:`_door`), and a path given to every task (``data``
    one path) that this task cannot read refused with the per-task form."""
    from abricot_local.errors import DataError, opt

    try:
        yield
    except DataError as err:
        one = data and not isinstance(data, dict) and os.path.exists(data)
        if not one:
            raise err.said_by(_door()) from None
        why = str(err.said_by(_door())).split("\n")[0]
        raise DataError(f"{task}: one path, {data}, is given to every task ({opt('data', 'PATH')}), and {task} cannot "
                        f"read it ({why}); give each task its own: {opt('data', PER_TASK)}").said_by(_door()) from None


def _warn(task) -> None:
    """The task's warnings on its data, and `run`'s on data that is not the release its published rows were made
    on (tasks/release.py: the same rule), options in the door's words (:func:`_door`)."""
    from abricot_local.errors import render
    from abricot_local.tasks import release

    for note in (*task.warnings(), *release.notes(task)):
        log.warning("%s: %s", task.name, render(note, _door()))


def _known(pairs) -> None:
    """The evaluated documents, each with the id of the item it is, for an error to name it (requests.known_items)."""
    from abricot_local.lm_eval.requests import known_items

    known_items(pairs)


def _dataset(splits: dict[str, list[dict]]):
    import datasets

    return datasets.DatasetDict({name: datasets.Dataset.from_list(docs) for name, docs in splits.items()})


def abricot(kind: str, variant: str, data: Any = None, data_dir: Any = None, **_metadata: Any):
    """ABRICOT's 127 rows as the ``validation`` split (the only one, as in the published files:
    the few-shot pool is the evaluated split itself)."""
    from abricot_local.tasks import make_task

    with _reading(f"abricot_{kind}", data):
        task = make_task(f"abricot_{kind}", _options(0, variant, _pairs(data, "abricot"), data_dir))
        docs = [{"id": it.id, "prompt": it.context, "choices": list(it.choices), "label": it.gold}
                for it in task.items()]
    _known([(doc, doc["id"]) for doc in docs])
    _warn(task)
    return _dataset({"validation": docs})


def discotex(data: Any = None, data_dir: Any = None, **_metadata: Any):
    """DISCOTEX's rows (the published ones when here, else rebuilt from the release, as `run`) as
    ``test``, its few-shot pool as ``train`` (empty, with a warning, when the pool's file is not here);
    built once per process for both wordings."""
    with _reading("discotex", data):
        return _discotex(_pairs(data, "discotex"), None if data_dir is None else str(data_dir))


@functools.lru_cache(maxsize=2)
def _discotex(data: tuple[tuple[str, str], ...], data_dir: str | None):
    from abricot_local.errors import DataError, opt, render
    from abricot_local.tasks import make_task

    def docs(rows) -> list[dict]:
        return [{"text": r.text, "choices": list(r.choices), "label": r.label} for r in rows]

    try:
        task = make_task("discotex", _options(_PROBE_SHOTS, None, data, data_dir))
        rows, pool = task.rows_and_pool()
    except DataError as err:
        task = make_task("discotex", _options(0, None, data, data_dir))
        (rows, pool), why = task.rows_and_pool(), render(err.raw().split("\n")[0], _door_unprobed())
        log.warning("%s", render(f"discotex: no few-shot pool ({why}); {opt('shots')} needs it", _door()))
    _warn(task)
    tests = docs(rows)
    _known(zip(tests, (r.id for r in rows)))
    return _dataset({"test": tests, "train": docs(pool)})


def _wording(name: str):
    from abricot_local.tasks.discotex import WORDINGS

    return WORDINGS[name]


def discotex_card_text(doc: dict) -> str:
    """A row's prompt in the task card's wording (`run --prompt-variant card`)."""
    from abricot_local.tasks.discotex import render
    from abricot_local.tasks.discotex_rows import Row

    return render(_wording("card"), Row("", doc["text"], tuple(doc["choices"]), int(doc["label"])))


def discotex_itabench_text(doc: dict) -> str:
    """A row's prompt in ITA-Bench's wording (`run --prompt-variant ita-bench`)."""
    from abricot_local.tasks.discotex import render
    from abricot_local.tasks.discotex_rows import Row

    return render(_wording("ita-bench"), Row("", doc["text"], tuple(doc["choices"]), int(doc["label"])))


# -- the paper's metric: Pearson of the gold index against the argmax, as the authors' fork --------
def gold_and_argmax(doc: dict, results: list) -> dict:
    """ABRICOT's ``process_results``: (gold index, index of the highest log-likelihood: the first on a
    tie) for Pearson, and whether they agree (``acc``)."""
    lls = [float(r[0]) for r in results]
    return {"pearson": (int(doc["label"]), max(range(len(lls)), key=lls.__getitem__)),
            "acc": float(max(range(len(lls)), key=lls.__getitem__) == int(doc["label"]))}


def pearson(pairs: list) -> float:
    """The aggregation: scipy's ``pearsonr`` over the (gold, prediction) pairs (nan when either is constant)."""
    import warnings

    from scipy.stats import pearsonr

    gold = [float(g) for g, _ in pairs]
    pred = [float(p) for _, p in pairs]
    if len(set(gold)) < 2 or len(set(pred)) < 2:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(pearsonr(gold, pred)[0])
