"""ABRICOT (CALAMITA 2024): abstractness and inclusiveness of a word in context, 1-5.

Prompts are byte-exact to the published text (variant ``paper``, with its typos, and
``calamita``), the sentence put in as the release has it. Each published source declares
its protocol (``PAPER_PROTOCOL``, ``CALAMITA_PROTOCOL``: docs/protocols.md, "The two
protocols"); the paper's is the default. Shots (sampler ``lm-eval``, lm-eval's default
``--num_fewshot K``): for every item of the release, in file order, ``Random(seed).sample`` of
K+1 rows, the item itself dropped, the first K kept (tasks/fewshot.py), ``seed`` the shot seed (``--shot-seed``,
else the protocol's: the paper's 1234, else ``--seed``): drawn for all items,
then selected, so an item's shots never depend on --sample, --limit, --shard, order or resume.
Sampler ``shared`` (no published source's): one draw of K shots for every item (an item that
is itself a shot gets the next drawn row in its place), so every item shares its shots.
A shot is its prompt, " ", its gold digit; shots are joined by a blank line and separated
from the item's prompt by one. Each item is scored on " 1" .. " 5".
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Sequence

import numpy as np

from abricot_local.core import exact_exp, exact_log_softmax
from abricot_local.errors import TaskError, opt
from abricot_local.metrics import with_ci_of
from abricot_local.record.samples import Sample
from abricot_local.tasks.abricot_data import RELEASE_FILE, RELEASE_SHA256, SUFFIXES, Row, load_rows, pull
from abricot_local.tasks.base import (CONTRACT, DataSpec, Figure, Item, MetricInput, Protocol, Reference, Task,
                                      text_hash)
from abricot_local.tasks.fewshot import LM_EVAL_SEED, lm_eval_draws

_LIST_ABS = (
    "1 - La parola è estremamente concreta (e.g. un cane specifico)\n"
    "2 - La parola è lievemente concreta (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La prola è lievemente astratta (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente astratta (e.g. il cane è un mammifero)\n"
)
_LIST_INC = (
    "1 - La parola è estremamente specifica (e.g. un cane specifico)\n"
    "2 - La prola è lievemente specifica (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La parola è lievemente inclusiva (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente inclusiva (e.g. il cane è un mammifero)\n"
)
_HEAD = "Assegna un valore di {what} da 1 a 5 alla parola {{parola}} nel contesto della frase seguente:\n{{frase}}\nDescrizione dei valori:\n"
_CALAMITA_TAIL = "\nRispondi esclusivamente con il numero scelto senza aggiungere nessuna spiegazione\n"

PROMPTS = {
    ("abs", "paper"): _HEAD.format(what="astrazione") + _LIST_ABS,
    ("inc", "paper"): _HEAD.format(what="inclusività") + _LIST_INC,
    ("abs", "calamita"): _HEAD.format(what="astrazione") + _LIST_ABS.replace("prola", "parola") + _CALAMITA_TAIL,
    ("inc", "calamita"): _HEAD.format(what="inclusività") + _LIST_INC.replace("prola", "parola") + _CALAMITA_TAIL,
}
CHOICES = ("1", "2", "3", "4", "5")
SHOT_SEPARATOR = "\n\n"
DEFAULT_SHOTS = 3

SAMPLERS = ("lm-eval", "shared")

# How each published source ran the task (docs/protocols.md, "The two protocols").
PAPER, CALAMITA = "paper 3-shot", "CALAMITA leaderboard"
PAPER_PROTOCOL = Protocol(
    "paper", PAPER,
    (("prompt_variant", "paper"), ("shots", 3), ("shot_sampler", "lm-eval"), ("shot_seed", LM_EVAL_SEED),
     ("chat_template", False)),
    precision="",
    facts="the authors' lm-eval v0.4.4 fork (gpucce/lm-evaluation-harness@4d8bb2d6, branch add_abricot), "
          "--num_fewshot 3, lm-eval's default sampler and fewshot_random_seed")
CALAMITA_PROTOCOL = Protocol(
    "calamita", CALAMITA,
    (("prompt_variant", "calamita"), ("shots", 0), ("chat_template", False)),
    precision="bf16 (vLLM)",
    facts="CALAMITA-AILC/calamita-eval@4471a17, tasks/abricot/ and its run script (lm_eval --model vllm, "
          "dtype bfloat16, no --num_fewshot, no --apply_chat_template)")

# Published Pearson r (choice 1-5 against the discretised human mean: this task's ``pearson``), from
# the ABRICOT paper (CALAMITA 2024, 3-shot) and the CALAMITA leaderboard: (model, abs, inc) per source.
PUBLISHED = {
    (PAPER_PROTOCOL, ("abricot paper", "paper")): (
        ("mistral-7b", 0.22, 0.00), ("llama-3.1-8b", 0.30, 0.30), ("llama-3.1-70b", 0.53, 0.41)),
    (CALAMITA_PROTOCOL, ("calamita",)): (
        ("Minerva-7B-instruct-v1.0", -0.03, -0.20), ("LLaMAntino-3-ANITA-8B-Inst-DPO-ITA", 0.50, 0.14),
        ("Llama-3.1-8B-Instruct", 0.29, 0.18), ("Llama-3.1-70B-Instruct", 0.44, 0.25)),
}


def discretise(mean: float) -> int:
    """The official harness's gold index: round(5 * mean) half to even, 5 clamped to 4."""
    return min(round(5 * mean), 4)


def render(kind: str, variant: str, row: Row) -> str:
    return PROMPTS[(kind, variant)].format(parola=row.target, frase=row.text)


# A process reads a release file once while it is unchanged, and makes each task's items of it once per settings:
# the 16 used last of each, kept as tuples of frozen rows and items (shared: read them, never change them).
_LOADED: dict[tuple, tuple[tuple[Row, ...], int]] = {}  # a file's identity -> its rows, its rows with bad spans
_MADE: dict[tuple, tuple[Item, ...]] = {}  # (class, the file's identity, settings) -> the items
_KEPT = 16


def _identity(path) -> tuple | None:
    """A data file as it is now: its path (named in errors; its suffix picks the format), device, inode, size,
    modification and change times (a file rewritten is another); None when it cannot be read (load_rows says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _last_used(memo: dict, key, value=None):
    """``memo[key]`` (None when absent) moved to the end; with ``value``, stored there, the oldest use dropped."""
    if value is None:
        value = memo.pop(key, None)
    else:
        while len(memo) >= _KEPT:
            memo.pop(next(iter(memo)))
    if value is not None:
        memo[key] = value
    return value


def _loaded(path) -> tuple[tuple[Row, ...], int, tuple | None]:
    """:func:`load_rows` of ``path``, once while the file is unchanged; and its identity (None: not kept)."""
    key = _identity(path)
    kept = _last_used(_LOADED, key) if key is not None else None
    if kept is None:
        rows, bad_spans = load_rows(path)
        kept = (tuple(rows), bad_spans)
        if key is None or _identity(path) != key:  # rewritten while it was read: not kept
            return (*kept, None)
        _last_used(_LOADED, key, kept)
    return (*kept, key)


class AbricotTask(Task):
    """One of the two ABRICOT tasks; ``kind`` is "abs" or "inc"."""

    version = "2"  # 2: the text as published (not stripped), protocols, lm-eval's per-item shots
    contract = CONTRACT
    group = "abricot"
    protocols = (PAPER_PROTOCOL, CALAMITA_PROTOCOL)
    metric_names = ("pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy")
    primary_metric = "pearson"
    chance = {"pearson": 0.0, "pearson_continuous": 0.0, "pearson_expected": 0.0, "spearman": 0.0, "accuracy": 0.2}
    # a correlation's margin: about the closest two published models of one source (docs/compare.md)
    margins = {"pearson": 0.05, "pearson_continuous": 0.05, "pearson_expected": 0.05, "spearman": 0.05}
    figures = (Figure("scatter", x="human_mean", metric="pearson_continuous",
                      x_label="human mean (0 = concrete/specific, 1 = abstract/inclusive)"),)
    sample_fields = {"human_mean": float, "expected_score": float}  # the metrics' human side, the expected rating
    data = DataSpec(
        key="abricot", kind="file", files=(RELEASE_FILE, *(f"abricot*{s}" for s in SUFFIXES)), pull=pull,
        how=f"{opt('data', ('abricot', 'FILE'))} ({RELEASE_FILE}, the ABRICOT release)",
        description="ABRICOT release (ids, target word, sentence, human abstractness/inclusiveness means)",
        release=(RELEASE_SHA256,),  # both sources' rows were made on it (docs/protocols.md)
    )
    kind = "abs"
    uses = ("shots", "prompt_variant", "protocol", "shot_sampler", "shot_seed")
    default_shots = DEFAULT_SHOTS  # (each protocol fixes its own)
    prompt_variants = ("paper", "calamita")
    choices = {"shot_sampler": SAMPLERS}

    def __init__(self, options):
        super().__init__(options)
        self.variant = self.resolved_variant()
        if self.variant not in self.prompt_variants:
            raise TaskError(f"{self.name} has no prompt variant {self.variant!r}; use paper or calamita")
        self.shots = self.setting("shots", options.shots, DEFAULT_SHOTS)
        if self.shots < 0:
            raise TaskError(f"{opt('shots')} must be 0 or more")
        self.sampler = self.setting("shot_sampler", options.shot_sampler, "lm-eval")
        if self.sampler not in SAMPLERS:
            raise TaskError(f"unknown shot sampler {self.sampler!r}; use {' or '.join(SAMPLERS)}")
        self.shot_seed = self.setting("shot_seed", options.shot_seed, options.seed)  # the draws' seed alone
        self._warnings: list[str] = []
        self._rows: list[Row] | None = None
        self._file: tuple | None = None  # the data file's identity as its rows were read (None: not kept)

    def settings(self) -> dict:
        return {"prompt_variant": self.variant, "shots": self.shots, "shot_sampler": self.sampler,
                "shot_seed": self.shot_seed, "seed": self.options.seed, "chat_template": self.options.chat_template}

    def _load(self) -> list[Row]:
        if self._rows is None:
            path = self.data_path()
            rows, bad_spans, self._file = _loaded(path)
            self._rows = list(rows)
            if bad_spans:
                self._warnings.append(
                    f"{bad_spans} row(s) of {path.name}: begin/end do not point at the target token in the text"
                )
            if self.shots and self.shots >= len(self._rows):
                raise TaskError(f"{opt('shots', self.shots)} needs more than {self.shots} items; the data has {len(self._rows)}")
        return self._rows

    def warnings(self) -> list[str]:
        return list(self._warnings)

    def references(self) -> tuple[Reference, ...]:
        column = 1 if self.kind == "abs" else 2
        return tuple(
            Reference(protocol.source, row[0], self.name, "pearson", row[column], protocol, aliases,
                      key=self.name if protocol == self.protocols[0] else f"{self.name}@{protocol.name}")
            for (protocol, aliases), rows in PUBLISHED.items() for row in rows
        )

    def _shot_draw(self) -> tuple[list[Row], Row | None]:
        """Sampler ``shared``: the shots every item shares and the spare that replaces a shot in
        its own item (the same draw for both tasks)."""
        rows = self._load()
        if not self.shots or self.sampler != "shared":
            return [], None
        order = list(np.random.default_rng(self.shot_seed).permutation(len(rows)))
        return [rows[k] for k in order[: self.shots]], rows[order[self.shots]]

    def _shots_of(self, rows: list[Row]) -> list[list[Row]]:
        """Each row's shots, for every row of the release in its order (then selected)."""
        if self.sampler == "shared":
            shots, spare = self._shot_draw()
            return [[spare if s.id == row.id else s for s in shots] for row in rows]
        draws = lm_eval_draws(len(rows), len(rows), self.shots, seed=self.shot_seed, same_split=True)
        return [[rows[j] for j in draw] for draw in draws]

    def mean(self, row: Row) -> float:
        return row.abs_mean if self.kind == "abs" else row.inc_mean

    def std(self, row: Row) -> float | None:
        return row.abs_std if self.kind == "abs" else row.inc_std

    def shot_text(self, row: Row) -> str:
        return render(self.kind, self.variant, row) + " " + CHOICES[discretise(self.mean(row))]

    def items(self) -> list[Item]:
        rows = self._load()
        key = (type(self), self._file, self.kind, self.variant, self.shots, self.sampler, self.shot_seed)
        made = _last_used(_MADE, key) if self._file is not None else None
        if made is None:
            made = tuple(self._made(rows))
            if self._file is not None:
                _last_used(_MADE, key, made)
        return list(made)

    def _made(self, rows: list[Row]) -> list[Item]:
        variant = self.variant
        items = []
        for row, own in zip(rows, self._shots_of(rows)):
            shots = SHOT_SEPARATOR.join(self.shot_text(s) for s in own) + SHOT_SEPARATOR if own else ""
            items.append(
                Item(
                    id=row.id,
                    source=row.domain,
                    context=shots + render(self.kind, variant, row),
                    choices=CHOICES,
                    continuations=tuple(" " + c for c in CHOICES),
                    gold=discretise(self.mean(row)),
                    fields={
                        "target": row.target,
                        "human_mean": self.mean(row),
                        "human_std": self.std(row),
                        "shot_ids": [s.id for s in own],
                    },
                )
            )
        return items

    def sample(self, item, scored) -> Sample:
        rec = super().sample(item, scored)
        # the five labels' distribution, renormalised; exact, so the field is the same on every CPU
        p = [exact_exp(lp) for lp in exact_log_softmax(scored.logprobs)]
        return replace(rec, extra={**rec.extra, "expected_score": math.fsum(q * k for k, q in enumerate(p, 1))})

    def config(self) -> dict:
        """The settings resolved (the protocol's, or given), the protocol and where they differ
        from it; with sampler ``shared``, the shots every item shares (else: each sample's)."""
        return {
            **self.settings(),
            "protocol": self.protocol.name,
            "protocol_differences": list(self.protocol.differences(self.settings())),
            "shot_ids": [r.id for r in self._shot_draw()[0]],
            "gold": "round(5*mean) half-to-even, 5 -> 4",
        }

    def prompt_hash(self) -> str:
        return text_hash(PROMPTS[(self.kind, self.variant)], SHOT_SEPARATOR, *CHOICES)

    def metric_inputs(self, samples: Sequence[Sample]) -> tuple[MetricInput, ...]:
        pred = np.array([s.pred + 1 for s in samples], dtype=float)
        gold = np.array([s.gold + 1 for s in samples], dtype=float)
        human = np.array([s.fields["human_mean"] for s in samples], dtype=float)
        expected = np.array([s.fields["expected_score"] for s in samples], dtype=float)
        return (
            MetricInput("pearson", "pearson", pred, gold),
            MetricInput("pearson_continuous", "pearson", pred, human),
            MetricInput("pearson_expected", "pearson", expected, human),
            MetricInput("spearman", "spearman", pred, human),
            MetricInput("accuracy", "accuracy", pred, gold),
        )

    def metrics(self, samples: Sequence[Sample]) -> dict:
        out: dict = {}
        for inp in self.metric_inputs(samples):
            out.update(with_ci_of(inp, seed=self.options.seed))
        return out


class AbricotAbsTask(AbricotTask):
    name = "abricot_abs"
    kind = "abs"
    chars_per_token = {"gemma3": 3.364, "gpt-2": 2.457, "llama-bpe": 3.073, "llama-spm": 2.675, "phi-3": 2.675,
                       "qwen2": 3.073, "smollm": 2.519}
    description = "ABRICOT (CALAMITA 2024): how abstract a word is in its sentence, 1 (concrete) to 5 (abstract)"


class AbricotIncTask(AbricotTask):
    name = "abricot_inc"
    kind = "inc"
    chars_per_token = {"gemma3": 3.397, "gpt-2": 2.482, "llama-bpe": 3.143, "llama-spm": 2.746, "phi-3": 2.746,
                       "qwen2": 3.143, "smollm": 2.544}
    description = ("ABRICOT (CALAMITA 2024): how inclusive a word is in its sentence, 1 (specific) to 5 "
                   "(inclusive)")
