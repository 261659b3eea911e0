"""The quant ladder (analysis/ladder.py) as rows: a table for the text report, records for JSON
and the HTML page. A rung a ``run --quants --until-settled`` rule judged: its verdict the rule's, in the run's own
line (the look it stopped at, its interval, its guarantee), compare's fixed-n one beside it, at the rule's margin
(settled.FIXED_N: it does not account for the looks); a ladder with no such rung, as before. The answers changed
say how many of the reference's near ties and decisive answers the rung flipped (:func:`changes_text`). Under the
table, a line per ladder says what its verdicts support about which quant to keep (:func:`choice_text`: the
smallest file shown as good, else the smallest quant by its name, and which it is). Pure."""

from __future__ import annotations

from dataclasses import asdict
from typing import Sequence

import pandas as pd

from abricot_local.analysis import stats
from abricot_local.analysis.changes import NEAR_TIE, NEAR_TIE_MEANS, QUANTS
from abricot_local.analysis.equivalence import UNDEFINED, UNSETTLED, WORSE, words
from abricot_local.analysis.ladder import AS_GOOD, Choice, Rung, Standing, choices
from abricot_local.analysis.settled import FIXED_N, grown_by

TITLE = ("Quant ladder: each quant against the highest-precision one of its model on the task (the task's primary "
         "metric at the task's margin, a rung a sweep's until-settled rule judged at the rule's margin; 90% CI of "
         "quant - reference for the task's own items, exact when every item is compared; answers changed: how many "
         f"of the reference's near ties (its top two choices closer than {NEAR_TIE:g} nats: {NEAR_TIE_MEANS[QUANTS]}) "
         "and of its decisive answers flipped; label KL: KL(reference || quant) of the answer labels; KLD: over the "
         "whole vocabulary at every token of the items `abricot-local kld` measured, its 95% CI over those items)")
COLUMNS = ("model", "task", "quant", "run", "n", "verdict", "difference [90% CI]", "same prediction",
           "label KL", "KLD mean [95% CI]", "KLD p99", "same top", "answers changed", "size MB", "items/s")
# beside a rule's verdict, only with one
FIXED_N_COLUMN = "fixed-n verdict at the rule's margin (does not account for the looks)"


def _num(v, digits: int = 3) -> str:
    return "" if v is None else "nan" if v != v else f"{v:.{digits}f}"


def verdict_text(r: Rung) -> str:
    """The rung's verdict in a cell: a rule's (``run --quants --until-settled``) in the run's own line, ``equivalent
    within 0.2 (reached sequentially at look 1 of 4: ...)``; else compare's (:func:`fixed_n_text`, ``identical``
    said there)."""
    if r.settled is not None and not r.is_reference:
        return r.settled.line
    return fixed_n_text(r)


def short_verdict(r: Rung) -> str:
    """The rung's verdict in a few words, for a cell the page keeps narrow: a rule's, its words at its look
    (``cannot tell yet within 0.02 (look 2 of 2)``); else compare's (:func:`fixed_n_text`, short already). The
    whole verdict (:func:`verdict_text`, compare's beside a rule's) is said in full under the page's table."""
    s = r.settled
    if s is not None and not r.is_reference:
        return f"{s.words} (look {s.look.k} of {s.looks})"
    return fixed_n_text(r)


def fixed_n_text(r: Rung) -> str:
    """Compare's fixed-n verdict in a cell: ``equivalent within 0.02``, ``better by more than 0.02``, ``cannot tell
    yet (~900 items)``, ``equivalent within 0.02, exact`` (every item of the task compared), ``identical; ...``
    (every log-prob bit-identical), ``reference``. Beside a rule's verdict (at the rule's margin) a verdict not
    settled names its margin too: ``cannot tell yet within 0.2 (~40 items)``."""
    if r.is_reference:
        return "reference"
    e = r.verdict
    if e is None:
        return "no common item"
    same = "identical; " if e.identical else ""
    within = f" within {e.margin:g}" if r.settled is not None else ""
    if e.kind == UNSETTLED:
        return same + (f"cannot tell yet{within} (on the margin)" if e.items >= stats.MAX_ITEMS else
                       f"cannot tell yet{within} (~{e.items:,} items)")
    if e.kind == UNDEFINED:
        return same + "cannot tell" + within
    return same + words(e.kind, e.margin) + (", exact" if e.exact else "")


def difference_text(e) -> str:
    """The difference quant - reference and its 90% CI (the task's own value); every item compared: the difference,
    exact; an undefined difference or interval: why (the verdict's note), never ``nan``."""
    if e is None:
        return ""
    why = e.note or "a constant vector or too few items"
    if e.diff != e.diff:
        return why if why.startswith("undefined") else f"undefined ({why})"
    if e.exact:
        return f"{e.diff:+.3f} (exact)"
    if any(v != v for v in e.ci90):
        return f"{e.diff:+.3f} (no interval: {why})"
    return f"{e.diff:+.3f} [{e.ci90[0]:+.3f}, {e.ci90[1]:+.3f}]"


def changes_text(r: Rung) -> str:
    """The answers that changed, of how many the reference had of each kind (changes.AnswerChanges.flips, compare's
    line too): ``20 answers changed: 3 fixed, 5 broken, 12 still wrong; 16 of 23 near ties flipped, 4 of 7
    decisive``, ``no answer changed (of 30: 23 near ties, 7 decisive)``; "" with no changes."""
    return "" if r.changes is None else r.changes.flips


def _rests(s: Standing) -> str:
    """What a verdict rests on: ``over 30 items``, ``over all 12 items of the task (exact)``, a rule's ``over 20
    items, the rule's verdict at look 1 of 2``."""
    over = f"over all {s.n:,} items of the task (exact)" if s.exact else f"over {s.n:,} items"
    return over + (f", the rule's verdict at {s.look}" if s.by_rule else "")


def _unsettled(s: Standing) -> str:
    """A rung that cannot tell yet: what it rests on, and what would settle it: a rule's next bound first (the step
    its run printed: the run grown by ``--resume --until-settled --max-items M``, or the rule's own next look), then
    the verdict's own figure (a rule's rung: the fixed-n verdict's, or the rule's estimate said to be its own:
    analysis.ladder._needed); a rule's rung whose fixed-n verdict is settled, that verdict instead of a figure."""
    rule = _rule_step(s)
    if s.reach is not None:  # the rule's advice says the figure, far beyond its next look (settled.Reach)
        return f"{s.quant} ({open_question(s.margin)} {_rests(s)}; {rule})"
    if s.fixed_n:
        these = "these " if s.fixed_n_n == s.n else ""  # the rule's items, else compare's common ones
        need = (f"settled at a fixed n over {these}{s.fixed_n_n:,} items: {s.fixed_n}, a verdict that does not "
                "account for the looks")
        need = f"{rule}; {need}" if rule else need
    elif s.items is None:
        need = rule or "no figure of the items that would settle it"
    elif s.items >= stats.MAX_ITEMS:
        need = "no number of items settles it: the difference sits on the margin"
        need = f"{rule}; at a fixed n, {need}" if rule else need
    else:
        need = f"~{s.items:,} items would settle it" + (" at a fixed n" if s.by_rule else "") + \
            (f" ({s.basis})" if s.basis else "")
        need = f"{rule}; {need}" if rule else need
    return f"{s.quant} ({open_question(s.margin)} {_rests(s)}; {need})"


def _rule_step(s: Standing) -> str:
    """A rule's next bound in words (settled.SettledVerdict.step's, shortened for the line; its options errors.opt's,
    rendered by the door that shows the line: `report`'s in the command line's flags); "" for none."""
    if not s.by_rule or not (s.next_look or s.max_items):
        return ""
    at = f"the rule's next look is at {s.next_look:,} items" if s.next_look else "the rule takes another look"
    if not s.max_items:
        return at
    if s.reach is not None:
        return s.reach.words("the rule's next look", lambda m: f"the run grown by {grown_by(m)}")
    return f"{at}: the run grown by {grown_by(s.max_items)}"


def open_question(margin: float | None) -> str:
    """What a rung that cannot tell yet leaves open, worded as the question it is (``whether within 0.02: not
    settled``, then what it rests on), never as a finding: the one wording of the choice line's ``cannot tell yet``
    rungs (text, markdown, JSON's ``line``, the HTML page's line under the table)."""
    return "not settled" if margin is None else f"whether within {margin:g}: not settled"


def kept_by(c: Choice) -> str:
    """What the kept rung was picked by, in the line's words (analysis.ladder.Choice.kept): ``the smallest file (98
    MB)`` when every rung shown as good records its file's size; else ``the smallest quant by its name (fewest bits;
    no file size recorded)``, or ``(fewest bits; Q4_0's file size not recorded)``; "" with none shown as good."""
    kept = c.kept
    if kept is None:
        return ""
    if c.by_size:
        return f"the smallest file ({kept.size / 1e6:.0f} MB)"
    good = c.having(*AS_GOOD)
    unsized = [s.quant for s in good if s.size is None]
    why = "no file size recorded" if len(unsized) == len(good) else \
        f"{', '.join(unsized)}'s file size not recorded" if len(unsized) == 1 else \
        f"the file sizes of {', '.join(unsized)} not recorded"
    return f"the smallest quant by its name (fewest bits; {why})"


def choice_text(c: Choice) -> str:
    """What the ladder's verdicts say about which quant to keep, and no more: of the quants shown as good as the
    reference, the smallest file, else the smallest quant by its name (:func:`kept_by`), its verdict, margin and
    items; or ``No quant is shown as good as F16 yet``; the rungs that cannot tell yet (the items each would need),
    those shown worse; the KLDs measured, as what they are."""
    where = f"{c.base} ({c.ladder})" if c.ladder else c.base
    on = f"({where} on {c.task}, {c.metric or 'no metric'})"
    kept = c.kept
    parts = [f"{kept.quant} is {kept_by(c)} shown as good as {c.reference} {on}: {kept.words} {_rests(kept)}"
             if kept else f"No quant is shown as good as {c.reference} yet {on}"]
    others = [s for s in c.having(*AS_GOOD) if s is not kept]
    if others:
        parts.append("also shown as good: " + ", ".join(f"{s.quant} ({s.words} {_rests(s)})" for s in others))
    if c.having(UNSETTLED):
        parts.append("cannot tell yet: " + ", ".join(_unsettled(s) for s in c.having(UNSETTLED)))
    if c.having(WORSE):
        parts.append("shown worse: " + ", ".join(f"{s.quant} ({s.words} {_rests(s)})" for s in c.having(WORSE)))
    if c.having(UNDEFINED):
        parts.append("cannot tell: " + ", ".join(f"{s.quant} ({s.note or 'the difference is undefined'})"
                                                  for s in c.having(UNDEFINED)))
    if c.having(""):
        parts.append("no common item: " + ", ".join(s.quant for s in c.having("")))
    if c.by_kld:
        parts.append(f"KLD from {c.reference} (how far the distributions moved, not a verdict): "
                     + ", ".join(f"{s.quant} {s.kld:.4f}" for s in c.by_kld))
    return "; ".join(parts)


def choice_lines(rungs: Sequence[Rung]) -> tuple[str, ...]:
    """:func:`choice_text` of every ladder of ``rungs`` (analysis.ladder.choices), for the lines under the table."""
    return tuple(choice_text(c) for c in choices(rungs))


def _standing_record(s: Standing) -> dict:
    return {"quant": s.quant, "run": s.run, "kind": s.kind or None, "words": s.words, "margin": s.margin, "n": s.n,
            "items_to_settle": s.items, "by_rule": s.by_rule, "look": s.look or None, "exact": s.exact,
            "kld_mean": s.kld, "next_look": s.next_look, "max_items": s.max_items, "size_bytes": s.size,
            "items_basis": s.basis or None,
            "fixed_n_settled": {"words": s.fixed_n, "n": s.fixed_n_n} if s.fixed_n else None}


def choice_record(c: Choice) -> dict:
    """:func:`choice_text` as plain data: ``smallest_as_good`` (a rung's verdict, or null: no quant is shown as good
    yet) and ``smallest_by`` (``file size``, ``name``: :func:`kept_by`; null with none), ``as_good``,
    ``cannot_tell_yet`` (each with ``items_to_settle``: compare's figure; a rule's rung, the line's: ``items_basis``
    where it is not the fixed-n verdict's, null with ``fixed_n_settled``, that verdict's words and items, where it is
    settled), ``worse``, ``cannot_tell``, ``no_common_item``, ``kld`` (the measured KLDs, lowest first: not a
    verdict) and ``line``; each rung's ``size_bytes`` (null: not recorded)."""
    kept = c.kept
    return {"reference": c.reference, "metric": c.metric or None,
            "smallest_as_good": None if kept is None else _standing_record(kept),
            "smallest_by": None if kept is None else "file size" if c.by_size else "name",
            "as_good": [_standing_record(s) for s in c.having(*AS_GOOD)],
            "cannot_tell_yet": [_standing_record(s) for s in c.having(UNSETTLED)],
            "worse": [_standing_record(s) for s in c.having(WORSE)],
            "cannot_tell": [_standing_record(s) for s in c.having(UNDEFINED)],
            "no_common_item": [s.quant for s in c.having("")],
            "kld": [{"quant": s.quant, "mean": s.kld} for s in c.by_kld],
            "line": choice_text(c)}


def model_text(r: Rung) -> str:
    """The rung's model: its base, and the folder of its ladder's runs where the base has several ladders on the
    task (analysis.ladder.plan)."""
    return f"{r.base} ({r.ladder})" if r.ladder else r.base


def marked(df: pd.DataFrame, rungs: Sequence[Rung]) -> pd.DataFrame:
    """:func:`frame`'s table with the reference rows' empty cells as ``-``: every row shows in every block of a table
    split to fit (texttable.fit)."""
    out = df.copy()
    for k, r in enumerate(rungs):
        if r.is_reference:
            out.iloc[k] = [("-" if v == "" else v) for v in out.iloc[k]]
    return out


def frame(rungs: Sequence[Rung]) -> pd.DataFrame:
    """A row per rung; with a rung a rule judged, the fixed-n verdict beside the rule's (:data:`FIXED_N_COLUMN`)."""
    rows = []
    judged = any(r.settled is not None for r in rungs)
    for r in rungs:
        e, k = r.verdict, r.kld
        metric = '' if e is None else ' (' + e.metric + ')'
        rows.append({
            "model": model_text(r), "task": r.task, "quant": r.quant, "run": r.run, "n": str(r.n or ""),
            "verdict": f"{verdict_text(r)}{metric}",
            **({FIXED_N_COLUMN: f"{fixed_n_text(r)}{metric}" if r.settled is not None else ""} if judged else {}),
            "difference [90% CI]": difference_text(e),
            "same prediction": _num(r.same_pred), "label KL": _num(r.kl_mean, 4),
            "KLD mean [95% CI]": "" if k is None else f"{k.interval()} {k.covers(r.n)}",
            "KLD p99": "" if k is None else _num(k.p99, 4), "same top": "" if k is None else _num(k.same_top),
            "answers changed": changes_text(r),
            "size MB": "" if r.size is None else f"{r.size / 1e6:.0f}", "items/s": _num(r.items_per_s, 2)})
    cols = list(COLUMNS)
    if judged:
        cols.insert(cols.index("verdict") + 1, FIXED_N_COLUMN)
    return pd.DataFrame(rows, columns=cols)


def _verdict(r: Rung) -> dict | None:
    """Compare's verdict as plain data (its line, like_line, exact)."""
    e = r.verdict
    return None if e is None else {**asdict(e), "exact": e.exact, "line": e.line, "like_line": e.like_line or None}


def _judged(r: Rung) -> dict:
    """A rung a rule judged: ``verdict`` the rule's (kind, words, the run's line), ``sequential`` its look
    (settled.SettledVerdict.to_json), ``fixed_n`` compare's verdict beside it (:data:`FIXED_N`); else nothing."""
    s = r.settled
    if s is None or r.is_reference:
        return {}
    return {"verdict": {"kind": s.verdict, "metric": None if r.verdict is None else r.verdict.metric,
                        "margin": s.look.margin, "words": s.words, "line": s.line, "like_line": None},
            "sequential": s.to_json(), "fixed_n": {**(_verdict(r) or {}), "words": fixed_n_text(r), "about": FIXED_N}}


def records(rungs: Sequence[Rung]) -> list[dict]:
    """Plain data: every field, the verdict's line and the changes' counts and decisive ids, beside the reference's
    near ties and decisive answers on the items compared (``reference_near_ties``, ``reference_decisive``: null where
    not known; ``line``: :func:`changes_text`); a rung a rule judged, the rule's verdict (``verdict``, ``sequential``)
    and compare's beside it, at the rule's margin (``fixed_n``); each ladder's reference row, what the ladder's verdicts
    say about which quant to keep (``choice``: :func:`choice_record`, the HTML page's line under the table)."""
    out = []
    chosen = iter(choices(rungs))
    for r in rungs:
        ch = r.changes
        choice = {"choice": choice_record(next(chosen))} if r.is_reference else {}
        out.append({"base": r.base, "ladder": r.ladder or None, "task": r.task, "run": r.run, "quant": r.quant, "reference": r.reference or None,
                    "bits_per_weight": r.bits, "size_bytes": r.size, "items_per_s": r.items_per_s, "n": r.n,
                    "same_pred": r.same_pred,
                    "kl_mean": r.kl_mean, "kld": None if r.kld is None else {
                        key: v for key, v in r.kld.record(r.n).items()
                        if key in ("mean", "median", "p99", "p99_9", "max", "same_top", "ci95", "n_tokens", "n_items",
                                   "n_units", "se_token", "ci_method", "covers", "text")},
                    "verdict": _verdict(r),
                    "verdict_text": verdict_text(r), "difference_text": difference_text(r.verdict),
                    "changed": None if ch is None else {
                        "n": len(ch.changed), "near_ties": len(ch.near_ties), "decisive": [d.id for d in ch.decisive],
                        "reference_near_ties": r.ref_near_ties, "reference_decisive": r.ref_decisive,
                        "threshold_nats": ch.threshold, "line": changes_text(r)}, **_judged(r), **choice})
    return out


def page_records(rungs: Sequence[Rung]) -> list[dict]:
    """:func:`records` for the HTML page, whose table fits a 1400 px window: a verdict cell says :func:`short_verdict`
    (``verdict_short``, where it is shorter), the whole verdict (``verdict_text``: a rung a rule judged, compare's
    beside the rule's, said not to account for the looks) listed under the table (report.js)."""
    page = [{**d, "base": model_text(r), **({"verdict_short": short_verdict(r)} if r.settled and not r.is_reference
                                             else {})} for d, r in zip(records(rungs), rungs)]
    return [{**d, "verdict_text": f"{d['verdict_text']}; {FIXED_N}: {d['fixed_n']['words']}"} if "fixed_n" in d else d
            for d in page]
