"""A model's facts as its cost needs them, in one place: what its file says, else what its registry entry or name
gives, the band a speed scaled by such facts states, and its memory before its file is here.

**Facts** (:class:`ModelFacts`: what scales a speed from one model to another): read from a GGUF header
(:func:`gguf_facts`: its own file's, or another quant's of the same model that is here, this entry's size kept),
else estimated from a parameter count (:func:`estimated_facts`: the registry entry's, else the one its name gives;
the vocabulary its tokenizer family's, chars_per_token.MEASURED). :func:`facts_of` is the one question a model not
here is asked (machine_cost.py: the dry run's, `kld --dry-run`'s).

**The band** (:func:`widened`): a parameter count does not give the width, and a narrow model runs its FLOPs
slower, so a speed scaled by estimated facts (calibration.speed_for) states the band every width
:data:`ESTIMATED_WIDTH` allows (bench/estimated_facts.py measures it).

**Memory before the file is here** (:func:`estimated_memory`): the registry entry's size and a KV cache from its
parameter count (memory.kv_estimate), against this machine's RAM.

Names no task and no backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, TypeVar

from abricot_local import memory
from abricot_local.memory import Fit
from abricot_local.models.spec import ModelSpec, parse_params
from abricot_local.run.chars_per_token import MEASURED


@dataclass(frozen=True)
class ModelFacts:
    """What scales a speed from one model to another."""

    params: float  # parameters each decoded token goes through (no embedding lookup, no output head)
    attention: float  # layers x heads x head size: per earlier token, 4 FLOPs each
    width: float  # embedding length: with the vocabulary, an output row's cost
    n_vocab: int
    bytes: int  # the file(s): read to load
    basis: str  # where they come from: "its GGUF header", "its registry entry (7B, 4.37 GB)", ...
    total_params: float = 0.0  # every parameter, as a model card counts them

    def flops(self, position: float) -> float:
        return 2 * self.params + 4 * self.attention * position

    @property
    def row_flops(self) -> float:
        """An output row's: the output head (width x vocabulary, 2 FLOPs each; 0 where either is not known)."""
        return 2.0 * self.width * self.n_vocab

    @property
    def from_header(self) -> bool:
        """Its shape read from a GGUF header (its own file's, or another quant's of the same model): width known."""
        return HEADER in self.basis


HEADER = "GGUF header"  # in the basis of facts read from a file on disk; any other basis: estimated
HEADER_BASIS = f"its {HEADER}"


def facts_of(spec: ModelSpec | None, name: str = "", sibling: tuple[ModelSpec, Path] | None = None) \
        -> ModelFacts | None:
    """The facts of a model whose file is not here: ``sibling`` ((entry, path): another quant of ``spec`` that is
    here), its header with ``spec``'s own size; else the parameter count of its registry entry ``spec`` (its size,
    its tokenizer family's vocabulary), else of its ``name`` (:func:`estimated_facts`); None when none gives any."""
    if sibling is not None:
        other, path = sibling
        head = gguf_facts(path)
        basis = f"the {HEADER} of {other.name}, another quant of {spec.base} that is here"
        return None if head is None else replace(head, bytes=spec.approx_bytes or head.bytes, basis=basis)
    params = parse_params(spec.params if spec else name)
    if params is None:
        return None
    size = f"{spec.approx_bytes / 1e9:.2f} GB" if spec and spec.approx_bytes else "size unknown"
    basis = f"its registry entry ({spec.params}, {size})" if spec else f"the parameters its name gives ({name})"
    family = spec.tokenizer if spec else ""
    n_vocab = MEASURED[family][0] if family in MEASURED else None  # its tokenizer family's, where measured
    return estimated_facts(params, spec.approx_bytes if spec else None, n_vocab, basis)


def gguf_facts(path: Path) -> ModelFacts | None:
    """The facts of a GGUF on this machine, from its header (nothing else is read); None when
    the header gives none."""
    from abricot_local.gguf.file import headers

    infos = headers(Path(path))
    if not infos:
        return None
    meta = infos[0].metadata
    arch = str(meta.get("general.architecture") or "llama")
    sizes = {t.name: math.prod(t.shape) for info in infos for t in info.tensors}
    total = sum(sizes.values())
    embd = sizes.get("token_embd.weight", 0)
    width, layers = _num(meta.get(f"{arch}.embedding_length")), _num(meta.get(f"{arch}.block_count"))
    per_layer = meta.get(f"{arch}.attention.head_count")
    heads = sum(per_layer) if isinstance(per_layer, (list, tuple)) else _num(per_layer) * layers
    head_size = _num(meta.get(f"{arch}.attention.key_length")) or (width * layers / heads if heads else 0.0)
    return ModelFacts(params=total - embd - sizes.get("output.weight", 0), attention=heads * head_size, width=width,
                      n_vocab=int(embd // width) if width else 0, bytes=sum(i.file_size for i in infos),
                      basis=HEADER_BASIS, total_params=total)


def _num(value) -> float:
    """A header number (a per-layer array: its first value)."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else 0
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


TYPICAL_VOCAB = 50257  # the median vocabulary of the tokenizers chars_per_token.py measured (32000 to 262144)


# A parameter count does not give the width: the real width / the fit's (below) of Gemma 3 270M 0.58,
# Qwen2.5-0.5B 0.63, Gemma 3 1B 0.61, SmolLM2-135M 0.68, Qwen2.5-7B 0.84, Llama 3.1 8B 0.95, Phi-3 mini
# 0.96, Llama 3.2 1B 1.00: a prediction from estimated facts covers the widths in this range.
ESTIMATED_WIDTH = (0.55, 1.05)


def estimated_facts(params: float, size: int | None, n_vocab: int | None, basis: str, *,
                    width: float | None = None) -> ModelFacts:
    """Facts of a model known only by its parameter count (and file size, vocabulary): width
    from a fit over the shapes of Llama 3.2 1B and 3B, Mistral 7B and Llama 3.1 8B (2048 at
    1.24B, about 4100 at 7B; no less than 576), attention as a transformer's 12 x layers x
    width^2 parameters give it; the embedding lookup taken off (with :data:`TYPICAL_VOCAB`
    when the vocabulary is not known)."""
    width = width or max(576.0, 2048 * (params / 1.24e9) ** 0.4)
    body = params - (n_vocab or TYPICAL_VOCAB) * width
    return ModelFacts(params=max(body, params / 2), attention=params / (12 * width), width=width,
                      n_vocab=n_vocab or 0, bytes=size or int(params * 0.6), basis=basis, total_params=params)


SpeedT = TypeVar("SpeedT")  # a speed (cost.Speed: prompt_rate(), error, how; not imported, cost.py imports this module)


def widened(speed_of: Callable[[ModelFacts], SpeedT], facts: ModelFacts) -> SpeedT:
    """``speed_of(facts)`` (a scaled cost.Speed); for facts estimated from a parameter count (not a GGUF
    header), its error bar widened to what such facts can promise: the scaled error times the
    spread of the prompt rate over the widths :data:`ESTIMATED_WIDTH` allows (bench/README.md), each side on its
    own (a narrower model is much slower, a wider one barely faster: ``error`` above, ``error_below`` below)."""
    speed = speed_of(facts)
    if facts.from_header or not facts.width or not speed.error:
        return speed
    rate = speed.prompt_rate()
    times = [rate / speed_of(estimated_facts(facts.total_params or facts.params, facts.bytes, facts.n_vocab or None,
                                             facts.basis, width=max(1.0, facts.width * f))).prompt_rate()
             for f in ESTIMATED_WIDTH]  # the time at each width the count allows, over the time predicted
    error = (1 + speed.error) * max(1.0, *times) - 1
    below = 1 - (1 - min(speed.error, 1.0)) * min(1.0, *times)  # a narrower model is slower: the bar is lopsided
    return replace(speed, error=error, error_below=below,
                   how=f"{speed.how}; the width is not known until its file is here (a parameter count allows "
                       f"{ESTIMATED_WIDTH[0]:g}x to {ESTIMATED_WIDTH[1]:g}x the estimated {facts.width:.0f})")


def estimated_memory(spec: ModelSpec | None, window: int) -> tuple[Fit | None, str]:
    """A model's memory before its file is here, from its registry entry ``spec``: its size and a KV cache of
    ``window`` tokens (the context its backend allocates) estimated from its parameter count, else from the size
    (memory.kv_estimate), against RAM; and what the estimate is made from (None, "": no size to go by)."""
    size = spec.approx_bytes if spec else None
    if not size:
        return None, ""
    basis = (f"its KV cache estimated from its {spec.params} parameters (within 2x)" if spec.param_count
             else "its KV cache estimated from the file size")
    return memory.fit(size, memory.kv_estimate(spec.param_count, size, window)), basis
