"""What every backend's options hold: the schedule's and the engine's settings.

A backend's ``Options`` is a frozen dataclass extending :class:`ScoringOptions` with its own
fields, each declared with :func:`~abricot_local.option_fields.option` (type, default, help,
choices, range, whether it is recorded). From those fields alone come the backend's flags
for ``run``/``check``/``labels``, the keys ``lm-eval --model_args`` accepts, the checks of
every value (the same from the command line, lm-eval or Python) and what a run records in
its config (compared on ``--resume``). Adding a setting is one field. A backend's options
live in a module that does not import its runtime, so ``--help`` loads none.
"""

from __future__ import annotations

from dataclasses import dataclass

from abricot_local import option_fields
from abricot_local.backends.engines import ENGINES, engine_class
from abricot_local.backends.session import MAX_PARALLEL
from abricot_local.core import DEFAULT_ENGINE, DEFAULT_N_BATCH, DEFAULT_N_CTX, DEFAULT_SEED, MAX_SEED
from abricot_local.errors import UsageError, opt
from abricot_local.option_fields import C_INT_MAX, option

_EXACT = ", ".join(n for n, e in ENGINES.items() if e.exact)
_GROUPED = ", ".join(n for n, e in ENGINES.items() if e.takes_parallel)


def _engine_config(o: "ScoringOptions") -> dict:
    return engine_class(o.engine).config(o)


def seed_option(**role):
    """The seed's field, declared here once for the two classes that hold it: its default, range and help.
    ``TaskOptions.seed`` is the flag (--seed) and what a run records; ``ScoringOptions.seed`` is set from it
    (``flag=False``: a second --seed flag, or the seed recorded twice, is what one field in both would make)."""
    return option(DEFAULT_SEED, "Seed for item construction, --sample and bootstrap; shots too where neither "
                  "--shot-seed nor the protocol sets theirs.", min=0, max=MAX_SEED, **role)


@dataclass(frozen=True)
class ScoringOptions:
    """The schedule's settings (n_ctx, n_batch) and the engine's (all recorded), the seed and
    the switches every backend has. ``parallel`` None: the batched engine's default, resolved
    and recorded by the engine."""

    n_ctx: int = option(DEFAULT_N_CTX, "Context window in tokens.", min=1, max=C_INT_MAX, record="always",
                        default_text=f"the registry entry's n_ctx, else {DEFAULT_N_CTX}")
    n_batch: int = option(DEFAULT_N_BATCH, "Tokens per decode call.", min=1, max=C_INT_MAX, record="always")
    engine: str = option(DEFAULT_ENGINE, f"Evaluation engine. {_EXACT}: identical numbers. {_GROUPED} (for GPUs): "
                         "several items per decode; agrees only within a measured tolerance.",
                         choices=tuple(ENGINES), record=_engine_config)
    parallel: int | None = option(None, f"{_GROUPED}: most items per decode (each group also fits in --n-ctx). "
                                  "1 = prefix's numbers.", min=1, max=MAX_PARALLEL, default_text="n_ctx/256, 1-16")
    seed: int = seed_option(flag=False)  # set from TaskOptions.seed (--seed)
    verbose: bool = option(False, "Show the backend's own log.")
    vocab_only: bool = option(False, internal=True)

    def __post_init__(self) -> None:
        option_fields.validate(self)
        if self.parallel is not None and not engine_class(self.engine).takes_parallel:
            raise UsageError(f"{opt('parallel')} applies only to {opt('engine', _GROUPED)}")

    @classmethod
    def from_values(cls, values: dict, *, backend: str, strict: bool = True):
        """Options from a mapping (CLI values, lm-eval's model_args, a recorded config), each
        value parsed and checked; with ``strict``, a value for an option this backend lacks is refused."""
        return option_fields.from_values(cls, values, owner=f"the {backend} backend", strict=strict)

    def config(self) -> dict:
        """The settings a run records in its config (compared on --resume)."""
        return option_fields.recorded(self)

    @property
    def context_window(self) -> int:
        """The context, in tokens, the backend allocates for :attr:`n_ctx` (known before a load: the plan judges
        each prompt against it, in the run's words, and the memory checks count its KV cache): n_ctx as asked (the
        fake backend's); a backend that rounds it says so in its options (llama.cpp's)."""
        return self.n_ctx
