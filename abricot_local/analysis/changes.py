"""Which answers changed between two runs, and were they close calls.

For a pair of runs over the same items, every item whose prediction differs is classified by
how decided the reference run was: its margin between its top two choices' log-probs, in nats
(the same under any renormalisation over the choices). Below :data:`NEAR_TIE` the item is a
*near tie*: the drift that kernels, batch sizes and engines alone cause can flip it
(docs/compare.md, from docs/numerics.md's measurements); at or above it, a *decisive* change.
compare, the HTML report's explorer and `check` on another kernel path use this one rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from abricot_local.record import Sample

# nats: the largest top-two margin that kernel drift alone was seen to move (docs/compare.md)
NEAR_TIE = 0.5


@dataclass(frozen=True)
class ChangedAnswer:
    id: str
    pred_ref: int
    pred_other: int
    margin: float  # the reference's log-prob margin between its top two choices (nats)
    label_ref: str = ""  # the answers' labels when the samples name them
    label_other: str = ""

    @property
    def text(self) -> str:
        a = self.label_ref or str(self.pred_ref)
        b = self.label_other or str(self.pred_other)
        return f"{self.id} ({a} -> {b}, margin {self.margin:.2f} nats)"


@dataclass(frozen=True)
class AnswerChanges:
    """The items of one task whose prediction differs between ``reference`` and ``other``."""

    task: str
    reference: str
    other: str
    n: int  # items compared
    threshold: float  # nats: a reference margin below it is a near tie
    changed: tuple[ChangedAnswer, ...]

    @property
    def near_ties(self) -> tuple[ChangedAnswer, ...]:
        return tuple(c for c in self.changed if c.margin < self.threshold)

    @property
    def decisive(self) -> tuple[ChangedAnswer, ...]:
        return tuple(c for c in self.changed if not c.margin < self.threshold)

    @property
    def summary(self) -> str:
        """``7 answers changed: 5 near ties, 2 decisive`` (or ``no answer changed``)."""
        k = len(self.changed)
        if not k:
            return f"no answer changed (of {self.n})"
        ties, dec = len(self.near_ties), len(self.decisive)
        return (f"{k} answer{'s' if k != 1 else ''} changed: {ties} near tie{'s' if ties != 1 else ''}, "
                f"{dec} decisive")

    @property
    def line(self) -> str:
        return f"{self.other} vs {self.reference}, {self.task}: {self.summary}"


def top_two_margin(logprobs: Sequence[float]) -> float:
    """The log-prob gap between the two highest choices (nats); infinite with one choice."""
    lp = np.sort(np.asarray(logprobs, dtype=float))[::-1]
    return float(lp[0] - lp[1]) if len(lp) > 1 else math.inf


def _label(sample: Sample) -> str:
    """The predicted choice's short label (DISCOTEX's ``A``, ABRICOT's ``3``), else "" (its index is shown)."""
    conts, k = sample.continuations or (), sample.pred
    text = str(conts[k]).strip() if 0 <= k < len(conts) else ""
    return text if 0 < len(text) <= 12 else ""


def changed_answers(task: str, reference: str, other: str, ref_samples: Sequence[Sample],
                    other_samples: Sequence[Sample], threshold: float = NEAR_TIE) -> AnswerChanges:
    """The common items (same order in both) whose prediction differs, with the reference's margin;
    items whose choice counts differ are left out (compare's agreement counts them)."""
    out = []
    for r, o in zip(ref_samples, other_samples):
        if r.pred == o.pred or len(r.logprobs) != len(o.logprobs):
            continue
        out.append(ChangedAnswer(str(r.id), int(r.pred), int(o.pred), top_two_margin(r.logprobs),
                                 _label(r), _label(o)))
    return AnswerChanges(task, reference, other, len(ref_samples), threshold, tuple(out))
