"""The full-vocabulary KL divergence of a rung against its reference at every token scoring the items
decodes (each item whole: backends/kld.py), in llama-perplexity --kl-divergence's statistics: mean,
median, 99th and 99.9th percentiles, max, and the share of tokens whose top token is the same
(:class:`KldStats`, from per-token values by :func:`summarise`). The mean's 95% CI is over the items
measured, not the tokens: a task's items are its sampling units and the tokens of one item move together,
so llama-perplexity's standard error (every token independent, kept as ``se_token``) is far too narrow for
"this quant's KLD on this task" (:func:`item_interval`; it is the interval's floor). ``abricot-local kld``
(run/kld.py) measures it and keeps it in the rung's run folder (``kld.json``, :data:`FILE`, :data:`VERSION`), one entry per reference model (its SHA-256:
:func:`model_key`; :class:`KldEntry`);
:func:`kld_of` reads it back for the ladder, ``compare`` and the API. Not to be confused with the
``kl_mean`` of compare/the ladder: the KL of the answer-label distributions, from the samples.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import math

import numpy as np

from abricot_local.errors import AbricotError, ResultsError
from abricot_local.models.quants import refuse_mixed

FILE = "kld.json"
KIND = "abricot-local kld"
VERSION = 2  # 2: the CI over the items (1: over the tokens, read back without a CI)
Z95 = 1.959963984540054
EPS = 1e-9  # nats: float rounding in a KL divergence of identical rows (never a real value below 0)
CI_METHOD = ("ratio of sums over the items (KL summed per item over its tokens), delta-method standard error "
             "with the m/(m-1) correction, never below the per-token standard error, Student's t on m - 1 degrees "
             "of freedom, on the log scale")
# Student's t 0.975 quantile on 1..30 degrees of freedom (scipy.special.stdtrit, kept as constants: the same
# bits on every CPU); beyond, Cornish and Fisher's expansion in 1/df (Abramowitz and Stegun 26.7.5: within
# 1.3e-8 relative from 31 on)
_T975 = (12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934, 2.5705818356363146,
         2.4469118511449786, 2.364624251592784, 2.306004135204166, 2.262157162798205, 2.228138851986274,
         2.200985160091639, 2.1788128296672284, 2.1603686564627913, 2.144786687917804, 2.131449545559776,
         2.1199052992212546, 2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
         2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245, 2.0595385527532972,
         2.0555294386428735, 2.0518305164802846, 2.0484071417952454, 2.045229642132703, 2.0422724563012378)
OLD = "an older kld.json, run `abricot-local kld` again"


def _count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not a count")
    return value


@dataclass(frozen=True)
class KldStats:
    """KL(reference || rung) over every compared token (nats) and the same-top-token share."""

    n_tokens: int
    mean: float  # over the tokens (= the sum over the items over their tokens)
    ci95: tuple[float, float]  # the mean's, over the items (item_interval); (nan, nan): none (why: no_ci)
    median: float
    p99: float
    p99_9: float
    max: float
    same_top: float  # share of tokens where both models' most likely token is the same
    n_items: int = 0  # the items measured
    se_token: float = math.nan  # the mean's standard error with every token independent: llama-perplexity's "±"
    n_units: int = 0  # the CI's sampling units: the items (a batched engine's items decoded together); 0: an old file
    ci_method: str = ""  # how ci95 was made (CI_METHOD); "": an old file's entry, no CI

    @property
    def has_ci(self) -> bool:
        return self.ci95[0] == self.ci95[0] and self.ci95[1] == self.ci95[1]

    def to_dict(self) -> dict:
        return {**asdict(self), "ci95": [v if v == v else None for v in self.ci95],
                "se_token": self.se_token if self.se_token == self.se_token else None}

    @classmethod
    def from_dict(cls, d: dict, where: str = FILE) -> KldStats:
        """An entry's statistics, refused in one line (naming ``where``) when damaged or impossible: a KL
        divergence is never below 0, a share lies in [0, 1], a CI's low end is not above its high end."""
        def value(v) -> float:
            return math.nan if v is None else float(v)

        try:
            ci = d["ci95"]
            got = cls(_count(d["n_tokens"]), float(d["mean"]), (value(ci[0]), value(ci[1])),
                      float(d["median"]), float(d["p99"]), float(d["p99_9"]), float(d["max"]),
                      float(d["same_top"]), _count(d.get("n_items", 0)), value(d.get("se_token")),
                      _count(d.get("n_units", 0)), str(d.get("ci_method", "")))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            raise ResultsError(f"{where}: an entry is damaged ({err!r}); run `abricot-local kld` again") from None
        why = got.impossible()
        if why:
            raise ResultsError(f"{where}: {why}, which no measurement gives; run `abricot-local kld` again")
        if not got.ci_method:  # an entry of kld.json version 1: its CI was over the tokens (1.96 x se_token)
            return replace(got, ci95=(math.nan, math.nan), se_token=(got.ci95[1] - got.ci95[0]) / (2 * Z95))
        return got

    def impossible(self) -> str:
        """What no measurement of a KL divergence gives in these statistics ("" when none)."""
        values = {"KLD mean": self.mean, "median": self.median, "p99": self.p99, "p99.9": self.p99_9, "max": self.max,
                  **({"CI low": self.ci95[0], "CI high": self.ci95[1]} if self.has_ci else {}),
                  **({"per-token standard error": self.se_token} if self.se_token == self.se_token else {})}
        bad = next((f"{k} {v!r} is not a finite number" for k, v in values.items() if not math.isfinite(v)), "")
        bad = bad or next((f"{k} {v:g} is below 0" for k, v in values.items() if k != "CI low" and v < -EPS), "")
        if bad:
            return bad
        if self.n_tokens < 1:
            return f"n_tokens {self.n_tokens} is less than 1"
        if not 0 <= self.same_top <= 1:
            return f"same-top share {self.same_top:g} is not within [0, 1]"
        if (self.ci95[0] == self.ci95[0]) != (self.ci95[1] == self.ci95[1]):
            return "its CI has one end only"
        if self.has_ci and (self.ci95[0] > self.ci95[1] or not self.ci95[0] - EPS <= self.mean <= self.ci95[1] + EPS):
            return f"the CI [{self.ci95[0]:g}, {self.ci95[1]:g}] does not hold the mean {self.mean:g} in order"
        if not self.median <= self.p99 + EPS <= self.p99_9 + 2 * EPS <= self.max + 3 * EPS:
            return "its percentiles are out of order (median, p99, p99.9, max)"
        return ""

    def no_ci(self) -> str:
        """Why there is no CI ("" when there is one)."""
        if self.has_ci:
            return ""
        if not self.ci_method:
            return OLD
        return "one item" if self.n_items <= 1 else "its items decoded together (one unit)"

    def interval(self, digits: int = 4) -> str:
        """The mean and its 95% CI over the items, ``0.0099 [0.0081, 0.0121]`` (a value below 10^-digits as
        ``2.31e-05``); none: why, ``0.0099 (no CI: one item)``."""
        def num(v: float) -> str:
            return f"{v:.{digits}f}" if abs(v) >= 10 ** -digits or v == 0 else f"{v:.2e}"

        if self.has_ci:
            return f"{num(self.mean)} [{num(self.ci95[0])}, {num(self.ci95[1])}]"
        return f"{num(self.mean)} (no CI: {self.no_ci()})"

    def covers(self, of: int | None = None) -> str:
        """What it is over, ``over 4 items (1,047 tokens)``; ``of``: the items of the row it stands beside, said
        when it covers fewer, ``over 4 of the 40 items (1,047 tokens)`` (:meth:`extent` after ``over``)."""
        return f"over {self.extent(of)}"

    def extent(self, of: int | None = None) -> str:
        """:meth:`covers` without its ``over``: ``4 of the 40 items (1,047 tokens)``; the CI's units when they
        are not the items (a batched engine's), ``...; CI over 2 units of items decoded together``."""
        if self.n_items < 1:  # an entry older than the items' count
            return f"{self.n_tokens:,} tokens (its items not recorded)"
        items = "item" if self.n_items == 1 else "items"
        part = f"{self.n_items:,} of the {of:,} items" if of and self.n_items < of else f"{self.n_items:,} {items}"
        units = (f"; CI over {self.n_units:,} unit{'s' * (self.n_units != 1)} of items decoded together"
                 if self.has_ci and 0 < self.n_units != self.n_items else "")
        return f"{part} ({self.n_tokens:,} tokens{units})"

    def line(self) -> str:
        se = f"; per-token standard error {self.se_token:.5f} (llama-perplexity's \u00b1: every token independent)" \
            if self.se_token == self.se_token else ""
        return (f"KLD mean {self.interval(5)} {self.covers()}, median {self.median:.5f}, p99 {self.p99:.4f}, "
                f"p99.9 {self.p99_9:.4f}, max {self.max:.4f}, same top {100 * self.same_top:.2f}%{se}")

    def record(self, of: int | None = None) -> dict:
        """As a report's or compare's JSON gives it: :meth:`to_dict`, ``covers`` (:meth:`covers` beside ``of``
        items) and ``text`` (the mean, its CI and what it covers, as the tables show it)."""
        return {**self.to_dict(), "covers": self.covers(of), "text": f"{self.interval()} {self.covers(of)}"}


def t975(df: int) -> float:
    """Student's t 0.975 quantile on ``df`` >= 1 degrees of freedom, the same bits on every CPU (arithmetic only)."""
    if df <= len(_T975):
        return _T975[df - 1]
    z, v = Z95, float(df)
    z2 = z * z
    g = ((z2 + 1) * z / 4, ((5 * z2 + 16) * z2 + 3) * z / 96, (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
         ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160)
    return z + g[0] / v + g[1] / v ** 2 + g[2] / v ** 3 + g[3] / v ** 4


def item_interval(sums: Sequence[float], counts: Sequence[int], mean: float | None = None,
                  se_token: float = 0.0) -> tuple[float, float]:
    """The 95% CI of the mean KL over the items, from each item's (unit's) KL summed over its tokens and its token
    count (:data:`CI_METHOD`). The mean over the tokens is a ratio r = sum S_i / sum n_i over the m items; its
    delta-method variance is m/(m-1) sum (S_i - r n_i)^2 / (sum n_i)^2; the interval r exp(+-t se/r) (on the log
    scale: a KL is positive and skewed; never below 0) with Student's t on m - 1 degrees of freedom. ``se_token``
    (the per-token standard error, every token independent) is se's floor: tokens of one item that move together
    widen the error, never narrow it, so an se over the items below it is the noise of a variance read on m - 1
    degrees of freedom (3 items that happen to agree), not a finding (bench/kld_coverage.py). (nan, nan) with one
    unit; (0, 0) when every KL is 0. ``mean``: r as the caller summed it over the tokens (the same value, to its
    last bit: sum S_i rounds each S_i first). Sums are math.fsum's, exp is core.exact_exp's: the same bits on
    every CPU. The finite population (a measurement over every item of a task) is not corrected for."""
    from abricot_local.core import exact_exp

    m, total = len(sums), sum(counts)
    if m < 2 or total < 1:
        return math.nan, math.nan
    r = math.fsum(sums) / total if mean is None else mean
    if not r > 0:
        return 0.0, 0.0
    e2 = math.fsum((s - r * n) * (s - r * n) for s, n in zip(sums, counts, strict=True))
    half = t975(m - 1) * max(math.sqrt(m / (m - 1) * e2), se_token * total) / total / r  # unfloored: as before
    return r * exact_exp(-half), r * exact_exp(half)


def summarise(kl: Sequence[float], same_top: Sequence[bool], n_items: int = 0,
              ends: Sequence[int] | None = None) -> KldStats:
    """The statistics of per-token KL values (percentiles interpolated linearly, as llama-perplexity's). ``ends``:
    where each item's (each unit's) tokens end in ``kl`` (backends.kld.KlRows.ends; None: one unit), for the
    mean's CI over the items (:func:`item_interval`); ``se_token`` the per-token standard error beside it. Sums
    are math.fsum's and no numpy transcendental function is used: the same bits on every CPU."""
    x = np.asarray(kl, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        raise AbricotError("no token was compared: nothing to summarise")
    values = x.tolist()
    ends = [n] if ends is None else [int(e) for e in ends]
    if not ends or ends[-1] != n or any(b <= a for a, b in zip([0, *ends], ends)):
        raise AbricotError(f"the items' ends {ends[:5]}... do not cut {n} tokens into items")
    starts = [0, *ends[:-1]]
    mean = math.fsum(values) / n
    d = (x - mean).tolist()
    se = math.sqrt(math.fsum(v * v for v in d) / (n - 1) / n) if n > 1 else 0.0
    ci = item_interval([math.fsum(values[a:b]) for a, b in zip(starts, ends)],
                       [b - a for a, b in zip(starts, ends)], mean, se)
    p = np.percentile(x, [50, 99, 99.9])  # a sort and linear interpolation: IEEE arithmetic only
    same = sum(bool(v) for v in same_top)
    return KldStats(n, mean, ci, float(p[0]), float(p[1]), float(p[2]), float(x.max()), same / len(same_top),
                    n_items, se, len(ends), CI_METHOD)


def entries(folder: str | Path) -> dict[str, dict]:
    """A run folder's kld.json: reference model SHA-256 -> entry, as the file holds it ({} when there is none; a
    file of another kind is not kld's). A version this abricot-local does not read is refused in one line."""
    from abricot_local.jsonfiles import read_json

    path = Path(folder) / FILE
    if path.is_symlink() or not path.is_file():
        return {}
    doc = read_json(path, what="KL divergence file")
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not isinstance(doc.get("references"), dict):
        return {}
    version = doc.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        why = ("a newer abricot-local wrote it: read it with that one, or" if type(version) is int and version > VERSION
               else "not one kld writes (the file is damaged):")
        raise ResultsError(f"{path}: version {version!r}, which this abricot-local does not read (it reads 1 to "
                           f"{VERSION}); {why} move it away and run `abricot-local kld` again")
    return {k: v for k, v in doc["references"].items() if isinstance(v, dict)}


@dataclass(frozen=True)
class KldEntry:
    """One entry of kld.json: a run's KLD against one reference model (filed under its :func:`model_key`), as
    ``kld`` writes it (run/kld.write) and :func:`kld_of` reads it back. :meth:`to_dict` is the file's shape;
    :meth:`from_dict` reads any version's entry (a field an older one lacks: its default)."""

    tasks: dict  # task -> KldStats
    model_sha256: str | None  # the measured run's model
    reference_folder: str = ""  # REF's run folder (absolute)
    reference_model: str = ""  # REF's model's name
    reference_sha256: str | None = None
    quant: str = ""
    seconds: float = 0.0  # its reference pass's, to the ms
    decode_calls: int = 0  # per model, its pass's
    pass_runs: tuple[str, ...] = ()  # the runs measured in the same reference pass (absolute)
    engine: str = ""
    n_batch: int = 0

    def to_dict(self) -> dict:
        return {"reference": {"folder": self.reference_folder, "model": self.reference_model,
                              "model_sha256": self.reference_sha256},
                "model_sha256": self.model_sha256, "quant": self.quant, "seconds": self.seconds,
                "decode_calls": self.decode_calls, "pass_runs": list(self.pass_runs), "engine": self.engine,
                "n_batch": self.n_batch, "tasks": {t: s.to_dict() for t, s in self.tasks.items()}}

    @classmethod
    def from_dict(cls, d: dict, where: str = FILE) -> KldEntry:
        """An entry read back, refused in one line (naming ``where``) when damaged; its tasks'
        statistics by :meth:`KldStats.from_dict` (an entry that is not an object among them: left out)."""
        def text(key: str, of: dict, none: bool = False):
            v = of.get(key, None if none else "")
            if (v is None and none) or isinstance(v, str):
                return v
            raise TypeError(f"{key} {v!r} is not text")

        try:
            ref = d.get("reference", {})
            if not isinstance(ref, dict) or not isinstance(d["tasks"], dict):
                raise TypeError("its reference or tasks are not objects")
            runs = d.get("pass_runs", [])
            if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
                raise TypeError(f"pass_runs {runs!r} is not a list of folders")
            seconds = d.get("seconds", 0.0)
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f"seconds {seconds!r} is not a number")
            head = cls({}, text("model_sha256", d, True), text("folder", ref), text("model", ref),
                       text("model_sha256", ref, True), text("quant", d), float(seconds),
                       _count(d.get("decode_calls", 0)), tuple(runs), text("engine", d), _count(d.get("n_batch", 0)))
        except (KeyError, TypeError) as err:
            raise ResultsError(f"{where}: an entry is damaged ({err!r}); run `abricot-local kld` again") from None
        return replace(head, tasks={t: KldStats.from_dict(s, where) for t, s in d["tasks"].items()
                                    if isinstance(s, dict)})


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
    entry = KldEntry.from_dict(e, where)
    if entry.model_sha256 != rung.sha256:
        raise ResultsError(f"{where}: its entry against {reference.name} was measured for the model "
                           f"{str(entry.model_sha256)[:16]}..., not this run's ({str(rung.sha256)[:16]}...); "
                           "run `abricot-local kld` again")
    return dict(entry.tasks)


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
            for task, s in sorted(kld_of(run.folder, ref.record.model, run.record.model).items()):
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
