"""The full-vocabulary KL divergence of a rung against its reference, as llama-perplexity
--kl-divergence reports it: mean with its 95% CI, median, 99th and 99.9th percentiles, max, and
the share of tokens whose top token is the same (:class:`KldStats`, from per-token values by
:func:`summarise`). ``abricot-local kld`` (run/kld.py) measures it and keeps it in the
rung's run folder (``kld.json``, :data:`FILE`), one entry per reference model (its SHA-256:
:func:`model_key`);
:func:`kld_of` reads it back for the ladder, ``compare`` and the API. Not to be confused with the
``kl_mean`` of compare/the ladder: the KL of the answer-label distributions, from the samples.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from abricot_local.errors import AbricotError
from abricot_local.models.quants import refuse_mixed

FILE = "kld.json"
KIND = "abricot-local kld"
VERSION = 1
Z95 = 1.959963984540054


@dataclass(frozen=True)
class KldStats:
    """KL(reference || rung) over every compared token (nats) and the same-top-token share."""

    n_tokens: int
    mean: float
    ci95: tuple[float, float]  # the mean's, from its standard error (llama-perplexity's "±" is that error)
    median: float
    p99: float
    p99_9: float
    max: float
    same_top: float  # share of tokens where both models' most likely token is the same
    n_items: int = 0

    def to_dict(self) -> dict:
        return {**asdict(self), "ci95": list(self.ci95)}

    @classmethod
    def from_dict(cls, d: dict) -> KldStats:
        try:
            return cls(int(d["n_tokens"]), float(d["mean"]), (float(d["ci95"][0]), float(d["ci95"][1])),
                       float(d["median"]), float(d["p99"]), float(d["p99_9"]), float(d["max"]),
                       float(d["same_top"]), int(d.get("n_items", 0)))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise AbricotError(f"a {FILE} entry is damaged ({err!r}); run `abricot-local kld` again") from None

    def line(self) -> str:
        return (f"KLD mean {self.mean:.5f} [{self.ci95[0]:.5f}, {self.ci95[1]:.5f}], median {self.median:.5f}, "
                f"p99 {self.p99:.4f}, p99.9 {self.p99_9:.4f}, max {self.max:.4f}, same top "
                f"{100 * self.same_top:.2f}% ({self.n_tokens:,} tokens)")


def summarise(kl: Sequence[float], same_top: Sequence[bool], n_items: int = 0) -> KldStats:
    """The statistics of per-token KL values (percentiles interpolated linearly, as llama-perplexity's)."""
    x = np.asarray(kl, dtype=np.float64)
    if x.size == 0:
        raise AbricotError("no token was compared: nothing to summarise")
    mean = float(x.mean())
    se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0
    p = np.percentile(x, [50, 99, 99.9])
    return KldStats(int(x.size), mean, (mean - Z95 * se, mean + Z95 * se), float(p[0]), float(p[1]), float(p[2]),
                    float(x.max()), float(np.mean(np.asarray(same_top, dtype=bool))), n_items)


def entries(folder: str | Path) -> dict[str, dict]:
    """A run folder's kld.json: reference model SHA-256 -> entry ({} when there is none)."""
    from abricot_local.jsonfiles import read_json

    path = Path(folder) / FILE
    if path.is_symlink() or not path.is_file():
        return {}
    doc = read_json(path, what="KL divergence file")
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not isinstance(doc.get("references"), dict):
        return {}
    return {k: v for k, v in doc["references"].items() if isinstance(v, dict)}


def model_key(model) -> str:
    """What names a reference model in kld.json: its SHA-256 (a synthetic model has none: its name)."""
    return model.sha256 or f"name:{model.name}"


def kld_of(folder: str | Path, reference) -> dict[str, KldStats]:
    """Per task, the KLD the run in ``folder`` has against the model ``reference`` (a record.Model) ({} if none)."""
    e = entries(folder).get(model_key(reference))
    if not e or not isinstance(e.get("tasks"), dict):
        return {}
    return {task: KldStats.from_dict(s) for task, s in e["tasks"].items() if isinstance(s, dict)}


@dataclass(frozen=True)
class PairKld:
    reference: str  # labels
    run: str
    task: str
    stats: KldStats


def pairs(runs: Sequence[tuple[str, str]]) -> tuple[PairKld, ...]:
    """Over (label, folder) of finished runs: every run's KLD against another's model, per task."""
    from abricot_local.record import read_run
    from abricot_local.record.io import RESULTS

    # a run folder's model; an lm-eval output (no results.json) keeps no kld.json and names no model file
    models = {label: read_run(Path(folder)).model for label, folder in runs if (Path(folder) / RESULTS).is_file()}
    out = []
    for label, folder in runs:
        for ref_label, _ref_folder in runs:
            if ref_label == label or label not in models or ref_label not in models:
                continue
            for task, s in sorted(kld_of(folder, models[ref_label]).items()):
                out.append(PairKld(ref_label, label, task, s))
    return tuple(out)


def of_views(views) -> tuple[PairKld, ...]:
    """compare's runs (analysis.views.RunView) that are quants of one base: each one's KLD against another."""
    by_base: dict[str, list] = {}
    for v in views:
        if v.base:
            by_base.setdefault(v.base.lower(), []).append(v)
    out: list[PairKld] = []
    for members in by_base.values():
        if len(members) > 1:
            refuse_mixed(members[0].base, [(v.label, v.path) for v in members])  # one model's quants, or no ladder
            out += pairs([(v.label, v.path) for v in members])
    return tuple(out)
