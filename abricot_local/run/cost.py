"""What a run costs before it runs: the work its engine will do, and the seconds the work takes at a speed (the
model facts that scale a speed from one model to another are model_facts.py's).

**Work** (:class:`Work`): tokens decoded, decode calls, output rows (each a log-softmax over
the vocabulary) and the sum of the decoded tokens' positions (attention grows with them).
It is counted by running the run's own engine, in the runner's order and chunks
(``runner.score_items``), over a session that decodes nothing (:func:`count_work`): shared
prefixes are counted as that engine keeps them, the batched engine's groups as it makes
them. The schedules come from the model's own tokenizer when its file is here (exact), else
from :func:`text_tokenizer`, which cuts the text every ``chars_per_token`` characters
(chars_per_token.py: measured per tokenizer family): an estimate, labelled as one.

**Time** (:meth:`Speed.seconds`): ``tokens x per_token + positions x per_position + calls x
per_call + rows x per_row`` (plus the load). A :class:`Speed` comes from a calibration of
this model on this machine, or is scaled from another model's (calibration.py) by
model_facts.ModelFacts: per token by the parameters each token goes through (2 FLOPs each;
the embedding lookup and the output head excluded) and attention's width times the
position (4 FLOPs per head dimension, layer and earlier token); per row by width x
vocabulary (the output head, then the log-softmax); the load by the file's size; per call
as measured (the overhead of a call: graph, threads).

FLOPs alone overshoot: a narrow model runs its FLOPs slower than a wide one (small matrices,
the memory-bound work of norms and attention), so a 270M model's FLOP rate applied to a 7B
predicted 1.9x the time bench/scale.py measured. The rate is therefore also scaled by
:data:`WIDTH_EFFICIENCY`, the FLOP rate against the embedding width that bench/scale.py
measured (the one source of the figures; ``tests/test_dry_run.py`` holds the scaled
predictions to its measured times within :data:`SCALED_ERROR`). A scaled speed carries that
error bar and says how it was made (``Speed.how``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from abricot_local.run.model_facts import ModelFacts
from abricot_local.tasks.base import Item


# -- work ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Work:
    """What an engine does to score some items."""

    items: int
    tokens: int = 0
    calls: int = 0
    rows: int = 0
    positions: int = 0  # sum over decoded tokens of their position
    exact: bool = True  # counted with the model's own tokenizer (else estimated from the text)
    basis: str = ""  # how the tokens were counted, in words


def count_work(items: Sequence[Item], schedule: Callable, options, *, exact: bool, basis: str,
               progress: Callable[[int], None] | None = None) -> Work:
    """The work of scoring ``items`` with ``options`` (engine, n_batch, n_ctx, parallel), each
    request's schedule given by ``schedule(request)``; a prompt over n_ctx raises as in a run.
    ``progress(items counted)`` is called after each batch. The items go through the run's own loop
    (execute.score_items) into a backend that counts (backends/counting.py): the same order and chunks."""
    from abricot_local.backends.counting import Counting
    from abricot_local.run.execute import score_items

    counter = Counting(schedule, options, progress)
    for _ in score_items(items, counter):
        pass
    c = counter.counters
    return Work(len(items), c.tokens, c.decode_calls, counter.rows, counter.positions, exact, basis)


def text_tokenizer(chars_per_token: float) -> Callable[[str], list[int]]:
    """A stand-in tokenizer: BOS, then the text cut every ``chars_per_token`` characters from
    its start. Cuts depend on the position alone, so a text and any text it begins share
    their tokens up to the last whole piece, as the schedule needs."""
    step = max(float(chars_per_token), 1.0)

    def tokenize(text: str) -> list[int]:
        a = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        if not len(a):
            return [0]
        starts = np.unique(np.floor(np.arange(math.ceil(len(a) / step)) * step).astype(np.int64))
        total = np.add.reduceat(a, starts)
        weighted = np.add.reduceat(a * np.arange(len(a)), starts) - total * starts  # order within the piece
        lengths = np.diff(np.append(starts, len(a)))
        return [0, *((total * 1_000_003 + weighted * 7 + lengths) % 2_147_483_647 + 1).tolist()]

    return tokenize


# -- speed and time ------------------------------------------------------------------------
CALIBRATED, SCALED = "calibrated", "scaled"

# The FLOP rate of a prompt against the model's embedding width, relative to a 4096-wide model:
# prompt tokens/s x FLOPs per token (2 x body parameters + attention at the mean position) of the
# rows of bench/README.md's scale table (bench/scale.py --sample 12 --threads 2, portable build,
# 2 cores of an AMD EPYC, 2026-12-01): SmolLM2-135M (576 wide) 67, Gemma 3 270M (640) 106,
# Llama-3.2-1B shape (2048) 209, 3B shape (3072) 210, Mistral-7B shape (4096) 214 GFLOP/s.
# Between two widths: interpolated in log(width); beyond them: the end values.
WIDTH_EFFICIENCY = ((576, 0.31), (640, 0.497), (2048, 0.979), (3072, 0.984), (4096, 1.0))
SCALED_ERROR = 0.25  # a scaled prediction's error bar: bench/scale.py's 1B-7B shapes fall within it from Gemma's
WIDTH_SOURCE = "the FLOP rate by width bench/scale.py measured on a 2-core AMD EPYC"


def width_efficiency(width: float) -> float:
    """:data:`WIDTH_EFFICIENCY` at ``width`` (log-linear between the measured widths)."""
    points = WIDTH_EFFICIENCY
    if width <= points[0][0]:
        return points[0][1]
    for (w0, e0), (w1, e1) in zip(points, points[1:]):
        if width <= w1:
            f = math.log(width / w0) / math.log(w1 / w0)
            return e0 + f * (e1 - e0)
    return points[-1][1]


@dataclass(frozen=True)
class Speed:
    """Seconds per unit of work for one model with one set of settings on this machine."""

    per_token: float
    per_position: float
    per_call: float
    per_row: float
    load: float
    source: str  # CALIBRATED (this model) or SCALED (from ``reference``)
    reference: str  # the calibrated model's label
    measured: str  # when that calibration ran (UTC)
    error: float = 0.0  # relative error bar of a prediction at this speed (SCALED_ERROR when scaled), above
    how: str = ""  # how a scaled speed was made, in words
    error_below: float | None = None  # the bar below, where it is not ``error`` (widened: a narrower model is slower)

    @property
    def calibrated(self) -> bool:
        """Measured on this machine for this model (:data:`CALIBRATED`), not scaled from another's."""
        return self.source == CALIBRATED

    @property
    def below(self) -> float:
        """The error bar below the prediction (the time at least t (1 - below))."""
        return self.error if self.error_below is None else self.error_below

    def seconds(self, work: Work) -> float:
        """Scoring time of ``work`` (the load not included)."""
        return (work.tokens * self.per_token + work.positions * self.per_position + work.calls * self.per_call
                + work.rows * self.per_row)

    def prompt_rate(self, tokens: int = 512) -> float:
        """Tokens per second of a ``tokens``-token prompt from position 0, in one call."""
        return tokens / self.seconds(Work(1, tokens, 1, 1, tokens * (tokens - 1) // 2))

    def to_json(self) -> dict:
        """The speed as the dry runs' ``--json`` prints it (`run --dry-run`, `kld --dry-run`)."""
        return {"source": self.source, "reference": self.reference, "calibrated_at": self.measured,
                "prompt_tokens_per_s": self.prompt_rate(), "load_s": self.load, "per_token_s": self.per_token,
                "per_position_s": self.per_position, "per_call_s": self.per_call, "per_row_s": self.per_row,
                "error": self.error, "error_below": self.below, "how": self.how or None}


@dataclass(frozen=True)
class Measured:
    """A calibration's measurements (calibration.py): seconds per token of a prompt of
    ``prompt_tokens`` tokens from position 0, per decode call, per output row, and to load."""

    token_s: float
    prompt_tokens: int
    call_s: float
    row_s: float
    load_s: float


def speed_from(measured: Measured, ref: ModelFacts | None, target: ModelFacts | None, *, same: bool,
               reference: str, when: str) -> Speed:
    """The speed of ``target`` from a calibration ``measured`` on a model with facts ``ref``:
    the FLOP rate the calibration's prompt ran at, times the target's width efficiency over the
    reference's (:func:`width_efficiency`), applied to the target's work per token; calls, rows
    and the load scaled as the module's text says. ``same``: the calibrated model."""
    if ref is None or target is None:  # no facts (a synthetic model): as measured
        return Speed(measured.token_s, 0.0, measured.call_s, measured.row_s, measured.load_s,
                     CALIBRATED if same else SCALED, reference, when, 0.0 if same else SCALED_ERROR,
                     "" if same else "as measured (no facts to scale by)")
    efficiency = 1.0 if same or not (ref.width and target.width) else \
        width_efficiency(target.width) / width_efficiency(ref.width)
    rate = ref.flops((measured.prompt_tokens - 1) / 2) / measured.token_s * efficiency  # FLOP/s
    head = (target.width * target.n_vocab) / (ref.width * ref.n_vocab) if ref.width * ref.n_vocab and \
        target.width * target.n_vocab else 1.0
    size = target.bytes / ref.bytes if ref.bytes else 1.0
    how = "" if same else (f"FLOPs per token x {target.flops(0) / ref.flops(0):.3g}, FLOP rate x {efficiency:.2f} for its "
                           f"width {target.width:.0f} ({WIDTH_SOURCE}), output rows x {head:.2g}")
    return Speed(2 * target.params / rate, 4 * target.attention / rate, measured.call_s, measured.row_s * head,
                 measured.load_s * size, CALIBRATED if same else SCALED, reference, when,
                 0.0 if same else SCALED_ERROR, how)


def paired(work: Work) -> Work:
    """``work`` as each model of a `kld` pass does it (backends.kld.LadderSession): the same decode calls,
    a row at every token decoded, not only at the tokens scored."""
    return replace(work, rows=work.tokens)


def counting_progress(name: str, total: int, notify) -> Callable[[int], None] | None:
    """A progress line while a large task's work is counted (``notify``): the first after
    ``ABRICOT_PROGRESS_SECONDS`` (default 5) seconds, then at that interval."""
    import os
    import time

    if notify is None:
        return None
    every = float(os.environ.get("ABRICOT_PROGRESS_SECONDS", "5"))
    last = [time.monotonic()]

    def counted(done: int) -> None:
        if time.monotonic() - last[0] >= every and done < total:
            last[0] = time.monotonic()
            notify(f"plan: counting {name}'s tokens, {done:,} of {total:,} items ...")

    return counted
