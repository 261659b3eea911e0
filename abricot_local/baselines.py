"""The published ABRICOT numbers, as data, and how a run is checked against them.

Source: ../shared/spec/PROTOCOL.md, "Published results (Pearson)": the
ABRICOT paper's 3-shot table and the CALAMITA leaderboard. The published
metric is Pearson's r between the model's choice (1-5) and the discretised
human mean, i.e. this project's ``pearson`` metric of ``abricot_abs`` and
``abricot_inc``. DISCOTEX has no published numbers (its published table is
a placeholder of zeros), so it has no reference rows.

A registry entry's ``reproduces`` field names the rows a model should match,
as ``"ABRICOT paper: llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"``.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER = "paper 3-shot"
CALAMITA = "CALAMITA leaderboard"
METRIC = "pearson"
TASKS = ("abricot_abs", "abricot_inc")

# How each source ran the task, to flag a run whose settings differ.
# The leaderboard's shot count is not published: None = not checked.
PROTOCOLS: dict[str, dict] = {
    PAPER: {"prompt_variant": "paper", "shots": 3},
    CALAMITA: {"prompt_variant": "calamita", "shots": None},
}

# The label a registry ``reproduces`` field uses for each source.
REPRODUCES_LABELS = {"abricot paper": PAPER, "paper": PAPER, "paper 3-shot": PAPER,
                     "calamita leaderboard": CALAMITA, "calamita": CALAMITA}


@dataclass(frozen=True)
class Baseline:
    """One published row: a model's Pearson r on both ABRICOT tasks."""

    model: str
    source: str
    abs: float
    inc: float

    def value(self, task: str) -> float | None:
        return {"abricot_abs": self.abs, "abricot_inc": self.inc}.get(task)

    @property
    def label(self) -> str:
        return f"{self.model} ({self.source})"


BASELINES: tuple[Baseline, ...] = (
    Baseline("mistral-7b", PAPER, 0.22, 0.00),
    Baseline("llama-3.1-8b", PAPER, 0.30, 0.30),
    Baseline("llama-3.1-70b", PAPER, 0.53, 0.41),
    Baseline("Minerva-7B-instruct-v1.0", CALAMITA, -0.03, -0.20),
    Baseline("LLaMAntino-3-ANITA-8B-Inst-DPO-ITA", CALAMITA, 0.50, 0.14),
    Baseline("Llama-3.1-8B-Instruct", CALAMITA, 0.29, 0.18),
    Baseline("Llama-3.1-70B-Instruct", CALAMITA, 0.44, 0.25),
)


def find(source: str, model: str) -> Baseline | None:
    """The published row of ``model`` in ``source`` (case-insensitive), if any."""
    for b in BASELINES:
        if b.source == source and b.model.lower() == model.strip().lower():
            return b
    return None


def parse_reproduces(text: str) -> tuple[tuple[Baseline, ...], tuple[str, ...]]:
    """The rows a registry ``reproduces`` field names, and the parts that name none."""
    found: list[Baseline] = []
    unknown: list[str] = []
    for part in (p.strip() for p in (text or "").split(";")):
        if not part:
            continue
        label, sep, model = part.partition(":")
        source = REPRODUCES_LABELS.get(label.strip().lower()) if sep else None
        row = find(source, model) if source else None
        if row is None:
            unknown.append(part)
        elif row not in found:
            found.append(row)
    return tuple(found), tuple(unknown)


@dataclass(frozen=True)
class CICheck:
    """Whether one published value lies inside a run's 95% CI for that task."""

    baseline: Baseline
    task: str
    published: float
    value: float | None  # the run's point estimate (None: the run lacks the task)
    ci: tuple[float, float] | None
    notes: tuple[str, ...] = ()

    @property
    def inside(self) -> bool | None:
        """True/False; None when the run has no (finite) CI for the task."""
        if self.ci is None or any(c != c for c in self.ci):
            return None
        return self.ci[0] <= self.published <= self.ci[1]

    @property
    def text(self) -> str:
        """``0.22 in CI? yes`` (``n/a`` when there is no CI to check against)."""
        answer = {True: "yes", False: "no", None: "n/a"}[self.inside]
        return f"{self.published:.2f} in CI? {answer}"


def protocol_notes(baseline: Baseline, task_config: dict) -> tuple[str, ...]:
    """Where a run's task settings differ from how ``baseline`` was produced."""
    notes = []
    for key, want in PROTOCOLS.get(baseline.source, {}).items():
        got = task_config.get(key)
        if want is not None and got is not None and got != want:
            notes.append(f"{key} {got} (published: {want})")
    return tuple(notes)


def check(baseline: Baseline, task: str, task_result: dict | None) -> CICheck:
    """Compare ``baseline``'s value for ``task`` with a results.json task entry."""
    published = baseline.value(task)
    if published is None:
        raise ValueError(f"no published value for task {task!r}")
    if task_result is None:
        return CICheck(baseline, task, published, None, None, ("the run has no such task",))
    metrics = task_result.get("metrics", {})
    ci = metrics.get(f"{METRIC}_ci95")
    return CICheck(
        baseline, task, published, metrics.get(METRIC),
        (float(ci[0]), float(ci[1])) if ci else None,
        protocol_notes(baseline, task_result.get("config", {})),
    )
