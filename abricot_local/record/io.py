"""Reading and writing a run's record: results.json and the checkpoint's run.json.

The one place that opens results.json. A file of another schema version, or JSON that
is not a run (a report, a check report, an lm-eval results file), is one line naming
what it is; a run with a wrong value names the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from abricot_local.errors import ResultsError, opt
from abricot_local.jsonfiles import atomic_write, read_json
from abricot_local.record.codec import Invalid, describe
from abricot_local.record.schema import SCHEMA_VERSION, Manifest, Record

RESULTS = "results.json"
CHECKPOINT = ".checkpoint"
RUN_MANIFEST = "run.json"

# how to bring an older schema's document to this one (none yet: 1 is the first)
MIGRATIONS: dict[int, object] = {}


def what_it_is(doc) -> str | None:
    """What a JSON document that is not an abricot-local run is, or None for a run."""
    if not isinstance(doc, dict):
        return describe(doc).split(" (")[0]
    if "results" in doc and ({"configs", "versions", "n-shot", "config"} & set(doc)):
        return "an lm-eval results file"
    if "runs" in doc and ("published_checks" in doc or "baselines" in doc):
        return "an abricot-local report (report --format json)"
    if "checked" in doc and "reproduced" in doc:
        return "an abricot-local check report (check --json)"
    if "schema_version" not in doc and not {"model", "tasks"} <= set(doc):
        return "a JSON object with no schema_version, model or tasks"
    return None


def record_from_json(doc, where: str) -> Record:
    """A run's record from its parsed results.json (``where`` names the file in errors)."""
    kind = what_it_is(doc)
    if kind:
        raise ResultsError(f"{where} is {kind}, not an abricot-local run")
    version = doc.get("schema_version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ResultsError(f"{where} is malformed: schema_version is {describe(version)}, not an integer")
    if version != SCHEMA_VERSION:
        if version in MIGRATIONS:
            doc = MIGRATIONS[version](doc)
        else:
            raise ResultsError(f"{where} has schema_version {version!r}; this version reads {SCHEMA_VERSION} "
                               "(written by another version of abricot-local)")
    try:
        return Record.from_dict(doc)
    except Invalid as err:
        raise ResultsError(f"{where} is malformed: {err}") from None


def _load_json(path: Path):
    """The JSON in ``path`` (jsonfiles.read_json: not UTF-8, too deep, an integer too long: one line)."""
    return read_json(path, ResultsError)


def read_record(path: str | Path) -> Record:
    """The record in a results.json file."""
    path = Path(path)
    if not path.exists():  # there but no regular file (a FIFO, a device): read_json says what it is
        raise ResultsError(f"{path} is missing")
    return record_from_json(_load_json(path), str(path))


def read_run(folder: str | Path) -> Record:
    """The record of the finished run in ``folder``; one line saying what the folder is otherwise."""
    folder = Path(folder)
    if not folder.exists():
        raise ResultsError(f"run folder not found: {folder}")
    if not folder.is_dir():
        raise ResultsError(f"{folder} is not a folder (give the {opt('out')} folder of a run)")
    if not (folder / RESULTS).exists():
        if (folder / CHECKPOINT).exists():  # interrupted, failed or still running: run/states.py reads which
            raise ResultsError(f"{folder} holds no finished run (no {RESULTS}, a checkpoint: an unfinished run)")
        raise ResultsError(f"{folder} holds no {RESULTS} (not a finished run)")
    return read_record(folder / RESULTS)


def to_json(record: Record) -> str:
    """results.json's text (NaN written as the bare token, as Python's json reads it)."""
    return json.dumps(record.to_dict(), indent=2, ensure_ascii=False) + "\n"


def write_record(path: Path, record: Record) -> Path:
    """Write results.json atomically; returns its path."""
    atomic_write(Path(path), to_json(record))
    return Path(path)


# -- the checkpoint's manifest ------------------------------------------------------------------
def read_manifest(path: Path) -> Manifest:
    """The manifest a checkpoint (``.checkpoint/run.json``) recorded."""
    doc = _load_json(path)
    try:
        return Manifest.from_dict(doc)
    except Invalid as err:
        raise ResultsError(f"{path} is not a run's manifest ({err}); "
                           f"remove {path.parent} to start the run over") from None


def write_manifest(path: Path, manifest: Manifest) -> None:
    atomic_write(path, json.dumps(manifest.to_dict(), indent=1, sort_keys=True))


def _shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ",".join(_shown(v) for v in value) or "none"
    return str(value)


def _option(key: str) -> str:
    """A config key as a message names it: the model in words, any other key an option (:func:`errors.opt`:
    each door writes it, ``--shots`` on the command line, ``shots`` in Python)."""
    return "the model" if key == "model" else opt(key)


def _short(sha) -> str:
    return f"{sha[:12]}..." if isinstance(sha, str) else _shown(sha)


def _shas(value) -> str:
    return _shown([_short(x) for x in value or ()])


def _real_sha(sha) -> bool:
    """Whether ``sha`` is a model file's SHA-256 (64 hex digits): a synthetic model records None, and anything
    else (a calibration's key, ``run.calibration.synthetic_key``, were one ever recorded) names no file."""
    return isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdefABCDEF" for c in sha)


def _config_keys(recorded: Manifest, given: Manifest) -> list[str]:
    """The config keys whose values differ; ``model`` not among them when both sides record the same real
    SHA-256 (the same file, called by an alias or a path)."""
    rc, gc = recorded.config.to_dict(), given.config.to_dict()
    same_file = _real_sha(recorded.model_sha256) and recorded.model_sha256 == given.model_sha256
    return [k for k in dict.fromkeys([*gc, *rc]) if rc.get(k) != gc.get(k) and not (k == "model" and same_file)]


def differences(recorded: Manifest, given: Manifest) -> dict[str, list[str]]:
    """What differs between a recorded and a new manifest, by part ("config", "model file",
    "data", "task versions"), each with both values ("--shots: recorded 3, given 2"; a task's
    data or version labelled: "data sha256 of abricot_abs: ...", "task version of abricot_abs: ...");
    empty when the run may continue. A task run on one side only is named by the config's tasks,
    not again by its data and version. Options are named with :func:`errors.opt` (a door words them). A model's
    identity is its file's SHA-256: both sides recording the same real one (:func:`_real_sha`), the name it was
    called by (an alias, a path) is no difference."""
    out: dict[str, list[str]] = {}
    rc, gc = recorded.config.to_dict(), given.config.to_dict()
    for key in _config_keys(recorded, given):
        line = f"{_option(key)}: recorded {_shown(rc.get(key))}, given {_shown(gc.get(key))}"
        out.setdefault("config", []).append(line)
    if recorded.model_sha256 != given.model_sha256:
        out["model file"] = [f"recorded sha256 {_short(recorded.model_sha256)}, given {_short(given.model_sha256)}"]
    tasks_named = rc.get("tasks") != gc.get("tasks")  # the config's tasks line names a task run on one side only
    for part, label, rec, new, show in (("data", "data sha256", recorded.data_sha256, given.data_sha256, _shas),
                                        ("task versions", "task version", recorded.task_versions,
                                         given.task_versions, _shown)):
        for task in dict.fromkeys([*new, *rec]):
            if tasks_named and (task in rec) != (task in new):
                continue
            if rec.get(task) != new.get(task):
                out.setdefault(part, []).append(f"{label} of {task}: recorded {show(rec.get(task))}, "
                                                f"given {show(new.get(task))}")
    if "model" not in _config_keys(recorded, given):  # the same file by another name: compared as the same
        given = replace(given, config=replace(given.config, model=recorded.config.model))
    if not out and recorded.to_dict() != given.to_dict():
        out["manifest"] = ["the recorded one differs from this run's"]
    return out


def growth(recorded: Manifest, given: Manifest) -> tuple[int, int] | None:
    """(n, m) when ``given`` is the ``recorded`` run with a larger ``--sample`` (n -> m) and nothing else changed: a
    run that grows (its n items lie inside the m: tasks.selection.sample_order); else None. A run grows only where a
    larger sample is asked for: no ``--sample`` on a sample run is refused (:func:`refused` says how to continue or
    grow it), never taken as every item (a resume that forgot its --sample would score the whole task); a sample
    already taking every item of every task that no ``--sample`` takes is the same run, made so before a door asks
    (run.saved.whole_tasks)."""
    n, m = recorded.config.sample, given.config.sample
    if n is None or m is None or m <= n:
        return None
    same = replace(given, config=replace(given.config, sample=n))
    return (n, m) if not differences(recorded, same) else None


def same_items(n: int | None, m: int | None, available) -> bool:
    """Whether ``--sample n`` and ``--sample m`` (None: no --sample, the whole task) take the same items of tasks
    holding ``available`` items each (a list; 0 or None: not known): both the whole of every task (run.saved.whole_tasks'
    rule; a sample below a task's items is a shrink or a grow, never the same)."""
    least = min((x for x in (n, m) if x is not None), default=None)
    return bool(available) and all(a and (least is None or least >= a) for a in available)


def sample_words(m: int | None, bound: str = "sample") -> str:
    """A run's sample (or, ``bound`` ``max_items``, an --until-settled run's bound) as a message says what a run
    grows to: ``--sample m``, or every item where none is given."""
    return opt(bound, m) if m is not None else f"every item (no {opt(bound)})"


def _shrinks(recorded: Manifest, given: Manifest) -> bool:
    """Whether ``given`` is the ``recorded`` run with a smaller sample, nothing else changed: ``--sample m`` below the
    recorded n, or any ``--sample m`` where the run recorded none (the whole of every task; a sample taking every item
    of every task is that same run, made so before a door asks: run.saved.whole_tasks)."""
    n, m = recorded.config.sample, given.config.sample
    if m is None or (n is not None and m >= n):
        return False
    return not differences(recorded, replace(given, config=replace(given.config, sample=n)))


def _until_settled(folder) -> bool:
    """Whether the finished run in ``folder`` ran ``--until-settled`` (its record's config says; a manifest does
    not: a --resume compares the items it scored, its ``sample``, which ``--max-items`` bounds)."""
    path = Path(folder) / RESULTS
    try:
        config = read_record(path).config if path.is_file() else None
    except (ResultsError, OSError):
        return False  # taking the folder says what is wrong with it
    return bool(config is not None and config.until_settled)


# what each part of differences() asks to be the same, in a refusal's last words
_NEEDED = {"model file": "model file", "data": "data", "task versions": "task versions", "manifest": "run"}


def _needed(diff: dict[str, list[str]], recorded: Manifest, given: Manifest) -> str:
    """What the refusal asks for: the same of each part that differs ("the same options are needed")."""
    needs = []
    for part in diff:
        if part == "config":
            keys = _config_keys(recorded, given)
            needs += (["model"] if "model" in keys else []) + (["options"] if set(keys) - {"model"} else [])
        else:
            needs.append(_NEEDED.get(part, part))
    needs = list(dict.fromkeys(needs))
    said = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + " and " + needs[-1]
    plural = len(needs) > 1 or needs[0] in ("options", "task versions")
    return f"the same {said} {'are' if plural else 'is'} needed"


@dataclass(frozen=True)
class Refusal:
    """Why a --resume cannot take the run in ``folder``, in its parts: ``given``, the option it names as refused
    (``--sample m``: a shrink; "" for none) and ``why``, the reason, which names no folder. :meth:`said` is the
    resume's refusal; a run without --resume offered it says the parts after its own words (run.saved.resume_offer)."""

    folder: str
    why: str
    given: str = ""

    def said(self) -> str:
        return f"cannot resume {self.folder}{f' with {self.given}' if self.given else ''}: {self.why}"


def resume_refusal(folder, recorded: Manifest, given: Manifest) -> str | None:
    """:func:`refused`'s refusal said (the resume's words), or None when the run can be continued."""
    why = refused(folder, recorded, given)
    return None if why is None else why.said()


def refused(folder, recorded: Manifest, given: Manifest) -> Refusal | None:
    """Why a run in ``folder`` cannot be continued with ``given`` (its options named with
    :func:`errors.opt`: the door that raises it words them), or None when it can (the same run, or
    the same run with a larger ``--sample``: :func:`growth`). A larger sample is no difference: the
    refusal names the others, and says the sample alone would have grown the run. A run made
    ``--until-settled`` (its record's config says) is bounded by ``--max-items``, which the advice names."""
    diff = differences(recorded, given)
    if not diff or growth(recorded, given):
        return None
    n, m = recorded.config.sample, given.config.sample
    bound = "max_items" if _until_settled(folder) else "sample"  # run/request.py maps --max-items onto the sample
    if _shrinks(recorded, given):
        return Refusal(str(folder), _shrink_refusal(bound, n, m), opt(bound, m))
    grown = ""
    if n is not None and m is None and list(diff) == ["config"] and len(diff["config"]) == 1:  # only no --sample
        grown = (f" ({opt(bound, n)} continues it; a larger {opt(bound)} grows it, one at or above each task's items "
                 "to every item)")  # never taken as every item: a resume that forgot its --sample (growth)
    elif n is not None and m is not None and m > n:  # the sample grows a run: not what refuses this one
        given = replace(given, config=replace(given.config, sample=n))
        diff = differences(recorded, given)
        grown = (f" (changing only {opt(bound, n)} to {sample_words(m, bound)} would have grown it)"
                 if bound == "sample" else
                 f" ({opt(bound, m)} with nothing else changed would have grown it)")  # its bound is no sample
    parts = list(diff)
    head = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "differs" if len(parts) == 1 else "differ"
    details = "; ".join(d for ds in diff.values() for d in ds)
    return Refusal(str(folder), f"its {head} {verb} from the recorded run ({details}); "
                                f"{_needed(diff, recorded, given)}{grown}")


def _shrink_refusal(bound: str, n: int | None, m: int) -> str:
    """Why a --resume with ``bound`` (``sample``, or ``max_items`` for a run made --until-settled) m is refused by a
    run that holds n (None: every item of every task, no bound given): a run does not shrink."""
    if n is None:
        held = (f"a run without {opt(bound)} (every item)" if bound == "sample" else
                f"the items a run {opt('until_settled', True)} without {opt(bound)} scored")
        keep = f"give no {opt(bound)} (or one at or above every task's items) to continue it"
    else:
        held = (f"a run of {opt(bound, n)}" if bound == "sample" else
                f"the {n} items a run {opt('until_settled', True)} scored")
        keep = f"give {opt(bound, n)} or more to continue or grow it"
    return (f"it holds {held}, and a run does not shrink (its items would be dropped); {keep}, or another "
            f"{opt('out')} for a smaller {'sample' if bound == 'sample' else 'bound'}")
