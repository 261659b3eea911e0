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

from abricot_local.backends.base import log_softmax
from abricot_local.errors import TaskError
from abricot_local.metrics import with_ci
from abricot_local.tasks.abricot_data import Row, find_data_file, load_rows
from abricot_local.tasks.base import DataFile, Item, Task, text_hash

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


def discretise(mean: float) -> int:
    """The official harness's gold index: round(5 * mean) half to even, 5 clamped to 4."""
    return min(round(5 * mean), 4)


def render(kind: str, variant: str, row: Row) -> str:
    return PROMPTS[(kind, variant)].format(parola=row.target, frase=row.text)


class AbricotTask(Task):
    """One of the two ABRICOT tasks; ``kind`` is "abs" or "inc"."""

    version = "1"
    metric_names = ("pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy")
    kind = "abs"

    def __init__(self, options):
        super().__init__(options)
        if options.prompt_variant not in ("paper", "calamita"):
            raise TaskError(f"unknown prompt variant {options.prompt_variant!r}; use paper or calamita")
        self.shots = DEFAULT_SHOTS if options.shots is None else options.shots
        if self.shots < 0:
            raise TaskError("--shots must be 0 or more")
        self.warnings: list[str] = []
        self._rows: list[Row] | None = None
        self.shot_ids: list[str] = []

    def _load(self) -> list[Row]:
        if self._rows is None:
            path = find_data_file(self.options)
            self._rows, bad_spans = load_rows(path)
            self._path = path
            if bad_spans:
                self.warnings.append(
                    f"{bad_spans} row(s) of {path.name}: begin/end do not point at the target token in the text"
                )
            if self.shots >= len(self._rows):
                raise TaskError(f"--shots {self.shots} needs more than {self.shots} items; the data has {len(self._rows)}")
        return self._rows

    def data_files(self) -> list[DataFile]:
        from abricot_local import fetch

        self._load()
        return [DataFile(self._path, fetch.sha256_file(self._path))]

    def mean(self, row: Row) -> float:
        return row.abs_mean if self.kind == "abs" else row.inc_mean

    def std(self, row: Row) -> float | None:
        return row.abs_std if self.kind == "abs" else row.inc_std

    def shot_text(self, row: Row) -> str:
        return render(self.kind, self.options.prompt_variant, row) + " " + CHOICES[discretise(self.mean(row))]

    def items(self) -> list[Item]:
        rows = self._load()
        # The same draw for both tasks: an item's shots are the same sentences in abs and inc.
        order = list(np.random.default_rng(self.options.seed).permutation(len(rows))) if self.shots else []
        shots = [rows[k] for k in order[: self.shots]]
        spare = rows[order[self.shots]] if self.shots else None
        self.shot_ids = [r.id for r in shots]
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
            "shot_ids": self.shot_ids,
            "prompt_variant": self.options.prompt_variant,
            "chat_template": self.options.chat_template,
            "gold": "round(5*mean) half-to-even, 5 -> 4",
        }

    def prompt_hash(self) -> str:
        return text_hash(PROMPTS[(self.kind, self.options.prompt_variant)], SHOT_SEPARATOR, *CHOICES)

    def metrics(self, samples: list[dict]) -> dict:
        seed = self.options.seed
        pred = np.array([s["pred"] + 1 for s in samples], dtype=float)
        gold = np.array([s["gold"] + 1 for s in samples], dtype=float)
        human = np.array([s["human_mean"] for s in samples], dtype=float)
        expected = np.array([s["expected_score"] for s in samples], dtype=float)
        out: dict = {}
        for key, stat, a, b in (
            ("pearson", "pearson", pred, gold),
            ("pearson_continuous", "pearson", pred, human),
            ("pearson_expected", "pearson", expected, human),
            ("spearman", "spearman", pred, human),
            ("accuracy", "accuracy", pred, gold),
        ):
            out[key], out[f"{key}_ci95"] = with_ci(stat, a, b, seed=seed)
        return out


class AbricotAbsTask(AbricotTask):
    name = "abricot_abs"
    kind = "abs"


class AbricotIncTask(AbricotTask):
    name = "abricot_inc"
    kind = "inc"
