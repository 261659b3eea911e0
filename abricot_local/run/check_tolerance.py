"""The tolerance `check` holds re-scored log-probs to, and why (docs/numerics.md#re-scoring-a-run-check).

Exact (0) where the recomputation is bit-identical: the recorded kernel path, an exact engine
(engines.Engine.exact; batched at parallel 1 is prefix's schedule), the thread count as recorded or no
decode call that depends on it. 1e-3 where the numbers may move by rounding: another kernel path, threads
that mattered, no kernel path recorded, the batched engine (its groups). The batched engine's drift where
``check --sample`` groups its items otherwise. An explicit ``--atol`` wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from abricot_local.analysis.changes import NEAR_TIE
from abricot_local.backends.engines import engine_class
from abricot_local.backends.session import EngineOptions
from abricot_local.errors import opt

ATOL = 1e-3  # nats: where the numbers may move by rounding (another kernel path, threads that mattered, batched)
# nats: the batched engine's drift when its items are grouped otherwise (check --sample regroups them):
# tests/test_batched.py's bound, over the largest measured (1.20 nats, docs/numerics.md#engines)
BATCHED_DRIFT = 1.5


@dataclass(frozen=True)
class Tolerance:
    """The rule a check holds log-probs to: ``atol``, and why (one line); ``near_ties``: a changed
    prediction is accepted where the recorded run's top two choices are under NEAR_TIE nats apart."""

    atol: float
    why: str
    near_ties: bool = False


def tolerance(given: float | None, *, kernels: tuple[str, ...], known: bool, threads: str | None,
              options: EngineOptions, regrouped: bool) -> Tolerance:
    """The log-prob tolerance of a check, and why: ``given`` (--atol) wins; else 1e-3 on another kernel path
    (``kernels``: its differences, threads that mattered included), where it is not ``known`` (the run's and
    this machine's), or for an engine that is not exact (the recorded ``options``' engine, unless it decodes
    one item at a time); the batched engine's drift when a --sample ``regrouped`` its items; else 0: the numbers are bit-identical
    (the same kernel path, an exact engine, ``threads``: the thread note, None when they are as recorded)."""
    engine, group = options.engine, engine_class(options.engine).group_size(options)  # items decoded together
    if given is not None:
        return Tolerance(given, f"{opt('atol', given)} given")
    if kernels:
        return Tolerance(ATOL, f"{ATOL:g}: not the recorded kernel path (above), so the numbers may move")
    if not known:
        return Tolerance(ATOL, f"{ATOL:g}: the kernel path is not known (recorded by the run, and here), so "
                               "bit-identity cannot be claimed")
    if not engine_class(engine).exact and group > 1:
        if regrouped:
            return Tolerance(BATCHED_DRIFT, (
                f"{BATCHED_DRIFT:g} nats, changed predictions accepted only at near ties (top two under "
                f"{NEAR_TIE:g} nats apart): the run used the {engine} engine, whose numbers depend on which items "
                f"share a decode (up to {group}), and {opt('sample')} groups them otherwise, so they move within "
                f"its drift (docs/numerics.md#engines); check without {opt('sample')} to re-score them in the "
                f"run's groups (within {ATOL:g})"), near_ties=True)
        return Tolerance(ATOL, f"{ATOL:g}: the run used the {engine} engine, whose numbers depend on which items "
                               f"share a decode (up to {group}; {opt('resume', True)} may have grouped them otherwise)")
    return Tolerance(0.0, f"0 (exact): the recorded kernel path and the {engine} engine give bit-identical numbers"
                          + ("; the thread count differs, but no decode call depends on it" if threads else "")
                          + f"; give {opt('atol')} to allow a difference")
