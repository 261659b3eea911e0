"""Which answers changed between two runs, and were they close calls.

For a pair of runs over the same items, every item whose prediction differs is classified by
how decided the reference run was: its margin between its top two choices' log-probs, in nats
(the same under any renormalisation over the choices). Below :data:`NEAR_TIE` the item is a
*near tie*: between runs of one model, the drift that kernels, batch sizes and engines alone cause
can flip it (docs/compare.md, from docs/numerics.md's measurements); between two models it is only
a close call of the reference's. At or above it, a *decisive* change. Against the gold answer each
change is *fixed* (wrong -> right), *broken* (right -> wrong) or *still wrong* (one wrong answer
-> another). compare, the HTML report's explorer and `check` on another kernel path use this one rule. Beside
the changes, how many near ties and decisive answers the reference had on the items compared (``ref_near_ties``,
``ref_decisive``): a rung that flipped 16 of 23 near ties is not one that flipped 2 of 23 (:attr:`AnswerChanges.flips`,
the one line compare and the quant ladder give).
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

# what a pair of runs compares (`compared`): what a near tie means depends on it
ONE_MODEL, QUANTS, MODELS = "one model", "quants", "two models"
OTHER_CONTEXTS = "other contexts"  # compare --by-id: items scored under another prompt (seed, variant, shots)
NEAR_TIE_MEANS = {ONE_MODEL: "kernels alone can flip them", QUANTS: "a quant or kernels alone can flip them",
                  MODELS: "close calls for the reference",
                  OTHER_CONTEXTS: "close calls for the reference; another prompt can change any answer"}
FIXED, BROKEN, STILL_WRONG = "fixed", "broken", "still_wrong"  # wrong -> right, right -> wrong, wrong -> other wrong


def outcome(gold: int, pred_ref: int, pred_other: int) -> str:
    """A changed answer against the gold one: fixed, broken, or still wrong (another wrong answer)."""
    return FIXED if pred_other == gold else BROKEN if pred_ref == gold else STILL_WRONG


def compared(ref, other) -> str:
    """What two runs (analysis/runs.Run: the model's SHA-256 its record holds, its ``base`` and ``quant``)
    compare: one model (the same file, or no file and the same model name: settings, kernels, engines),
    quants of one base model, or two models."""
    a, b = ref.record.model.sha256, other.record.model.sha256
    if a and a == b:
        return ONE_MODEL
    same_base = bool(ref.base) and ref.base.lower() == (other.base or "").lower()
    qa, qb = (str(v.quant or "").upper() for v in (ref, other))
    if same_base and qa != qb:
        return QUANTS
    return ONE_MODEL if same_base and not (a and b) else MODELS


def near_tie_note(kinds) -> str:
    """What a near tie means for the pairs compared (``compared``'s kinds)."""
    seen = set(kinds)
    kinds = [k for k in (ONE_MODEL, QUANTS, MODELS, OTHER_CONTEXTS) if k in seen]
    if len(kinds) == 1:
        return NEAR_TIE_MEANS[kinds[0]]
    if not kinds:
        return NEAR_TIE_MEANS[ONE_MODEL]
    if OTHER_CONTEXTS in seen:
        return "close calls; another prompt can change any answer, and between runs of one model or its quants on " \
            "one prompt, kernels alone can flip them"
    return "close calls; between runs of one model or its quants, kernels alone can flip them"


@dataclass(frozen=True)
class ChangedAnswer:
    id: str
    pred_ref: int
    pred_other: int
    margin: float  # the reference's log-prob margin between its top two choices (nats)
    label_ref: str = ""  # the answers' labels when the samples name them
    label_other: str = ""
    gold: int = -1  # the gold choice's index
    outcome: str = ""  # FIXED, BROKEN or STILL_WRONG

    @property
    def text(self) -> str:
        a = self.label_ref or str(self.pred_ref)
        b = self.label_other or str(self.pred_other)
        return f"{self.id} ({a} -> {b}, {self.outcome.replace('_', ' ')}, margin {self.margin:.2f} nats)"


@dataclass(frozen=True)
class AnswerChanges:
    """The items of one task whose prediction differs between ``reference`` and ``other``."""

    task: str
    reference: str
    other: str
    n: int  # items compared
    threshold: float  # nats: a reference margin below it is a near tie
    changed: tuple[ChangedAnswer, ...]
    compared: str = MODELS  # ONE_MODEL, QUANTS or MODELS: what a near tie means
    ref_near_ties: int | None = None  # the reference's near ties on the items compared (None: not counted)
    ref_decisive: int | None = None  # and its decisive answers there: what the changes flipped, of how many

    def with_outcome(self, kind: str) -> tuple[ChangedAnswer, ...]:
        return tuple(c for c in self.changed if c.outcome == kind)

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
        fixed, broken, wrong = (len(self.with_outcome(x)) for x in (FIXED, BROKEN, STILL_WRONG))
        return (f"{k} answer{'s' if k != 1 else ''} changed: {fixed} fixed, {broken} broken, {wrong} still wrong; "
                f"{ties} near tie{'s' if ties != 1 else ''}, {dec} decisive")

    @property
    def flips(self) -> str:
        """The changes of how many the reference had of each kind: ``20 answers changed: 3 fixed, 5 broken, 12 still
        wrong; 16 of 23 near ties flipped, 4 of 7 decisive``, ``no answer changed (of 30: 23 near ties, 7
        decisive)``; :attr:`summary` where the reference's counts are not known."""
        ties, dec = self.ref_near_ties, self.ref_decisive
        if ties is None or dec is None:
            return self.summary
        plural = "" if ties == 1 else "s"
        if not self.changed:
            return f"no answer changed (of {self.n}: {ties} near tie{plural}, {dec} decisive)"
        k = len(self.changed)
        fixed, broken, wrong = (len(self.with_outcome(x)) for x in (FIXED, BROKEN, STILL_WRONG))
        return (f"{k} answer{'s' if k != 1 else ''} changed: {fixed} fixed, {broken} broken, {wrong} still wrong; "
                f"{len(self.near_ties)} of {ties} near tie{plural} flipped, {len(self.decisive)} of {dec} decisive")

    @property
    def line(self) -> str:
        return f"{self.other} vs {self.reference} ({self.compared}), {self.task}: {self.flips}"


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
                    other_samples: Sequence[Sample], threshold: float = NEAR_TIE, *,
                    what: str = MODELS) -> AnswerChanges:
    """The common items (same order in both) whose prediction differs, with the reference's margin
    and the change against the gold answer; items whose choice counts differ are left out
    (compare's agreement counts them), from the changes and from the reference's near ties and decisive answers
    counted beside them. ``what``: :func:`compared`'s kind of the pair."""
    out, ties, decisive = [], 0, 0
    for r, o in zip(ref_samples, other_samples):
        if len(r.logprobs) != len(o.logprobs):
            continue
        margin = top_two_margin(r.logprobs)
        ties, decisive = (ties + 1, decisive) if margin < threshold else (ties, decisive + 1)
        if r.pred == o.pred:
            continue
        out.append(ChangedAnswer(str(r.id), int(r.pred), int(o.pred), margin,
                                 _label(r), _label(o), int(r.gold), outcome(int(r.gold), int(r.pred), int(o.pred))))
    return AnswerChanges(task, reference, other, len(ref_samples), threshold, tuple(out), what, ties, decisive)
