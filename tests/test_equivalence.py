"""Issue 31, items 1 and 2: is a run as good as its reference (equivalence with a margin), and
which answers changed (near ties or decisive). On fake-backend runs made to differ by a known
amount, every verdict is checked against a bootstrap, a margin and a sample size computed here;
`run --quants` against registry entries of the fake backend; `check` on another kernel path."""

from __future__ import annotations

import json
import re
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as st

from abricot_local.analysis import compare as cmp
from abricot_local.analysis.loading import load_run
from abricot_local.analysis import equivalence as eq
from abricot_local.analysis import stats
from abricot_local.analysis.changes import NEAR_TIE, top_two_margin
from abricot_local.analysis.paired_exact import MAX_CHANGED, paired_set_ci, restricted_paired_set_ci
from abricot_local.cli import cli
from abricot_local.errors import UsageError
from abricot_local.models.quants import ladder
from abricot_local.models.registry import load_registry
from abricot_local.record import Sample
from abricot_local.report.comparison import render
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE, rewrite_run
from invented_data import write_discotex

N = 100  # DISCOTEX items of the fake runs


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, discotex_dir):
    """The fake backend on 100 DISCOTEX items, and on the invented ABRICOT rows (abricot_abs)."""
    root = tmp_path_factory.mktemp("eq")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir,
                   "--sample", N, "--n-ctx", 8192, "--out", root / "d")
        assert r.exit_code == 0, r.output
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
                   "--out", root / "a")
        assert r.exit_code == 0, r.output
    return {"d": root / "d", "a": root / "a", "root": root}


def changed(view: cmp.Run, label: str, change) -> cmp.Run:
    tasks = tuple(t.with_samples(Sample.from_dict(change(k, s.to_dict())) for k, s in enumerate(t.samples))
                  for t in view.run_tasks)
    return replace(view, path=view.path + "-" + label, label=label, base=label, run_tasks=tasks)  # another model


def bare(label: str, *, quant: str = "", base: str = "", sha: str | None = None) -> cmp.Run:
    """A run of no task: what a reference or a pair's kind is read from (its model, quant and base)."""
    from abricot_local.record import Model, Record

    return cmp.Run(f"/runs/{label}", Record(schema_version=1, model=Model(name=label, sha256=sha), tasks={}),
                   quant=quant, base=base)


def answer(s: dict, choice: int, gap: float = 1.0) -> dict:
    """The sample answering ``choice``, ``gap`` nats ahead of its best other choice."""
    lp = list(s["logprobs"])
    lp[choice] = max(v for k, v in enumerate(lp) if k != choice) + gap
    return {**s, "logprobs": lp, "pred": choice}


def own_ci90(ca, cb, seed=1234, n_boot=1000):
    """The 90% percentile interval of mean(ca) - mean(cb), the items drawn once per resample."""
    ca, cb = np.asarray(ca, float), np.asarray(cb, float)
    idx = np.random.default_rng(seed).integers(0, len(ca), size=(n_boot, len(ca)))
    d = ca[idx].mean(axis=1) - cb[idx].mean(axis=1)
    return tuple(np.percentile(d, [5, 95]))


def in_compare_order(samples):
    """compare matches items on (id, SHA-256 of the context) and takes them in that order."""
    import hashlib

    return sorted(samples, key=lambda s: (str(s.get("id")), hashlib.sha256(s.get("context").encode()).hexdigest()))


def own_kind(diff, lo, hi, m):
    """compare's verdict, written here: above +M is better by more than M, the mirror of worse."""
    if lo > -m:
        return "equivalent" if hi < m else "better" if lo > m else "not worse"
    return "worse" if hi < -m else "cannot tell yet"


def connor_n(psi, d, za=st.norm.isf(0.05), zb=st.norm.ppf(0.80)):
    """Connor's (1987) paired sample size, one-sided 5% and 80% power: the items a difference d needs."""
    psi = max(psi, d)
    return (za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / (d * d)


@pytest.mark.parametrize("moved, margin", [(0, None), (-12, None), (40, None), (-4, None), (-4, 0.1), (-2, None)])
def test_accuracy_verdicts_read_the_tasks_own_interval_against_the_margin(runs, moved, margin):
    """Issue 47: the paired accuracy interval for the task's own items is paired_exact's (on DISCOTEX's 1,600 items:
    the restricted exact interval while at most MAX_CHANGED answers changed, else Tango's score interval narrowed by
    the finite-population correction); Tango's for items like these is kept beside it."""
    ref = load_run(runs["d"])
    samples = [s.to_dict() for s in ref.task("discotex").samples]
    right = [k for k, s in enumerate(samples) if s["pred"] == s["gold"]]
    wrong = [k for k, s in enumerate(samples) if s["pred"] != s["gold"]]
    flip = set(right[:-moved] if moved < 0 else wrong[:moved])

    def change(k, s):
        if k not in flip:
            return s
        return answer(s, s["gold"] if moved > 0 else (s["gold"] + 1) % len(s["logprobs"]))

    other = changed(ref, "other", change)
    c = cmp.compare([ref, other], margin=margin)
    (e,) = [e for e in c.equivalence if e.metric == "accuracy"]
    assert (e.other, e.reference, e.task, e.n) == ("other", ref.label, "discotex", N)
    total = c.totals["discotex"]  # the --sample 100 run's task, counted from the data it recorded
    assert e.total == total and total >= 1000 and not e.exact
    assert e.diff == pytest.approx(moved / N) and e.identical == (moved == 0)
    fixed, broke = (len(flip), 0) if moved > 0 else (0, len(flip))  # other - reference: b = fixed, c = broken
    lo, hi = paired_set_ci(fixed, broke, N, total, level=0.90)
    assert e.ci90 == pytest.approx((lo, hi)) and lo < e.diff < hi and hi - lo > 0
    assert (lo, hi) == (restricted_paired_set_ci(fixed, broke, N, total) if fixed + broke <= MAX_CHANGED else
                        stats.paired_score_ci(fixed, broke, N, level=0.90, factor=(total - N) / (total - 1)))
    assert e.like_ci90 == pytest.approx(stats.paired_score_ci(fixed, broke, N, level=0.90))
    narrowed = stats.paired_score_ci(fixed, broke, N, level=0.90, factor=(total - N) / (total - 1))
    assert e.like_ci90[0] < narrowed[0] and narrowed[1] < e.like_ci90[1]  # items like these: wider than Tango's own
    m = 0.02 if margin is None else margin  # DISCOTEX declares 0.02 for accuracy
    assert e.margin == m and e.kind == own_kind(e.diff, lo, hi, m)
    line = e.line
    assert line.startswith(f"other vs {ref.label}, discotex accuracy: ")
    assert f"(difference {moved / N:.3f}, 90% CI [{lo:.3f}, {hi:.3f}] for the task's {total:,} items, {N} compared)" \
        in line
    assert e.lines[1].startswith("items like these (whether it generalises): 90% CI ")
    if e.kind == "cannot tell yet" and moved == -2:  # the difference is -0.02 = -M: no number of items settles it
        assert e.items == stats.MAX_ITEMS and "no number of items settles it" in line
    elif e.kind == "cannot tell yet":
        def like_settles(k: int) -> bool:  # Tango's interval over k items like these, the answers changing as seen
            lo_k, hi_k = stats.paired_score_ci(fixed * k / N, broke * k / N, k, level=0.90)
            return own_kind(e.diff, lo_k, hi_k, m) != "cannot tell yet"

        assert like_settles(e.like_items) and not like_settles(e.like_items - 1)
        assert f"about {e.like_items:,} items like these would settle it" in e.lines[1]
        assert N < e.items <= total
        assert f"about {e.items:,} of the task's {total:,} items would settle it at this discordance" in line
    else:
        assert e.items is None
    # 100 unchanged answers do not show equivalence within 0.02: about 0.025 either way is still possible
    expected = {0: "cannot tell yet", -12: "worse", 40: "better", -4: "cannot tell yet", -2: "cannot tell yet"}
    if moved in expected and margin is None:
        assert e.kind == expected[moved]
    if (moved, margin) == (-4, 0.1):
        assert e.kind == "equivalent" and "equivalent within 0.1 " in line
    if e.kind == "better":  # 40 answers fixed: the interval above +M, and the line says so
        assert lo > m and f"discotex accuracy: better by more than {m:g} (difference" in line
        assert e.like_kind == "better" and e.lines[1].endswith(f": better by more than {m:g}")


def test_a_correlation_s_verdict_is_its_paired_bootstrap_against_the_task_s_margin(runs):
    """Every row of the invented ABRICOT file scored: the difference is the task's own (exact); the bootstrap's
    interval answers for items like these, on a line of its own."""
    ref = load_run(runs["a"])
    samples = ref.task("abricot_abs").samples
    other = changed(ref, "other", lambda k, s: answer(s, (s["pred"] + 1) % 5) if k % 3 == 0 else s)
    c = cmp.compare([ref, other])
    (e,) = [e for e in c.equivalence if e.metric == "pearson"]
    task = make_task("abricot_abs", TaskOptions.from_config(dict(ref.task("abricot_abs").config)))
    assert task.margins["pearson"] == e.margin == 0.05
    x = {m.name: m for m in task.metric_inputs(in_compare_order(other.task("abricot_abs").samples))}["pearson"]
    y = {m.name: m for m in task.metric_inputs(in_compare_order(samples))}["pearson"]
    xa, ya, xb, yb = (np.asarray(v, float) for v in (x.x, x.y, y.x, y.y))
    idx = np.random.default_rng(1234).integers(0, len(xa), size=(1000, len(xa)))
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.array([np.corrcoef(xa[i], ya[i])[0, 1] - np.corrcoef(xb[i], yb[i])[0, 1] for i in idx])
    lo, hi = np.percentile(d[~np.isnan(d)], [5, 95])
    diff = np.corrcoef(xa, ya)[0, 1] - np.corrcoef(xb, yb)[0, 1]
    assert e.diff == pytest.approx(diff) and e.total == len(xa) == e.n and e.exact
    assert e.ci90 == (e.diff, e.diff) and e.kind == own_kind(diff, diff, diff, 0.05) != "cannot tell yet"
    assert f"(difference {e.diff:.3f} on all {len(xa)} items of the task: exact)" in e.line
    assert e.like_ci90 == pytest.approx((lo, hi)) and e.like_kind == own_kind(diff, lo, hi, 0.05)
    if e.like_kind == "cannot tell yet":  # the interval's spread, scaled as 1/sqrt(n)
        se = (hi - lo) / (2 * st.norm.isf(0.05))
        want = len(xa) * ((st.norm.isf(0.05) + st.norm.ppf(0.8)) * se / abs(e.diff + 0.05)) ** 2
        assert abs(e.like_items - math.ceil(want)) <= 1
        assert f"this task cannot settle 0.05 (about {e.like_items:,} items would; it holds {len(xa)})" in e.lines[1] \
            if e.like_items > len(xa) else f"about {e.like_items:,} items like these" in e.lines[1]


def test_the_reference_is_the_higher_precision_quant_else_the_first_run_or_the_one_named():
    def view(label, quant, base):
        return bare(label, quant=quant, base=base)

    q4, q8, f16, other = (view("m-q4", "Q4_K_M", "M"), view("m-q8", "Q8_0", "M"), view("m-f16", "F16", "m"),
                          view("x", "", ""))
    assert eq.references([q4, q8, other]) == (("m-q4", "m-q8"), ("x", "m-q4"))
    assert eq.references([q4, f16, q8]) == (("m-q4", "m-f16"), ("m-q8", "m-f16"))  # base matched in any case
    assert eq.references([other, q4]) == (("m-q4", "x"),)
    assert eq.references([q4, q8, other], "x") == (("m-q4", "x"), ("m-q8", "x"))
    assert eq.references([q4, q8], "/runs/m-q4") == (("m-q8", "m-q4"),)
    with pytest.raises(UsageError, match="reference=nope: not one of the runs compared; .*m-q4, m-q8"):
        eq.references([q4, q8], "nope")


def test_a_changed_answer_is_fixed_broken_or_still_wrong_and_a_pair_says_what_it_compares():
    from abricot_local.analysis.changes import compared, near_tie_note, outcome

    assert [outcome(2, 0, 2), outcome(2, 2, 0), outcome(2, 0, 1)] == ["fixed", "broken", "still_wrong"]

    def view(label, base, sha=None, quant=None):
        return bare(label, quant=quant or "", base=base, sha=sha)

    assert compared(view("a", "gemma", "s1", "Q8_0"), view("b", "gemma", "s1", "Q8_0")) == "one model"
    assert compared(view("a", "gemma", "s1", "Q8_0"), view("b", "gemma", "s2", "Q4_0")) == "quants"
    assert compared(view("a", "gemma", "s1"), view("b", "smollm2", "s2")) == "two models"
    assert compared(view("fake", "fake"), view("fake", "fake")) == "one model"  # no file: the same model name
    assert compared(view("a", "gemma", "s1", "Q8_0"), view("b", "gemma", "s2", "Q8_0")) == "two models"
    assert near_tie_note(["one model"]) == "kernels alone can flip them"
    assert near_tie_note(iter(["two models"])) == "close calls for the reference"
    assert "kernels alone" in near_tie_note(["two models", "quants"])


def test_changed_answers_are_near_ties_or_decisive_by_the_reference_s_margin(runs):
    ref = load_run(runs["d"])
    samples = [s.to_dict() for s in ref.task("discotex").samples]
    margins = [top_two_margin(s["logprobs"]) for s in samples]
    # margins computed here: the gap between the two highest log-probs
    assert margins == pytest.approx([float(np.diff(np.sort(s["logprobs"])[-2:])[0]) for s in samples])
    ties = [k for k, m in enumerate(margins) if m < NEAR_TIE][:5]
    clear = [k for k, m in enumerate(margins) if m >= NEAR_TIE][:2]
    flip = set(ties + clear)
    other = changed(ref, "other", lambda k, s: answer(s, (s["pred"] + 1) % 5) if k in flip else s)
    c = cmp.compare([ref, other])
    (ch,) = c.changes
    assert (ch.reference, ch.other, ch.n) == (ref.label, "other", N)
    # against the gold answer: wrong -> right, right -> wrong, one wrong answer -> another
    kinds = {samples[k]["id"]: "fixed" if (samples[k]["pred"] + 1) % 5 == samples[k]["gold"] else
             "broken" if samples[k]["pred"] == samples[k]["gold"] else "still_wrong" for k in flip}
    assert {a.id: a.outcome for a in ch.changed} == kinds and ch.compared == "two models"  # fake vs other
    fixed, broken, wrong = (list(kinds.values()).count(x) for x in ("fixed", "broken", "still_wrong"))
    assert ch.summary == (f"7 answers changed: {fixed} fixed, {broken} broken, {wrong} still wrong; "
                          f"{len(ties)} near ties, {len(clear)} decisive") and len(ties) == 5
    assert {d.id: d.margin for d in ch.decisive} == pytest.approx({samples[k]["id"]: margins[k] for k in clear})

    out = render(c)
    assert f"other vs {ref.label} (two models), discotex: 7 answers changed: {fixed} fixed" in out
    flat = " ".join(out.split())
    assert "close calls for the reference" in flat and "kernels alone" not in flat
    assert all(samples[k]["id"] in out.split("decisive:", 1)[1] for k in clear)
    doc = json.loads(render(c, "json"))
    (j,) = doc["answers_changed"]
    assert (j["changed"], j["near_ties"], j["decisive"], j["threshold_nats"]) == (7, 5, 2, NEAR_TIE)
    assert (j["fixed"], j["broken"], j["still_wrong"], j["compared"]) == (fixed, broken, wrong, "two models")
    assert {x["id"] for x in j["items"] if x["decisive"]} == {samples[k]["id"] for k in clear}
    assert {x["id"]: x["outcome"] for x in j["items"]} == kinds
    assert all(x["gold"] == samples[k]["gold"] for k in flip for x in j["items"] if x["id"] == samples[k]["id"])
    assert [x["kind"] for x in doc["equivalence"]] and doc["equivalence"][0]["line"].startswith("other vs ")
    wider = cmp.compare([ref, other], near_tie=100.0).changes[0]
    assert not wider.decisive and len(wider.near_ties) == 7


def test_compare_cli_margin_reference_and_near_tie(runs, tmp_path):
    d = runs["d"]
    b = rewrite_run(d, tmp_path / "b", "fake-b", lambda t, s: answer(s, s["gold"]) if s["id"].endswith("0") else s)
    r = invoke("compare", d, b, "--format", "json", "--margin", "0.5", "--reference", b)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {(e["other"], e["reference"], e["margin"]) for e in doc["equivalence"]} == {("fake", "fake-b", 0.5)}
    assert doc["margin"] == 0.5 and all(e["kind"] == "equivalent" for e in doc["equivalence"])
    import abricot_local as al

    frame = al.compare(d, b).changes()  # the API: one row per changed answer, its gold and outcome
    assert list(frame.columns) == ["reference", "run", "compared", "task", "id", "gold", "pred_reference", "pred_run",
                                   "outcome", "margin", "near_tie"]
    assert len(frame) and set(frame.outcome) == {"fixed"} and (frame.pred_run == frame.gold).all()
    assert set(frame.compared) == {"two models"}
    r = invoke("compare", d, b)
    assert "fake-b vs fake, discotex accuracy: " in r.stdout and "answers changed: " in r.stdout.lower()
    assert "Is it as good?" in r.stdout and max(map(len, r.stdout.splitlines())) <= 120
    md = invoke("compare", d, b, "--format", "markdown").stdout
    assert "### Is it as good?" in md and "- fake-b vs fake (two models), discotex: " in md
    assert re.search(r"discotex: \d+ answers changed: \d+ fixed, 0 broken, 0 still wrong", md)  # answers set to gold
    bad = invoke("compare", d, b, "--reference", "nowhere")
    assert bad.exit_code != 0 and "--reference nowhere: not one of the runs compared" in bad.output
    bad = invoke("compare", d, b, "--margin", "0")
    assert bad.exit_code != 0 and "--margin must be a finite number more than 0" in bad.output


# -- run --quants ---------------------------------------------------------------------------------
LADDER = "".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\nn_ctx = 8192\n\n'
                 for k, q in (("q8", "Q8_0"), ("q5", "Q5_K_M"), ("q4", "Q4_K_M")))


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(LADDER + '[loner]\nsource = "synthetic"\nbackend = "fake"\n', encoding="utf-8")
    return path


def test_quants_are_the_registry_s_entries_of_one_base(models):
    reg = load_registry(models)
    assert ladder("tiny-q8", ("Q4_K_M", "q5_k_m", "Q8_0"), reg) == ("tiny-q4", "tiny-q5", "tiny-q8")
    assert ladder("Tiny", ("Q8_0",), reg) == ("tiny-q8",)  # the base itself
    with pytest.raises(UsageError, match=r"the registry has no Q3_K_M of Tiny; it has Q8_0, Q5_K_M, Q4_K_M"):
        ladder("tiny-q4", ("Q3_K_M",), reg)
    with pytest.raises(UsageError, match="names no `base`"):
        ladder("loner", ("Q8_0",), reg)
    with pytest.raises(UsageError, match="neither a registry alias nor a registry `base`"):
        ladder("nothing-like-it", ("Q8_0",), reg)
    shipped = load_registry()  # the shipped models.toml's real quants
    assert ladder("smollm2-135m-q8", ("Q4_K_M", "Q4_1", "Q8_0"), shipped) == (
        "smollm2-135m-q4", "smollm2-135m-pypi", "smollm2-135m-q8")
    assert ladder("mistral-7b-q4", ("Q4_K_M", "Q8_0"), shipped) == ("mistral-7b-q4", "mistral-7b-q8")  # same file
    with pytest.raises(UsageError, match="files of Mistral-7B-Instruct-v0.3 .*give the alias"):
        ladder("Mistral-7B-Instruct-v0.3", ("Q4_K_M",), shipped)


def test_run_quants_runs_the_ladder_and_report_draws_it(models, tmp_path, discotex_dir):
    data = write_discotex(tmp_path / "d", 10)  # 20 items
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert [m["model"] for m in plan["models"]] == ["tiny-q4", "tiny-q8"]
    bad = invoke("run", "tiny-q8", "--models", models, "--quants", "Q2_K", "--dry-run")
    assert bad.exit_code != 0 and "it has Q8_0, Q5_K_M, Q4_K_M" in bad.output
    out = tmp_path / "ladder"
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--out", out)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["tiny-q4", "tiny-q8"] and "Quant ladder" in r.stdout
    # a third quant made to differ by a known amount: 3 of the 20 answers right that were wrong
    fixed = []

    def better(task, s):
        if s["pred"] != s["gold"] and len(fixed) < 3:
            fixed.append(s["id"])
            return answer(s, s["gold"], 2.0)
        return s

    q5 = rewrite_run(out / "tiny-q4", out / "tiny-q5", "tiny-q5", better)
    rec = json.loads((q5 / "results.json").read_text())
    rec["model"]["alias"] = "tiny-q5"  # the registry entry it stands for
    (q5 / "results.json").write_text(json.dumps(rec))
    doc = json.loads(invoke("report", out, "--models", models, "--table", "quant", "--format", "json").stdout)
    rows = {r["quant"]: r for r in doc["quant_ladder"]}
    assert rows["Q8_0"]["reference"] is None and rows["Q8_0"]["verdict_text"] == "reference"
    assert rows["Q8_0"]["n"] == 20 and rows["Q4_K_M"]["n"] == 20  # the reference's own items; each rung's shared
    assert [r["quant"] for r in doc["quant_ladder"]] == ["Q8_0", "Q5_K_M", "Q4_K_M"]
    q4, q5 = rows["Q4_K_M"], rows["Q5_K_M"]
    assert q4["verdict"]["kind"] == "equivalent" and q4["same_pred"] == 1.0 and q4["kl_mean"] == 0.0
    assert q5["verdict"]["diff"] == pytest.approx(3 / 20) and q5["changed"]["n"] == 3
    # every item compared, 3 of 20 more right: better by more than the margin, not merely not worse
    assert q5["verdict"]["kind"] == "better" and q5["verdict_text"] == "better by more than 0.02, exact"
    assert "better by more than 0.02 (difference 0.150 on all 20 items of the task: exact)" in q5["verdict"]["line"]
    assert q5["same_pred"] == pytest.approx(17 / 20) and q5["kl_mean"] > 0
    rec = json.loads((out / "tiny-q4" / "results.json").read_text())["tasks"]["discotex"]
    assert q4["items_per_s"] == pytest.approx(rec["scored_now"] / rec["seconds"])
    text = invoke("report", out, "--models", models, "--table", "quant").stdout
    assert "Quant ladder" in text and "equivalent within 0.02" in text and "better by more than 0.02, exact" in text
    page = invoke("report", out, "--models", models, "--format", "html").stdout  # the HTML page's ladder
    data = json.loads(page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0])
    assert {r["quant"]: r["verdict_text"] for r in data["ladder"]}["Q5_K_M"] == "better by more than 0.02, exact"


# -- check on another kernel path ------------------------------------------------------------------
def test_check_says_whether_the_answers_that_moved_were_near_ties(tmp_path):
    import shutil

    data = write_discotex(tmp_path / "d", 10)
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output

    def edited(name, gaps):  # the recorded answers moved to another choice `gap` nats ahead, another kernel path
        dst = shutil.copytree(tmp_path / "run", tmp_path / name)
        doc = json.loads((dst / "results.json").read_text())
        doc["provenance"]["kernels"]["build"] = "native"
        (dst / "results.json").write_text(json.dumps(doc))
        path = dst / "samples-discotex.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        lines = [answer(s, (s["pred"] + 1) % 5, gaps[k]) if k in gaps else s for k, s in enumerate(lines)]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return dst, [lines[k]["id"] for k in gaps]

    run, _ = edited("ties", {0: 0.1, 1: 0.2})
    doc = json.loads(invoke("check", run, "--json").stdout)
    (c,) = doc["answers_changed"]
    assert (c["changed"], c["near_ties"], c["decisive"], doc["only_near_ties"]) == (2, 2, [], True)
    assert "answers changed: only near ties" in invoke("check", run).stdout
    run, ids = edited("decisive", {0: 0.1, 3: 2.0})
    out = invoke("check", run).stdout
    assert "discotex: 2 answers changed: " in out and " still wrong; 1 near tie, 1 decisive; decisive: " + ids[1] in out
    assert "(one model)" not in out or "kernels alone" in out
    assert "not only near ties" in out


@pytest.mark.real  # the session's Gemma run (4 DISCOTEX items), re-read: nothing is scored
def test_real_gemma_samples_two_answers_moved_one_near_tie_one_decisive(gemma_run, tmp_path):
    lines = [json.loads(x) for x in (gemma_run.out / "samples-discotex.jsonl").read_text().splitlines()]
    margins = [top_two_margin(s["logprobs"]) for s in lines]
    tie = next(k for k, m in enumerate(margins) if m < NEAR_TIE) if min(margins) < NEAR_TIE else None
    firm = max(range(len(lines)), key=lambda k: margins[k])
    moved = {firm: (lines[firm]["pred"] + 1) % 5, **({tie: (lines[tie]["pred"] + 1) % 5} if tie is not None else {})}
    ids = {s["id"]: k for k, s in enumerate(lines)}
    other = rewrite_run(gemma_run.out, tmp_path / "o", "gemma-moved",
                        lambda t, s: answer(s, moved[ids[s["id"]]]) if ids[s["id"]] in moved else s)
    r = invoke("compare", gemma_run.out, other, "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (ch,) = doc["answers_changed"]
    assert ch["changed"] == len(moved) and ch["decisive"] == int(margins[firm] >= NEAR_TIE)
    assert ch["near_ties"] == len(moved) - ch["decisive"]
    assert {x["id"]: x["margin"] for x in ch["items"]} == pytest.approx(
        {lines[k]["id"]: margins[k] for k in moved})
    assert {e["metric"] for e in doc["equivalence"]} == {"accuracy", "binary_accuracy"}
    assert all(e["n"] == len(lines) and e["margin"] == 0.02 for e in doc["equivalence"])


def test_the_api_runs_a_quant_ladder_and_judges_it(models, tmp_path):
    import abricot_local as al

    data = write_discotex(tmp_path / "d", 5)  # 10 items
    runs = al.evaluate("tiny-q8", "discotex", quants=["Q4_K_M", "Q8_0"], models_file=models, data_dir=data,
                       out=tmp_path / "ladder", progress=False)
    assert [r.record.model.alias for r in runs] == ["tiny-q4", "tiny-q8"]
    frame = al.compare(*runs, models_file=models).equivalence()
    # the reference is the higher-precision quant; the fake backend scores both alike
    acc = frame[frame.metric == "accuracy"].iloc[0]
    assert (acc["run"], acc["reference"], acc["verdict"], acc["diff"]) == ("tiny-q4", "tiny-q8", "equivalent", 0.0)
    # every item of the 10 compared: the task's own value is known, equivalent; items like these cannot tell yet
    assert acc["total"] == acc["n"] == 10 and (acc["ci90_low"], acc["ci90_high"]) == (0.0, 0.0)
    assert acc["like_verdict"] == "cannot tell yet" and acc["like_ci90_low"] < -0.1 < 0.1 < acc["like_ci90_high"]
    assert acc["like_items_to_settle"] > 100
    assert al.compare(*runs, models_file=models).changes().empty
    with pytest.raises(UsageError, match="it has Q8_0, Q5_K_M, Q4_K_M"):
        al.plan("tiny-q8", "discotex", quants="Q2_K", models_file=models, data_dir=data)


def test_a_correlation_difference_made_by_a_handful_of_changed_answers_is_not_read():
    """A rung whose r moved because of a few changed answers: its paired bootstrap over a sample of them (one
    changed answer: [-0.131, 0.000]) settled a truly worse rung as equivalent up to 15% of the time."""
    from types import SimpleNamespace

    from abricot_local.analysis import equivalence

    m = SimpleNamespace(a="o", b="r", diff=-0.01, ci90=(-0.03, 0.0), stat="pearson", n=40, task="t",
                        metric="pearson", note="", detail={"changed": 3})
    v = equivalence.verdict_of(m, "o", "r", 0.05, 127)
    assert v.kind == equivalence.UNDEFINED and "3 of the 40 items changed their answer, fewer than 10" in v.note
    many = equivalence.verdict_of(SimpleNamespace(**{**vars(m), "detail": {"changed": 12}}), "o", "r", 0.05, 127)
    assert many.kind == equivalence.EQUIVALENT
    every = equivalence.verdict_of(SimpleNamespace(**{**vars(m), "n": 127}), "o", "r", 0.05, 127)
    assert every.kind == equivalence.EQUIVALENT  # every item: the set's own difference, exact


def test_an_accuracy_on_a_few_items_is_read_against_the_margin_not_held_to_the_correlation_guard():
    """The changed-answers guard is a correlation's: an accuracy compared on 5 items, none changed, is Tango's
    `cannot tell yet` with its interval and the items that would settle it (the guard said `cannot tell`, 5 of
    the 5 items changed, beside `no answer changed`)."""
    from types import SimpleNamespace

    from abricot_local.analysis import equivalence

    m = SimpleNamespace(a="o", b="r", diff=0.0, ci90=(-0.3, 0.3), stat="accuracy", n=5, task="t", metric="accuracy",
                        note="", detail={"a_only": 0, "b_only": 0})
    v = equivalence.verdict_of(m, "o", "r", 0.02, 1600)
    assert v.kind == equivalence.UNSETTLED and "changed their answer" not in v.note
    assert v.ci90[0] < -0.02 < 0.02 < v.ci90[1] and v.items is not None and v.items > 5
    assert v.like_kind == equivalence.UNSETTLED and v.like_items is not None


# -- better by more than M: the mirror of worse --------------------------------------------------------------------
@pytest.mark.parametrize("ci, kind", [
    ((0.444, 1.162), "better"),  # wholly above +M (the reviewer's pearson_expected)
    ((0.051, 0.2), "better"),
    ((0.05, 0.2), "not worse"),  # on +M: not above it
    ((0.01, 0.2), "not worse"),  # straddles +M
    ((-0.04, 0.04), "equivalent"),
    ((-0.1, 0.04), "cannot tell yet"),  # straddles -M: below +M, yet it may be worse by more than M
    ((-0.1, 0.1), "cannot tell yet"),
    ((-0.2, -0.05), "cannot tell yet"),  # on -M
    ((-0.3, -0.1), "worse"),
])
def test_an_interval_above_the_margin_is_better_by_more_than_it(ci, kind):
    diff = sum(ci) / 2
    assert eq.classify(diff, ci, 0.05) == kind == own_kind(diff, *ci, 0.05)
    mirrored = eq.classify(-diff, (-ci[1], -ci[0]), 0.05)  # the runs swapped
    want = {"better": {"worse"}, "worse": {"better"}, "equivalent": {"equivalent"}, "not worse": {"cannot tell yet"},
            "cannot tell yet": {"cannot tell yet", "not worse"}}[kind]
    assert mirrored in want
    assert eq.classify(math.nan, ci, 0.05) == eq.UNDEFINED
    if kind in ("better", "worse", "equivalent", "not worse"):
        m = {"better": "better by more than", "worse": "worse by more than", "equivalent": "equivalent within",
             "not worse": "not worse by more than"}[kind]
        assert eq.words(kind, 0.05) == f"{m} 0.05"


def test_verdict_of_names_a_difference_above_the_margin_from_the_reference_s_point_of_view():
    """The reviewer's pair: B scores much higher than A; the 90% CI [0.444, 1.162] lies wholly above +0.05."""
    from types import SimpleNamespace

    m = SimpleNamespace(a="B", b="A", diff=0.836, ci90=(0.444, 1.162), stat="pearson", n=40, task="abricot_abs",
                        metric="pearson_expected", note="", detail={"changed": 30})
    e = eq.verdict_of(m, "B", "A", 0.05)
    assert e.kind == eq.BETTER and e.items is None
    assert e.line == ("B vs A, abricot_abs pearson_expected: better by more than 0.05 (difference 0.836, 90% CI "
                      "[0.444, 1.162] for items like these, 40 items)")
    flipped = eq.verdict_of(m, "A", "B", 0.05)  # A against B: the interval mirrored, worse
    assert flipped.kind == eq.WORSE and flipped.ci90 == pytest.approx((-1.162, -0.444))
    assert "A vs B, abricot_abs pearson_expected: worse by more than 0.05 (difference -0.836" in flipped.line
    own = eq.verdict_of(m, "B", "A", 0.05, 127)  # 40 of the task's 127: the narrower interval
    assert (own.kind, own.like_kind) == (eq.BETTER, eq.BETTER) and 0.444 < own.ci90[0]
    assert own.like_line.endswith("(paired bootstrap, 40 items): better by more than 0.05")
    every = eq.verdict_of(SimpleNamespace(**{**vars(m), "n": 127}), "B", "A", 0.05, 127)
    assert every.kind == eq.BETTER and every.exact
    assert every.line.endswith("better by more than 0.05 (difference 0.836 on all 127 items of the task: exact)")
    on = eq.verdict_of(SimpleNamespace(**{**vars(m), "n": 127, "diff": 0.05}), "B", "A", 0.05, 127)
    assert on.kind == eq.NOT_WORSE  # exactly +M: not worse, not better by more than M
    # an accuracy: 30 answers fixed, none broken, of 40: Tango's interval wholly above +0.02
    acc = SimpleNamespace(a="B", b="A", diff=0.75, ci90=(math.nan, math.nan), stat="accuracy", n=40, task="discotex",
                          metric="accuracy", note="", detail={"a_only": 30, "b_only": 0, "changed": 30})
    (j,) = eq.judge([acc], [("B", "A")], {("discotex", "accuracy"): 0.02}, totals={"discotex": 1600})
    assert j.kind == j.like_kind == eq.BETTER and j.ci90[0] > 0.02  # compare's judge names it
    assert "discotex accuracy: better by more than 0.02 (difference 0.750, 90% CI [" in j.line


def test_compare_says_better_by_more_than_the_margin_in_every_form(runs, tmp_path):
    """Two runs on the same items, the second right on every DISCOTEX item: `compare` says better by more than 0.02
    (table, markdown, JSON's kind) where it said "not worse by more than 0.02", and the API's frame has the kind."""
    d = runs["d"]
    b = rewrite_run(d, tmp_path / "b", "fake-oracle", lambda t, s: answer(s, s["gold"]))
    doc = json.loads(invoke("compare", d, b, "--format", "json").stdout)
    acc = [e for e in doc["equivalence"] if e["metric"] == "accuracy"]
    assert [(e["other"], e["reference"], e["kind"], e["like_kind"]) for e in acc] == [
        ("fake-oracle", "fake", "better", "better")]
    assert acc[0]["ci90"][0] > 0.02 and "better by more than 0.02" in acc[0]["line"] + acc[0]["like_line"]
    for fmt in ("table", "markdown"):
        flat = " ".join(invoke("compare", d, b, "--format", fmt).stdout.split())
        assert "fake-oracle vs fake, discotex accuracy: better by more than 0.02 (difference" in flat
        assert "not worse by more than" not in flat
    mirrored = json.loads(invoke("compare", d, b, "--format", "json", "--reference", b).stdout)
    assert {e["kind"] for e in mirrored["equivalence"] if e["metric"] == "accuracy"} == {"worse"}
    import abricot_local as al

    frame = al.compare(d, b).equivalence()
    assert set(frame[frame.metric == "accuracy"].verdict) == {"better"}
