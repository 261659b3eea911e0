"""ABRICOT (CALAMITA 2024): abstractness and inclusiveness of a word in context, 1-5.

Prompts are byte-exact to the published text (variant ``paper``, with its
typos, and ``calamita``). Few-shot: K shots drawn once per run from the same
data with a recorded seed; every item shares them, except an item that is
itself a shot, which gets the next drawn item in its place. A shot is its
prompt, " ", its gold digit; shots are joined by a blank line and separated
from the item's prompt by one. Each item is scored on " 1" .. " 5".
"""

from __future__ import annotations

import numpy as np

from abricot_local.core import log_softmax
from abricot_local.errors import TaskError
from abricot_local.metrics import with_ci_of
from abricot_local.tasks.abricot_data import HUB_DATASET, SUFFIXES, Row, load_rows, pull
from abricot_local.tasks.base import DataSpec, Figure, Item, MetricInput, Reference, Task, text_hash

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

# Published Pearson r (choice 1-5 against the discretised human mean: this task's ``pearson``), from
# the ABRICOT paper (CALAMITA 2024, 3-shot) and the CALAMITA leaderboard: (model, abs, inc) per source.
# How each source ran the task, to flag a run whose settings differ; the leaderboard's
# shot count is not published (None: not checked).
PAPER, CALAMITA = "paper 3-shot", "CALAMITA leaderboard"
PUBLISHED = {
    (PAPER, (("prompt_variant", "paper"), ("shots", 3), ("chat_template", False)), ("abricot paper", "paper")): (
        ("mistral-7b", 0.22, 0.00), ("llama-3.1-8b", 0.30, 0.30), ("llama-3.1-70b", 0.53, 0.41)),
    (CALAMITA, (("prompt_variant", "calamita"), ("shots", None)), ("calamita",)): (
        ("Minerva-7B-instruct-v1.0", -0.03, -0.20), ("LLaMAntino-3-ANITA-8B-Inst-DPO-ITA", 0.50, 0.14),
        ("Llama-3.1-8B-Instruct", 0.29, 0.18), ("Llama-3.1-70B-Instruct", 0.44, 0.25)),
}


def discretise(mean: float) -> int:
    """The official harness's gold index: round(5 * mean) half to even, 5 clamped to 4."""
    return min(round(5 * mean), 4)


def render(kind: str, variant: str, row: Row) -> str:
    return PROMPTS[(kind, variant)].format(parola=row.target, frase=row.text)


class AbricotTask(Task):
    """One of the two ABRICOT tasks; ``kind`` is "abs" or "inc"."""

    version = "1"
    group = "abricot"
    metric_names = ("pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy")
    primary_metric = "pearson"
    chance = {"pearson": 0.0, "pearson_continuous": 0.0, "pearson_expected": 0.0, "spearman": 0.0, "accuracy": 0.2}
    figures = (Figure("scatter", x="human_mean", metric="pearson_continuous",
                      x_label="human mean (0 = concrete/specific, 1 = abstract/inclusive)"),)
    data = DataSpec(
        key="abricot", kind="file", files=tuple(f"abricot*{s}" for s in SUFFIXES), pull=pull,
        how="--data abricot=FILE (the ABRICOT release: CSV, TSV, JSONL, Parquet)",
        description="ABRICOT release (ids, target word, sentence, human abstractness/inclusiveness means)",
    )
    kind = "abs"
    uses = ("shots", "prompt_variant")
    prompt_variants = ("paper", "calamita")

    def __init__(self, options):
        super().__init__(options)
        if self.options.prompt_variant not in self.prompt_variants:  # None became the default (Task.__init__)
            raise TaskError(f"unknown prompt variant {self.options.prompt_variant!r}; use paper or calamita")
        self.shots = DEFAULT_SHOTS if options.shots is None else options.shots
        if self.shots < 0:
            raise TaskError("--shots must be 0 or more")
        self._warnings: list[str] = []
        self._rows: list[Row] | None = None

    def _load(self) -> list[Row]:
        if self._rows is None:
            path = self.data_path()
            self._rows, bad_spans = load_rows(path)
            if bad_spans:
                self._warnings.append(
                    f"{bad_spans} row(s) of {path.name}: begin/end do not point at the target token in the text"
                )
            if self.shots >= len(self._rows):
                raise TaskError(f"--shots {self.shots} needs more than {self.shots} items; the data has {len(self._rows)}")
        return self._rows

    def warnings(self) -> list[str]:
        return list(self._warnings)

    def references(self) -> tuple[Reference, ...]:
        column = 1 if self.kind == "abs" else 2
        return tuple(
            Reference(source, row[0], self.name, "pearson", row[column], protocol, aliases)
            for (source, protocol, aliases), rows in PUBLISHED.items() for row in rows
        )

    def _shot_draw(self) -> tuple[list[Row], Row | None]:
        """The shots (the same draw for both tasks: an item's shots are the same sentences in
        abs and inc) and the spare that replaces a shot in its own item."""
        rows = self._load()
        if not self.shots:
            return [], None
        order = list(np.random.default_rng(self.options.seed).permutation(len(rows)))
        return [rows[k] for k in order[: self.shots]], rows[order[self.shots]]

    def mean(self, row: Row) -> float:
        return row.abs_mean if self.kind == "abs" else row.inc_mean

    def std(self, row: Row) -> float | None:
        return row.abs_std if self.kind == "abs" else row.inc_std

    def shot_text(self, row: Row) -> str:
        return render(self.kind, self.options.prompt_variant, row) + " " + CHOICES[discretise(self.mean(row))]

    def items(self) -> list[Item]:
        rows = self._load()
        shots, spare = self._shot_draw()
        variant = self.options.prompt_variant
        items = []
        for row in rows:
            own = [spare if s.id == row.id else s for s in shots]
            prefix = SHOT_SEPARATOR.join(self.shot_text(s) for s in own) + SHOT_SEPARATOR if own else ""
            items.append(
                Item(
                    id=row.id,
                    source=row.domain,
                    prefix=prefix,
                    context=prefix + render(self.kind, variant, row),
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

    def sample(self, item, scored):
        rec = super().sample(item, scored)
        p = np.exp(log_softmax(scored.logprobs))  # the five labels' distribution, renormalised
        rec["expected_score"] = float(np.dot(p, np.arange(1, 6)))
        return rec

    def config(self) -> dict:
        return {
            "seed": self.options.seed,
            "shots": self.shots,
            "shot_ids": [r.id for r in self._shot_draw()[0]],
            "prompt_variant": self.options.prompt_variant,
            "chat_template": self.options.chat_template,
            "gold": "round(5*mean) half-to-even, 5 -> 4",
        }

    def prompt_hash(self) -> str:
        return text_hash(PROMPTS[(self.kind, self.options.prompt_variant)], SHOT_SEPARATOR, *CHOICES)

    def metric_inputs(self, samples: list[dict]) -> tuple[MetricInput, ...]:
        pred = np.array([s["pred"] + 1 for s in samples], dtype=float)
        gold = np.array([s["gold"] + 1 for s in samples], dtype=float)
        human = np.array([s["human_mean"] for s in samples], dtype=float)
        expected = np.array([s["expected_score"] for s in samples], dtype=float)
        return (
            MetricInput("pearson", "pearson", pred, gold),
            MetricInput("pearson_continuous", "pearson", pred, human),
            MetricInput("pearson_expected", "pearson", expected, human),
            MetricInput("spearman", "spearman", pred, human),
            MetricInput("accuracy", "accuracy", pred, gold),
        )

    def metrics(self, samples: list[dict]) -> dict:
        out: dict = {}
        for inp in self.metric_inputs(samples):
            out.update(with_ci_of(inp, seed=self.options.seed))
        return out


class AbricotAbsTask(AbricotTask):
    name = "abricot_abs"
    kind = "abs"
    description = "ABRICOT (CALAMITA 2024): how abstract a word is in its sentence, 1 (concrete) to 5 (abstract)"


class AbricotIncTask(AbricotTask):
    name = "abricot_inc"
    kind = "inc"
    description = ("ABRICOT (CALAMITA 2024): how inclusive a word is in its sentence, 1 (specific) to 5 "
                   "(inclusive)")
