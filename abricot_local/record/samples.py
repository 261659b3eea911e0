"""One line of ``samples-<task>.jsonl`` (and of a checkpoint) as a validated view.

The fields every task writes (``Task.sample``) are typed; a task's own fields (DISCOTEX
``class``, ABRICOT ``human_mean``...) stay in ``extra``. A line that is not an object,
lacks ``id``, ``logprobs``, ``gold`` or ``pred``, or holds a log-prob that is not a
number is an error naming the file and the line. Log-probs may be NaN or infinite here:
whoever computes over them refuses those (metrics.require_finite).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from abricot_local.errors import ResultsError
from abricot_local.jsonfiles import read_jsonl_lines
from abricot_local.record.codec import Invalid, Section, spec


@dataclass(frozen=True, kw_only=True)
class Sample(Section):
    """One scored item (a line of `samples-<task>.jsonl`). Other keys: the task's own fields (below)."""

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

    @cached_property
    def line(self) -> dict[str, Any]:
        """The line as written (read-only by convention; what task metrics and writers take)."""
        return self.to_dict()

    def get(self, key: str, default=None):
        """Any field of the line, a task's own included."""
        return self.line.get(key, default)


def parse_samples(rows, where: str) -> list[Sample]:
    """Validated samples from (line number, value) pairs of ``where``."""
    out = []
    for number, value in rows:
        try:
            out.append(Sample.from_dict(value))
        except Invalid as err:
            raise ResultsError(f"{where} line {number} is malformed: {err}") from None
    return out


def read_samples(path: Path, *, repair: bool = False, required: bool = True) -> list[Sample]:
    """Every sample of a samples file or checkpoint, in file order. ``required``: a missing
    file is an error (a finished run's file); else it holds nothing yet (a checkpoint)."""
    path = Path(path)
    if required and not path.is_file():
        raise ResultsError(f"{path} is missing (results.json names it)")
    return parse_samples(read_jsonl_lines(path, repair=repair), str(path))
