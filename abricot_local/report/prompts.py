""""Does the prompt matter?" (analysis/prompts.py) as the report shows it: sections of tables for
the text and markdown report (:func:`sections`), plain data for its JSON (:func:`to_json`) and
for the HTML page (:func:`page_data`: the same tables, every cell a string). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from abricot_local.analysis.prompts import Prompts, PromptStudy

TITLE = "Does the prompt matter?"


@dataclass(frozen=True)
class Block:
    """One table of a study, with the lines of prose after it."""

    title: str
    frame: pd.DataFrame
    lines: tuple[str, ...] = ()


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return ""
    return "nan" if v != v else f"{v:.{digits}f}"


def _signed(v: float) -> str:
    return "nan" if v != v else f"{v:+.3f}"


def _diff_ci(c) -> str:
    """A paired difference and its 95% CI; "no interval" where it has none (compare.compare_metric's rules)."""
    lo, hi = c.ci
    return f"{_signed(c.diff)} " + ("no interval" if lo != lo else f"[{_signed(lo)}, {_signed(hi)}]")


def _p(p: float) -> str:
    return "n/a" if p != p else f"{p:.3g}"


def _ci(ci) -> str:
    return f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else ""


def _ranking(ordered: list[tuple[str, float]]) -> str:
    """``a > b = c``: the runs best first, a tie (the same value) as ``=``."""
    text = ordered[0][0]
    for (_, before), (lab, v) in zip(ordered, ordered[1:]):
        text += (" = " if v == before else " > ") + lab
    return text


def verdict(s: PromptStudy) -> str:
    """One line: whether the runs' ranking holds on every prompt."""
    if len(s.runs) < 2:
        return f"{s.task} {s.metric}: one run, so no ranking to compare across {len(s.prompts)} prompts"
    if s.holds:
        return f"{s.task} {s.metric}: the ranking of the {len(s.runs)} runs holds on every prompt " \
               f"({', '.join(s.prompts)})"
    sig = sum(f.significant(s.alpha) for f in s.flips)
    pairs = len({(f.a, f.b) for f in s.flips})
    return (f"{s.task} {s.metric}: the ranking changes with the prompt: {pairs} pair(s) of runs flip order "
            f"({sig} of {len(s.flips)} flip(s) significant on either prompt, Holm-adjusted p < {s.alpha:g})")


def blocks(s: PromptStudy) -> list[Block]:
    """A study's tables: per run its metric per prompt, mean and spread; the paired tests
    between prompts per run; per prompt the ranking and the paired tests between runs; flips, tau."""
    head = f"{TITLE} {s.task} {s.metric} on {len(s.prompts)} prompts ({', '.join(s.prompts)})"
    rows = [{"run": r.run, **{v.prompt: _num(v.value) + _ci(v.ci) for v in r.values}, "mean": _num(r.mean),
             "spread (max-min)": _num(r.spread)} for r in s.runs]
    out = [Block(head + ": value [95% CI] as recorded", pd.DataFrame(rows), (verdict(s),))]
    pairs = [{"run": p.run, "prompts": f"{c.a} - {c.b}", "n": c.n,
              "difference [95% CI]": _diff_ci(c),
              "test": c.test or "-", "p (Holm)": _p(c.p_holm)}
             for r in s.runs for p in r.pairs for c in (p.comparison,)]
    if pairs:
        out.append(Block(f"{s.task} {s.metric}: each run's prompts paired over the items both scored (same id)",
                         pd.DataFrame(pairs)))
    if len(s.runs) >= 2:
        value = {(r.run, v.prompt): v.value for r in s.runs for v in r.values}
        rank = [{"prompt": p, "ranking (best first)": _ranking([(lab, value[(lab, p)]) for lab in order])}
                for p, order in s.rankings]
        tests = [{"prompt": t.prompt, "pair": f"{c.a} vs {c.b}", "n": c.n,
                  "a - b [95% CI]": _diff_ci(c),
                  "test": c.test or "-", "p (Holm)": _p(c.p_holm)}
                 for t in s.tests for c in (t.comparison,)]
        lines = [f"Kendall's tau {t.x} vs {t.y}: {_num(t.tau, 2)} (p {_p(t.p)}, {t.n} runs)" for t in s.taus]
        out.append(Block(f"{s.task} {s.metric}: the runs' ranking on each prompt", pd.DataFrame(rank), tuple(lines)))
        if tests:
            out.append(Block(f"{s.task} {s.metric}: paired tests per prompt (items both runs scored alike; "
                             "Holm over the pairs of each prompt)", pd.DataFrame(tests)))
        flips = [{"pair": f"{f.a} vs {f.b}", "prompts": f"{f.x} / {f.y}",
                  "a - b": f"{_signed(f.diff_x)} / {_signed(f.diff_y)}", "p (Holm)": f"{_p(f.p_x)} / {_p(f.p_y)}",
                  "significant": "yes" if f.significant(s.alpha) else "no"} for f in s.flips]
        if flips:
            out.append(Block(f"{s.task} {s.metric}: pairs whose order flips between two prompts", pd.DataFrame(flips)))
    if s.notes:
        out[-1] = Block(out[-1].title, out[-1].frame, (*out[-1].lines, *(f"note: {n}" for n in s.notes)))
    return out


def sections(p: Prompts) -> list[Block]:
    out = [b for s in p.studies for b in blocks(s)]
    if p.notes and out:
        out[-1] = Block(out[-1].title, out[-1].frame, (*out[-1].lines, *(f"note: {n}" for n in p.notes)))
    return out


def _json_float(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _comparison(c) -> dict:
    return {"a": c.a, "b": c.b, "n": c.n, "value_a": _json_float(c.value_a), "value_b": _json_float(c.value_b),
            "diff": _json_float(c.diff), "ci95": [_json_float(x) for x in c.ci], "test": c.test or None,
            "p": _json_float(c.p), "p_holm": _json_float(c.p_holm), "note": c.note or None}


def to_json(p: Prompts) -> dict:
    """The studies as plain data (NaN as null)."""
    return {"studies": [{
        "task": s.task, "metric": s.metric, "prompts": list(s.prompts), "holds": s.holds, "verdict": verdict(s),
        "alpha": s.alpha,
        "runs": [{"run": r.run, "mean": _json_float(r.mean), "spread": _json_float(r.spread),
                  "sd": _json_float(r.sd),
                  "values": [{"prompt": v.prompt, "key": v.key, "value": _json_float(v.value),
                              "ci95": list(v.ci) if v.ci else None, "n": v.n} for v in r.values],
                  "prompt_pairs": [_comparison(x.comparison) for x in r.pairs]} for r in s.runs],
        "rankings": {prompt: list(order) for prompt, order in s.rankings},
        "tests": [{"prompt": t.prompt, **_comparison(t.comparison)} for t in s.tests],
        "flips": [{"a": f.a, "b": f.b, "x": f.x, "y": f.y, "diff_x": f.diff_x, "diff_y": f.diff_y,
                   "p_x": _json_float(f.p_x), "p_y": _json_float(f.p_y), "significant": f.significant(s.alpha)}
                  for f in s.flips],
        "kendall_tau": [{"x": t.x, "y": t.y, "tau": _json_float(t.tau), "p": _json_float(t.p), "n": t.n}
                        for t in s.taus],
        "notes": list(s.notes),
    } for s in p.studies], "notes": list(p.notes)}


def page_data(p: Prompts) -> list[dict]:
    """The HTML page's section: each table as its columns and rows of strings (shown with textContent)."""
    return [{"title": b.title.removeprefix(TITLE + " "), "columns": [str(c) for c in b.frame.columns],
             "rows": [[str(v) for v in row] for row in b.frame.itertuples(index=False)], "lines": list(b.lines)}
            for b in sections(p)] + ([{"title": "", "columns": [], "rows": [], "lines": [f"note: {n}"
                                                                                      for n in p.notes]}]
                                     if p.notes and not p.studies else [])


def render(p: Prompts, fmt: str) -> str:
    """The studies as aligned text (within 120 columns) or markdown; "" when there is none."""
    from abricot_local.report.safe import markup, visible
    from abricot_local.report.texttable import fit, grid, wrap

    parts = []
    for b in sections(p):
        if fmt == "markdown":
            body = grid(b.frame, True) + "".join(f"\n\n{markup(line)}" for line in b.lines)
            parts.append(f"### {markup(b.title)}\n\n{body}")
        else:
            table, _ = fit(b.frame, keys=1, wrap_cols=tuple(b.frame.columns[:1]))
            parts.append("\n".join([wrap(visible(b.title)), "", table, *(wrap(visible(x), indent="  ")
                                                                          for x in b.lines)]))
    return "\n\n".join(parts)
