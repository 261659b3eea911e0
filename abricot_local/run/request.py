"""A run as asked for, typed: built once by every door (the command line, the Python API) from the
option values by field name (the tasks' TaskOptions fields and the backends' Options fields, each
parsed by its field: text from a command line or lm-eval, typed from Python) and the run's own
arguments, with `run`'s first refusals; what the plan takes. No printing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from abricot_local.errors import UsageError, opt
from abricot_local.names import path_part
from abricot_local.option_fields import option, recorded, settle, validate

if TYPE_CHECKING:  # loaded once the request holds together: an unknown name is refused before them
    from abricot_local.models.given import Given
    from abricot_local.tasks.base import TaskOptions


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str | None) -> "Shard | None":
        if not text:
            return None
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise UsageError(f"{opt('shard')} expects K/N with 1 <= K <= N (like 2/4), got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    def places(self, order: Sequence[int]) -> list[int]:
        """Where this part's items lie among a task's items (after --limit/--sample, in release order), given
        the order they are dealt in (``order``: tasks.selection.dealt, their indices by rank in the task's nested
        order): those at ranks K-1, K-1+N, K-1+2N, ... of it, in release order. A fixed set of ranks of a
        uniformly random order: a simple random draw, without replacement, of the items; the N parts are
        disjoint, cover them and differ by one item at most; and part K of the first n ranks lies inside part K
        of the first n' > n (a grown --sample's shard keeps its items)."""
        return sorted(order[self.index - 1 :: self.count])

    def take(self, items: Sequence, order: Sequence[int]) -> list:
        """The K-th of N disjoint parts of ``items`` (in release order; ``order``: :meth:`places`'s)."""
        return [items[p] for p in self.places(order)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class SettleOptions:
    """Stopping when it is settled (issue 50): each one a field, as the tasks' options are (its flag, the API's
    keyword, lm-eval's key and the checks made from it). Recorded in a run's config, not in its manifest: the
    items a stopped run holds are its recorded sample, and a --resume compares those."""

    until_settled: bool = option(
        False, "Score each task's items in the nested sample order (the first N of one seeded order) and stop at "
        "the first planned look where every verdict asked for is settled: the published rows the model's registry "
        "entry reproduces; with --quants, each rung against its reference. Each look's interval spends part "
        "of the 10% error (docs/protocols.md, \"Stopping when it is settled\"); the run that stops is the sample "
        "run of the items it scored.", record="if_set")
    looks: tuple[int, ...] | None = option(
        None, "With --until-settled: the item counts at which the verdicts are read (default 20, 40, 80, ... and "
        "each task's last).", metavar="N,N,...", min=1, record="if_set")
    max_items: int | None = option(
        None, "With --until-settled: stop at N items of each task if nothing settles first (--sample N says the "
        "same).", metavar="N", min=1, record="if_set")

    def __post_init__(self) -> None:
        if self.looks is not None:
            object.__setattr__(self, "looks", tuple(sorted({int(n) for n in self.looks})))
        validate(self)

    @property
    def on(self) -> bool:
        return self.until_settled

    def config(self) -> dict:
        """What a run's config records of them (only when given)."""
        return recorded(self) if self.until_settled else {}


def _shard(raw) -> str:
    """--shard's value as ``K/N`` (checked: :meth:`Shard.parse`'s refusal)."""
    return str(raw) if isinstance(raw, Shard) else str(Shard.parse(str(raw)) or "")


def _out(raw) -> str:
    """--out's folder as text (a path object too); an empty one refused, not read as ``.``."""
    import os

    text = os.fspath(raw) if isinstance(raw, os.PathLike) else raw
    if not isinstance(text, str):
        raise UsageError(f"{opt('out')}: expected a folder path, got {raw!r}")
    if not text:  # Path("") is ".": not "no --out" (results/<model>/<time>/), not here
        raise UsageError(f"{opt('out')} is empty: give the run's folder (without {opt('out')}, a run writes "
                         "results/<model>/<time>/)")
    return text


def _margin(margin) -> float:
    """``--margin`` (the published verdict's, in the metric's own units): a finite number above 0 (reproduction's
    check, every door's)."""
    from abricot_local.analysis.reproduction import checked_margin

    return checked_margin(margin)


def _path(raw) -> str:
    import os

    return os.fspath(raw) if isinstance(raw, (str, os.PathLike)) else str(raw)


def _paths(raw) -> tuple[str, ...]:
    """--model-dir's folders: one (text, a path object) or several."""
    import os

    return (_path(raw),) if isinstance(raw, (str, os.PathLike)) else tuple(_path(d) for d in raw)


@dataclass(frozen=True)
class RunOptions:
    """The run's own options (issue 44): each one a field, as the tasks' and the settle options are: its flag
    (cli/options.run_flags), the API's keyword and lm-eval's model_args key (``model_arg``) and its checks made
    from it (:func:`run_options`). ``cli``: the flag where it is not made from the field's name."""

    limit: int | None = option(None, "Score only the first N items of each task (release order).", min=1)
    sample: int | None = option(
        None, "Score N items of each task drawn with --seed (release order kept): the first N of one seeded order, "
        "so a sample lies inside every larger one.", min=1)
    shard: str | None = option(
        None, "Score only the K-th of N disjoint parts of each task's items (after --limit/--sample), each a seeded "
        "random draw of them; `merge` joins the parts.", metavar="K/N", parse=_shard,
        words="text 'K/N' ('1/2') or None")
    out: str | None = option(
        None, "Output folder (default results/<model>/<time>/; several models: results/<sweep>/<model>/).",
        path=True, parse=_out, words="a folder path (text or a Path) or None")
    resume: bool = option(
        False, "Continue an interrupted run (or sweep) in --out; with a larger --sample, grow a --sample run (only "
        "the new items are scored); with another --margin, judge a finished run's verdict again at it (nothing is "
        "scored).")
    margin: float | None = option(
        None, "The published verdict's margin, in the metric's own units: reproduced when the 90% CI of run - "
        "published lies inside +-M (default: each task's declared margin per metric).", metavar="M", parse=_margin)
    models_file: str | None = option(None, "Extra models.toml extending the registry.", path=True, parse=_path,
                                     cli="--models", model_arg="models")
    force: bool = option(False, "Run even if the model seems not to fit in memory or on disk.", model_arg="force")
    quants: str | None = option(
        None, "Run these quants of MODEL, as the registry names them (models.toml `base` and `quant`: e.g. "
        "Q4_K_M,Q8_0), one after another; `report` draws the ladder.", metavar="Q,Q,...", listed=True,
        words="quant names as text ('Q4_K_M,Q8_0'), a list of them, or None")
    model_dirs: tuple[str, ...] = option(
        (), "A folder of GGUF files: MODEL may then be a file name found there (repeatable).", metavar="DIR",
        path=True, repeat=True, parse=_paths, cli="--model-dir", model_arg="model_dir")

    def __post_init__(self) -> None:
        settle(self)
        validate(self)
        if self.sample is not None and self.limit is not None:
            raise UsageError(f"{opt('sample', self.sample)} and {opt('limit', self.limit)} cannot be combined: "
                             f"{opt('sample')} draws items with the seed, {opt('limit')} takes the first ones; give "
                             "one of them")
        if self.resume and not self.out:
            raise UsageError(f"{opt('resume', True)} needs the {opt('out')} folder of the run to continue")


def run_options(values: Mapping[str, Any]) -> RunOptions:
    """The run's options from values by field name (None: not given; the others are left), each parsed and checked
    by its field (option_fields.from_values: the one check of every door), then together (--sample with --limit,
    --resume without --out)."""
    from abricot_local.option_fields import from_values, specs

    return from_values(RunOptions, {s.name: values[s.name] for s in specs(RunOptions) if s.name in values},
                       owner="the run")


@dataclass(frozen=True)
class RunRequest:
    """The models (several: a sweep), the tasks (``task_spec``: --tasks as given, None: every task
    whose data is here) and their options, the backend options given, the item selection, the
    folder, and the time that names default folders."""

    models: tuple[str, ...]
    given: Given
    task_spec: str | None
    task_options: TaskOptions
    limit: int | None = None
    sample: int | None = None
    shard: Shard | None = None
    out: Path | None = None
    resume: bool = False
    force: bool = False
    models_file: str | None = None
    model_dirs: tuple[str, ...] = ()
    stamp: str = ""  # UTC, %Y%m%d-%H%M%S: results/<model>/<stamp>, results/sweep-<stamp> (made: run.session.Folders)
    margin: float | None = None  # --margin: the published verdict's (None: each task's)
    task_keys: tuple[str, ...] = ()  # a recorded run's task instances, by key (check, kld): made as they were
    settle: SettleOptions = SettleOptions()  # --until-settled, --looks, --max-items
    reference: str | None = None  # a --until-settled ladder's (several models): its highest-precision quant
    registry: dict | None = field(default=None, compare=False, repr=False)  # models_file's, read once given
    listed: bool = False  # the models given as a list (the API's ``evaluate([model])``): a sweep even of one

    def __post_init__(self) -> None:
        if self.sweep:  # every door's sweep: its folders apart, before any plan
            apart(self.models, self.out)

    @property
    def sweep(self) -> bool:
        """Whether this is a sweep (one folder per model under the sweep's, a list of runs back): several
        models, or a list of one (:attr:`listed`)."""
        return self.listed or len(self.models) > 1

    def known_models(self) -> dict:
        """The registry the request names models from (``models_file``'s entries too), read once."""
        if self.registry is None:
            from abricot_local.models.registry import load_registry

            object.__setattr__(self, "registry", load_registry(self.models_file))
        return self.registry

    @property
    def caution(self) -> str | None:
        """What --limit's items may not represent (said once, before anything runs)."""
        if self.limit is None:
            return None
        return (f"caution: {opt('limit', self.limit)} scores the first {self.limit} items of each task in release "
                f"order, which may not represent the task (use {opt('sample', 'N')} for a seeded draw)")

    def out_folder(self, model: str) -> Path | None:
        """The folder --out names for ``model``'s run: a sweep's <out>/<its slug>, else --out; None without --out
        (a default folder, made when the run asks for it: run.session.Folders). The one rule for both, the run's and
        the dry run's: a sweep's --out that is itself a link is refused here, the whole sweep before any model's plan,
        in the words one model's --out is refused by (run.owned.linked; a link further up is not refused)."""
        if self.out is None:
            return None
        if not self.sweep:
            return self.out
        if self.out.is_symlink():
            from abricot_local.run.owned import linked

            raise linked(self.out)
        return self.out / slug(model)


def slug(model: str) -> str:
    """A model's name as given, made the name of its folder in a sweep: a .gguf path's file name without it, every
    run of characters other than ASCII letters, digits, ``.``, ``_`` and ``-`` one ``_``, then
    :func:`names.path_part` (its length, its fallback). Not path_part alone, which keeps a name as it is where it
    can (``hf:org/repo:Q4_K_M`` would be ``hf:org_repo:Q4_K_M``, a .gguf path's folders kept): a sweep folder's names
    stay plain ASCII, and a sweep folder written before keeps the names its ``--resume`` looks for."""
    name = Path(model).name.removesuffix(".gguf") if model.lower().endswith(".gguf") else model
    return path_part(re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._"), "model")


def apart(models: Sequence[str], out: Path | None) -> None:
    """A sweep's models, each into a folder of its own (<out>/<its slug>): a model given twice (the same name, or two
    paths to one file) refused as a duplicate, two whose slugs name one folder (letter case aside: m1/model.gguf and
    m2/model.gguf) as sharing it, before any plan. Slugs unchanged: a sweep folder written before still resumes."""
    import os

    seen: dict[str, str] = {}  # a model's file (two paths to one file: one model), else its name -> the model
    named: dict[str, str] = {}  # its folder's name, letter case aside -> the model
    for model in models:
        path = os.path.expanduser(model)
        same = (os.path.realpath(path) if os.path.isfile(path) else
                os.path.normpath(path) if model.lower().endswith(".gguf") else model)
        if same in seen:
            what = "is given twice" if seen[same] == model else f"and {seen[same]!r} are one model file ({same})"
            raise UsageError(f"{model!r} {what}: a sweep runs each model once; give it once")
        seen[same] = model
        if (first := named.setdefault(slug(model).casefold(), model)) != model:
            where = Path(out or "results/sweep-<time>") / slug(model)
            raise UsageError(f"{first!r} and {model!r} would share the sweep's folder {where} (a model's run is "
                             "written into a folder named by the model, a .gguf file's name without .gguf): give each "
                             "model a file of its own name (rename or link one), or run them apart, each with its own "
                             f"{opt('out')}")


def option_names() -> tuple[str, ...]:
    """Every option a request takes by field name: the tasks' and the backends' (a flag each)."""
    from abricot_local.backends import option_specs
    from abricot_local.option_fields import specs
    from abricot_local.tasks.base import TaskOptions

    names = [s.name for s in specs(TaskOptions) if not s.internal] + [s.name for s in specs(SettleOptions)]
    return tuple(dict.fromkeys([*names, *(s.name for s, _ in option_specs() if s.flag)]))


def settle_options(values: Mapping[str, Any], sample: int | None, limit: int | None, shard) -> SettleOptions:
    """--until-settled, --looks and --max-items from values by field name, each parsed and checked; with
    --until-settled, --sample N is --max-items N, and --limit and --shard are refused (the first items in
    release order, or a part of them, are no draw the rule can read); --looks and --max-items need it."""
    from abricot_local.option_fields import from_values, specs

    names = {s.name for s in specs(SettleOptions)}
    given = {k: v for k, v in values.items() if k in names and v is not None and v is not False}  # (0 is given)
    s = from_values(SettleOptions, given, owner="the run")
    if not s.until_settled:
        extra = [k for k in ("looks", "max_items") if getattr(s, k) is not None]
        if extra:
            raise UsageError(f"{opt(extra[0])} goes with {opt('until_settled', True)}: it plans the looks of a run "
                             "that stops when its verdicts are settled")
        return s
    for name, value in (("limit", limit), ("shard", shard)):
        if value is not None:
            raise UsageError(f"{opt(name, value)} cannot be combined with {opt('until_settled', True)}: the rule "
                             f"reads the first items of one seeded draw of the whole task ({opt('sample', 'N')} "
                             f"or {opt('max_items', 'N')} bounds it)")
    if sample is not None:
        if s.max_items is not None and s.max_items != sample:
            raise UsageError(f"{opt('sample', sample)} and {opt('max_items', s.max_items)} both bound a run "
                             f"{opt('until_settled', True)}; give one of them")
        s = SettleOptions(True, s.looks, sample)
    return s


def task_options(values: Mapping[str, Any]):
    """The tasks' options from values by field name (None: not given), each parsed and checked."""
    from abricot_local.option_fields import from_values, specs
    from abricot_local.tasks.base import TaskOptions

    names = {s.name for s in specs(TaskOptions) if not s.internal}
    return from_values(TaskOptions, {k: v for k, v in values.items() if k in names}, owner="the tasks")


def given_options(backend: str, values: Mapping[str, Any], seed: int):
    """The backend options given (a models.given.Given: only those given, and the seed), each parsed
    and checked now (an option the chosen backend lacks is an error)."""
    from abricot_local.backends import option_specs
    from abricot_local.models.given import Given

    names = {s.name for s, _ in option_specs() if s.flag}
    given = Given(backend, {**{k: v for k, v in values.items() if k in names and v is not None}, "seed": seed})
    given.checked()
    return given


def request_of(models: str | Sequence[str], values: Mapping[str, Any] | None = None, *, tasks: str | None = None,
               backend: str | None = None, listed: bool = False, **run: Any) -> RunRequest:
    """The request of a run (`run`'s arguments, ``evaluate``'s): ``values``, the options by field name (the
    tasks', the backends', the settle options and the run's own, :class:`RunOptions`); ``run``: run options given
    by keyword (over ``values``); refused now where it cannot run: each run option (:func:`run_options`), a
    --models file that cannot be read, --quants of one model (its aliases in the registry), each option's value. A
    model's name is found by its plan, first. ``listed``: the models were given as a list (a sweep, even of one)."""
    from abricot_local.backends import DEFAULT_BACKEND

    unknown = sorted(set(run) - {f.name for f in fields(RunOptions)})
    if unknown:  # a door's own mistake: every run option is a RunOptions field
        raise TypeError(f"request_of() has no run option {', '.join(unknown)}")
    values = dict(values or {})
    o = run_options({**values, **run})
    backend = backend or DEFAULT_BACKEND
    models = (models,) if isinstance(models, str) else tuple(str(m) for m in models)
    registry = None
    if o.quants is not None or o.models_file is not None:  # a models file the user named: read now (any backend)
        from abricot_local.models.registry import load_registry

        registry = load_registry(o.models_file)
    if o.quants is not None:  # the registry's aliases of MODEL's quants: a sweep
        from abricot_local.models.quants import expand

        models = tuple(expand(models, o.quants, registry))
    if not models:
        raise UsageError("no model given")
    options = task_options(values)
    settle = settle_options(values, o.sample, o.limit, o.shard)
    sample = settle.max_items if settle.on else o.sample  # the items the rule may read: the first of one draw
    if settle.on and len(models) > 1:  # a ladder's reference, chosen once (run/settle_sweep.py)
        from abricot_local.models.quants import reference
        from abricot_local.models.registry import load_registry

        registry = registry if registry is not None else load_registry(o.models_file)
    return RunRequest(models, given_options(backend, values, options.seed), tasks, options, o.limit, sample,
                      Shard.parse(o.shard), None if o.out is None else Path(o.out), o.resume, o.force,
                      o.models_file, o.model_dirs, datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"), o.margin,
                      settle=settle, reference=reference(models, registry) if settle.on and len(models) > 1 else None,
                      registry=registry, listed=listed)


def of_record(record, model: str, task_options, over: Mapping[str, Any] | None = None) -> RunRequest:
    """The request a recorded run (a record.Record) was made with, for `check` and `kld`: ``model`` (the
    name its model is found by again), its backend and every backend option it recorded (``over``:
    options that change no number, on top; no registry default applies), its task instances by key with
    ``task_options`` (their data found again), its item selection."""
    from abricot_local.backends import recorded_options
    from abricot_local.models.given import Given

    kind = record.config.backend
    options = recorded_options(kind, record.config_dict(), dict(over or {}))
    return RunRequest((model,), Given.of(options, backend=kind), None, task_options, record.config.limit,
                      record.config.sample, Shard.parse(record.config.shard), force=True,
                      task_keys=tuple(record.tasks))
