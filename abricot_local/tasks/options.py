"""The tasks' options (:class:`TaskOptions`): each one a field, declared once (option_fields), from
which the command line's flags, the API's keywords, lm-eval's keys, the checks and the recorded config
are made; and the parsing of a prompt-variant (or protocol) value, once, into a tuple of names."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from abricot_local.backends.options import seed_option
from abricot_local.core import MAX_SEED
from abricot_local.errors import UsageError, opt
from abricot_local.option_fields import option, recorded, settle, specs, validate

ALL = "all"  # --prompt-variant all: every variant each task declares


def names(spec: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """The names of a --prompt-variant (or --protocol) value, in order, once each (``all`` stays ``all``):
    a comma-separated text or a list of names."""
    if spec is None:
        return ()
    parts = spec.split(",") if isinstance(spec, str) else [str(n) for n in spec]
    return tuple(dict.fromkeys(n.strip() for n in parts if n.strip()))


def normal(spec: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...] | None:
    """A prompt-variant value as a run holds it: a tuple of names without blanks or repeats, ``("all",)``
    for every variant; :class:`UsageError` for an empty one or ``all`` in a list."""
    if spec is None:
        return None
    got = names(spec)
    shown = spec if isinstance(spec, str) else ",".join(map(str, spec))
    if not got:
        raise UsageError(f"{opt('prompt_variant')} expects a variant name, a comma-separated list or all, got {shown!r}")
    if any(n.lower() == ALL for n in got):
        if len(got) > 1:
            raise UsageError(f"{opt('prompt_variant', shown)}: `all` already names every variant; give it alone")
        return (ALL,)
    if any("~" in n or "@" in n for n in got):
        raise UsageError(f"{opt('prompt_variant', shown)}: a variant name has no '~' or '@'")
    return got


def data_pairs(given: Any) -> tuple[tuple[str, str], ...]:
    """``data`` as (key, path) pairs, from ``KEY=PATH`` texts (the command line's), a {key: path} dict,
    or a list of texts and (key, path) pairs (Python's); a key no task reads (a misspelt task) is
    refused with a did-you-mean, not ignored."""
    import os

    from abricot_local.errors import UsageError, opt
    from abricot_local.names import did_you_mean

    items = given.items() if isinstance(given, dict) else (given,) if isinstance(given, str) else given
    pairs = []
    for v in items:
        if isinstance(v, str):
            task, sep, path = v.partition("=")
            if not sep or not task or not path:
                raise UsageError(f"{opt('data', ('TASK', 'PATH'))} expected, got {v!r}")
        else:
            task, path = v
        pairs.append((str(task).strip().lower(), os.fspath(path)))
    if pairs:
        from abricot_local.tasks import data_keys

        known = data_keys()
        for key, _ in pairs:
            if key not in known:
                raise UsageError(f"{opt('data', (key, '...'))}: no task reads data named {key!r}."
                                 f"{did_you_mean(key, known)} {opt('data')} takes one of: {', '.join(known)}")
    return tuple(pairs)


def _path_text(given: Any) -> str:
    import os

    return os.fspath(given) if isinstance(given, os.PathLike) else str(given)


def _data_folder(given: Any) -> str:
    """``data_dir`` as text; a file given as it is refused here (what is missing is said where the data is
    looked for)."""
    from pathlib import Path

    from abricot_local.errors import DataError

    path = _path_text(given)
    if Path(path).expanduser().exists() and not Path(path).expanduser().is_dir():
        raise DataError(f"{opt('data_dir', path)} is a file, not a folder: give the folder holding the tasks' data "
                        f"files (one task's file: {opt('data', ('TASK', 'FILE'))})")
    return path


def _recorded_variants(options: "TaskOptions") -> dict:
    """A run's config records the prompt variants as one text (``card,ita-bench``), as it always has."""
    return {"prompt_variant": ",".join(options.prompt_variant) if options.prompt_variant else None}


@dataclass(frozen=True)
class TaskOptions:
    """The tasks' options: each one a field (its flag, the API's keyword and lm-eval's key are made from
    it, option_fields); those ``per_task`` reach only a task that declares it uses them (``Task.uses``,
    tasks.uses). A run records those with ``record`` in its config (compared on --resume)."""

    data: tuple[tuple[str, str], ...] = option((), "Data file or folder for one task (repeatable).",
                                               metavar="TASK=PATH", parse=data_pairs, repeat=True)
    data_dir: str | None = option(None, "Folder holding the tasks' data files.", parse=_data_folder, path=True)
    seed: int = seed_option(record="always", shown_default=True)  # the flag; ScoringOptions.seed is set from it
    shots: int | None = option(None, "Few-shot examples.", min=0, default_text="the protocol's", record="always",
                               per_task=True)
    prompt_variant: tuple[str, ...] | None = option(
        None, "A task's prompt wording (`abricot-local tasks` lists each task's; default: the protocol's, else each "
        "task's first); a task without it is named in the warnings, and a run where no task has it is refused. "
        "Several (a list, or all): each task scored under each of its variants named, keyed TASK~VARIANT (its "
        "default keeps TASK): `report` compares them.", metavar="NAME[,NAME...]|all", parse=normal,
        record=_recorded_variants, per_task=True,
        words="variant names as text ('all', 'ita-bench,card'), a list of them, or None")
    chat_template: bool = option(False, "Render prompts with the model's chat template.", record="always")
    protocol: str | None = option(
        None, "Run each task as a published source ran it, every setting its protocol fixes (ABRICOT: paper, "
        "calamita; several, or all: each task under each of its protocols named, keyed TASK@PROTOCOL but its "
        "first). Default: each protocol whose rows the model's registry entry reproduces, else the task's first "
        "(the paper's).", metavar="NAME[,NAME...]|all", record="always", per_task=True, listed=True,
        words="protocol names as text ('all', 'paper,calamita'), a list of them, or None")
    shot_sampler: str | None = option(
        None, "lm-eval: each item its own shots, as lm-eval draws them (the published protocols'); shared: one "
        "draw for every item (a shared prefix: cheaper, no source's). Default: lm-eval.", record="always",
        per_task=True, declared_choices=True)
    shot_seed: int | None = option(
        None, "Seed of the few-shot draws alone (lm-eval's fewshot_random_seed: which rows are each item's shots), "
        "apart from the run's seed (the items a sample draws, the bootstrap). Default: the protocol's (ABRICOT's "
        "paper: 1234, lm-eval's default), else the task's own (ABRICOT: the run's seed; DISCOTEX: 1234).", min=0,
        max=MAX_SEED,
        default_text="the protocol's, else the task's", record="if_set", per_task=True)
    allow_download: bool = option(True, internal=True)

    def __post_init__(self) -> None:
        settle(self)  # a value given as text or in another shape parsed by its field (prompt_variant, data)
        validate(self)  # --seed, --shots in range, named in the message

    def data_for(self, key: str, name: str) -> str | None:
        """The path ``--data`` gives a task of data key ``key`` (``abricot``) and name ``name`` (``abricot_abs``):
        the one given for its name, the narrower, else for its key (each the last given for it)."""
        given = dict(self.data)
        return given.get(name, given.get(key))

    def config(self) -> dict:
        """The options a run records in its config (and compares on --resume)."""
        return recorded(self)

    @classmethod
    def from_config(cls, config: dict, *, data: tuple[tuple[str, str], ...] = (), allow_download: bool = False,
                    where: str | None = None, at=None, owns=()) -> "TaskOptions":
        """The options of a recorded run (its config, a task's config over the run's; ``owns``: the tasks' own
        configs, or the task's, read by :func:`as_read`). A recorded value of
        another type than its field's, or outside its choices or range, is a :class:`ResultsError` naming
        ``where`` (the run's results.json) and the key under ``at`` (record.codec.check_options: ``config``)."""
        from abricot_local.errors import NONE, Namer, ResultsError, render
        from abricot_local.record.codec import Invalid, check_options

        recorded_keys = [s.name for s in specs(cls) if s.record]
        config = as_read(config, owns)
        values = {k: config.get(k) for k in recorded_keys}
        at = at or "config"
        head = f"{where} is malformed" if where else "a recorded run's config is malformed"
        try:
            check_options(cls, values, at)
            options = cls(allow_download=allow_download, **{k: v for k, v in values.items() if v is not None})
        except Invalid as err:
            raise ResultsError(f"{head}: {err.raw()}") from None
        except UsageError as err:  # a value of its type outside its choices or range: named by its key, not a flag
            def key(name: str, value=NONE) -> str:
                return f"{at(name) if callable(at) else at}.{name}"
            raise ResultsError(f"{head}: {render(err.raw(), Namer(key))}") from None
        return replace(options, data=data) if data else options


def as_read(config: dict, owns) -> dict:
    """A recorded config (a run's, or a task's: the run's with its own over it) as this version reads it, ``owns`` the
    tasks' own configs (the task's alone for a task's): a run recorded before ``shot_seed`` was an option (no
    ``shot_seed``) whose tasks drew any shots with their ``seed`` (shots recorded, no ``shot_seed`` of their own:
    ABRICOT's; DISCOTEX recorded its own with shots), one seed for all and none recording another, is read as given
    that seed.
    The one rule every reader of recorded settings follows: a task rebuilt (check, merge, kld) draws its shots as the
    run did; its published verdict (analysis.baselines) holds that seed to the protocol's."""
    if "shot_seed" in config:
        return config
    owns = [dict(o) for o in owns]
    drawn = {o["seed"] for o in owns if "shot_seed" not in o and _whole(o.get("shots")) and _whole(o.get("seed"))}
    if len(drawn) != 1 or any(o["shot_seed"] not in drawn for o in owns if "shot_seed" in o):
        return config
    return {**config, "shot_seed": drawn.pop()}


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
