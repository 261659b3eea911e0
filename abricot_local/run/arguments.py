"""A run's arguments as the command line and the Python API give them (a dict of option values
by name, ``kw``: the command's edge), checked alike and turned into the library's option objects."""

from __future__ import annotations

from abricot_local.errors import UsageError


def data_pairs(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``--data KEY=PATH`` values as (key, path); a key no task reads (a misspelt task) is refused
    with a did-you-mean, not ignored."""
    from abricot_local.names import did_you_mean
    from abricot_local.tasks import data_keys

    pairs = []
    for v in values:
        task, sep, path = v.partition("=")
        if not sep or not task or not path:
            raise UsageError(f"--data expects TASK=PATH, got {v!r}")
        pairs.append((task.strip().lower(), path))
    known = data_keys() if pairs else []
    for key, _ in pairs:
        if key not in known:
            raise UsageError(f"--data {key}=...: no task reads data named {key!r}.{did_you_mean(key, known)} "
                             f"--data takes one of: {', '.join(known)}")
    return tuple(pairs)


def backend_values(kw: dict) -> dict:
    """The backend options given (None: not given)."""
    from abricot_local.backends import option_specs

    return {spec.name: kw[spec.name] for spec, _ in option_specs() if kw.get(spec.name) is not None}


def given_opts(kw: dict):
    """The backend options given (a models.given.Given: only the options given, and the seed),
    each parsed and checked now (an option the chosen backend lacks is an error)."""
    from abricot_local.models.given import Given

    given = Given(kw["backend"], {**backend_values(kw), "seed": kw["seed"]})
    given.checked()
    return given


def task_opts(kw: dict):
    from abricot_local.tasks import uses
    from abricot_local.tasks.base import TaskOptions

    return TaskOptions(
        data=data_pairs(kw["data"]), data_dir=kw["data_dir"], seed=kw["seed"], shots=kw["shots"],
        prompt_variant=uses.normal(kw["prompt_variant"]), chat_template=kw["chat_template"],
        protocol=kw.get("protocol"), shot_sampler=kw.get("shot_sampler"),
    )


def margin_of(kw: dict) -> float | None:
    """``--margin`` (the published verdict's, in the metric's own units): a finite number above 0, or None."""
    import math

    margin = kw.get("margin")
    if margin is None:
        return None
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not (math.isfinite(margin) and margin > 0):
        raise UsageError(f"--margin must be a finite number more than 0 (in the metric's own units), got {margin!r}")
    return float(margin)


def check_counts(limit: int | None, sample: int | None, resume: bool, out) -> None:
    """What `run` refuses before anything else: --limit, --sample, --resume without --out."""
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if sample is not None and limit is not None:
        raise UsageError(f"--sample {sample} and --limit {limit} cannot be combined: --sample draws items with the "
                         "seed, --limit takes the first ones; give one of them")
    if sample is not None and sample < 1:
        raise UsageError(f"--sample must be at least 1, got {sample}")
    if resume and not out:
        raise UsageError("--resume needs the --out folder of the run to continue")


def limit_caution(limit: int) -> str:
    return (f"caution: --limit {limit} scores the first {limit} items of each task in release order, "
            "which may not represent the task (use --sample N for a seeded draw)")
