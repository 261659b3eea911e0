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

import math

import numpy as np

from abricot_local.errors import AbricotError, ResultsError
from abricot_local.models.quants import refuse_mixed

FILE = "kld.json"
KIND = "abricot-local kld"
VERSION = 1
Z95 = 1.959963984540054
EPS = 1e-9  # nats: float rounding in a KL divergence of identical rows (never a real value below 0)


def _count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not a count")
    return value


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
    def from_dict(cls, d: dict, where: str = FILE) -> KldStats:
        """An entry's statistics, refused in one line (naming ``where``) when damaged or impossible: a KL
        divergence is never below 0, a share lies in [0, 1], a CI's low end is not above its high end."""
        try:
            got = cls(_count(d["n_tokens"]), float(d["mean"]), (float(d["ci95"][0]), float(d["ci95"][1])),
                      float(d["median"]), float(d["p99"]), float(d["p99_9"]), float(d["max"]),
                      float(d["same_top"]), _count(d.get("n_items", 0)))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ResultsError(f"{where}: an entry is damaged ({err!r}); run `abricot-local kld` again") from None
        why = got.impossible()
        if why:
            raise ResultsError(f"{where}: {why}, which no measurement gives; run `abricot-local kld` again")
        return got

    def impossible(self) -> str:
        """What no measurement of a KL divergence gives in these statistics ("" when none)."""
        values = {"KLD mean": self.mean, "CI low": self.ci95[0], "CI high": self.ci95[1], "median": self.median,
                  "p99": self.p99, "p99.9": self.p99_9, "max": self.max}
        bad = next((f"{k} {v!r} is not a finite number" for k, v in values.items() if not math.isfinite(v)), "")
        bad = bad or next((f"{k} {v:g} is below 0" for k, v in values.items() if k != "CI low" and v < -EPS), "")
        if bad:
            return bad
        if self.n_tokens < 1:
            return f"n_tokens {self.n_tokens} is less than 1"
        if not 0 <= self.same_top <= 1:
            return f"same-top share {self.same_top:g} is not within [0, 1]"
        if self.ci95[0] > self.ci95[1] or not self.ci95[0] - EPS <= self.mean <= self.ci95[1] + EPS:
            return f"the CI [{self.ci95[0]:g}, {self.ci95[1]:g}] does not hold the mean {self.mean:g} in order"
        if not self.median <= self.p99 + EPS <= self.p99_9 + 2 * EPS <= self.max + 3 * EPS:
            return "its percentiles are out of order (median, p99, p99.9, max)"
        return ""

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


def kld_of(folder: str | Path, reference, rung=None) -> dict[str, KldStats]:
    """Per task, the KLD the run in ``folder`` has against the model ``reference`` (a record.Model) ({} if
    none); the entry must name the run's own model (``rung``, a record.Model; None: the folder's record's)."""
    e = entries(folder).get(model_key(reference))
    if not e or not isinstance(e.get("tasks"), dict):
        return {}
    where = str(Path(folder) / FILE)
    if rung is None:
        from abricot_local.record import read_run

        rung = read_run(folder).model
    if e.get("model_sha256") != rung.sha256:
        raise ResultsError(f"{where}: its entry against {reference.name} was measured for the model "
                           f"{str(e.get('model_sha256'))[:16]}..., not this run's ({str(rung.sha256)[:16]}...); "
                           "run `abricot-local kld` again")
    return {task: KldStats.from_dict(s, where) for task, s in e["tasks"].items() if isinstance(s, dict)}


@dataclass(frozen=True)
class PairKld:
    reference: str  # labels
    run: str
    task: str
    stats: KldStats


def pairs(runs: Sequence) -> tuple[PairKld, ...]:
    """Over finished runs (runs.Run): every run's KLD against another's model, per task (an lm-eval
    output keeps no kld.json and names no model file: it has none)."""
    own = [r for r in runs if not r.lm_eval]
    out = []
    for run in own:
        for ref in own:
            if ref is run or ref.label == run.label:
                continue
            for task, s in sorted(kld_of(run.path, ref.record.model, run.record.model).items()):
                out.append(PairKld(ref.label, run.label, task, s))
    return tuple(out)


def of_views(runs) -> tuple[PairKld, ...]:
    """compare's runs (runs.Run) that are quants of one base: each one's KLD against another's model."""
    by_base: dict[str, list] = {}
    for r in runs:
        if r.base:
            by_base.setdefault(r.base.lower(), []).append(r)
    out: list[PairKld] = []
    for members in by_base.values():
        if len(members) > 1:
            refuse_mixed(members[0].base, [(r.label, r.record) for r in members])  # one model's quants, or no ladder
            out += pairs(members)
    return tuple(out)
