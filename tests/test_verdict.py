"""The end of `run`: the published rows a registry entry reproduces, beside the run's values."""

from __future__ import annotations

import json
import math

import pytest

from click.testing import CliRunner

from abricot_local import console
from abricot_local.analysis import reproduction
from abricot_local.record import Published
from abricot_local.cli import cli
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_model_without_published_rows_gets_one_line(tmp_path, discotex_dir):
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--sample", "5",
               "--n-ctx", "8192", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("published comparison")]
    assert len(lines) == 1 and "names no published result" in lines[0]
    assert "chance" in r.output  # the summary shows each metric's chance level


def test_a_typo_in_reproduces_is_refused_in_the_plan(tmp_path):
    """It was said only after every item was scored ("names no published row this version knows"), and
    the protocols the run scored by default were chosen without it."""
    from invented_data import write_discotex

    data = write_discotex(tmp_path / "d", 4)
    models = tmp_path / "models.toml"
    models.write_text('[typo]\nbackend = "fake"\nreproduces = "ABRICOT papr: mistral-7b"\n', encoding="utf-8")
    for dry in (["--dry-run"], []):
        r = invoke("run", "typo", "--models", models, "--data-dir", data, "--tasks", "discotex", "--out",
                   tmp_path / "o", *dry)
        assert r.exit_code == 2, r.output
        assert "'ABRICOT papr: mistral-7b'" in r.output
        assert "did you mean: abricot paper: mistral-7b?" in r.output.lower()
        assert str(models) in r.output and "[typo]" in r.output
    assert not (tmp_path / "o").exists()


def test_a_synthetic_stand_in_says_why_it_has_no_published_comparison(tmp_path):
    """`run mistral-7b-v01-q4 --backend fake` said its entry "names no published result": it names one; a
    synthetic backend's numbers are not held against it."""
    from invented_data import write_discotex

    data = write_discotex(tmp_path / "d", 4)
    r = invoke("run", "mistral-7b-v01-q4", "--backend", "fake", "--data-dir", data, "--tasks", "discotex",
               "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("published comparison")]
    assert "names no published result" not in line, line
    assert "synthetic" in line and "ABRICOT paper: mistral-7b" in line and "fake" in line


def test_verdict_text_from_a_results_dict():
    res = {"published": {"reproduces": "ABRICOT paper: llama-3.1-8b", "tasks_not_run": ["abricot_inc"], "unknown": [],
                         "checks": [{"reference": "llama-3.1-8b", "source": "paper 3-shot", "task": "abricot_abs",
                                     "metric": "pearson", "published": 0.3, "value": 0.1, "ci95": [0.05, 0.2],
                                     "difference": -0.2, "inside": False, "notes": []}]}}
    text = console.verdict(Published.from_dict(res["published"]))
    # a run of an earlier version recorded no verdict: whether the value is inside its 95% CI
    assert "0.30" in text and "0.100" in text and "[0.050, 0.200]" in text and "-0.200" in text
    assert "outside the 95% CI" in text
    assert "abricot_inc: published, but not run here" in text
    # a row made otherwise: not comparable, each difference named, and no answer on the CI
    other = {**res["published"]["checks"][0], "inside": None, "comparable": False, "protocol": "paper",
             "differences": ["shots 0, published 3"]}
    text = console.verdict(Published.from_dict({**res["published"], "checks": [other]}), "Q8_0")
    row = next(x for x in text.splitlines() if "abricot_abs.pearson" in x)
    assert row.rstrip().endswith("not comparable") and "95% CI" not in row
    assert "made otherwise: shots 0, published 3" in text and "this run Q8_0" in text


def test_an_entry_reproducing_the_paper_row(tmp_path):
    """A registry entry naming a published row (the fake backend under it: the verdict is what is tested)."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}",
               "--tasks", "abricot", "--n-ctx", "8192", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    checks = {c["task"]: c for c in res["published"]["checks"]}
    assert set(checks) == {"abricot_abs", "abricot_inc"}
    for task, c in checks.items():
        assert c["published"] == 0.30 and c["reference"] == "llama-3.1-8b" and c["notes"] == []
        lo, hi = res["tasks"][task]["metrics"]["pearson_ci95"]
        assert json.dumps(c["ci95"]) == json.dumps([lo, hi])
        # a constant prediction on the 18 invented rows makes Pearson (and its CI) NaN: "cannot tell" then
        assert c["inside"] == (None if math.isnan(lo) else lo <= 0.30 <= hi)
        assert json.dumps(c["value"]) == json.dumps(res["tasks"][task]["metrics"]["pearson"])
        assert c["margin"] == 0.05 and c["n"] == c["items_total"] == 18 and c["reasons"]
        # every row of the (invented, 18-row) task scored: the run's value is the set's, the verdict exact
        d = c["value"] - 0.30
        exact = "cannot tell" if math.isnan(d) else "reproduced" if abs(d) + 0.005 < 0.05 else \
            "differs" if abs(d) - 0.005 > 0.05 else "cannot tell"
        assert c["verdict"] == exact and c["verdict"] != "cannot settle"
        row = next(x for x in r.output.splitlines() if f"{task}.pearson" in x and "llama-3.1-8b" in x)
        assert "0.30" in row and (f"differs by {d:+.3f}" in row if exact == "differs" else exact in row)
        assert c["reasons"][0].partition(": ")[2] in r.output
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--shots", "0", "--n-ctx", "8192", "--out", tmp_path / "z")
    assert r.exit_code == 0, r.output
    assert "made otherwise: shots 0, published 3" in r.output
    assert "not comparable" in next(x for x in r.output.splitlines() if "abricot_abs.pearson" in x)
    assert "abricot_inc: published, but not run here" in r.output


def test_the_four_verdicts_and_the_small_sample_warning():
    """reproduction.judge: the 90% CI of run - published for the task's own value (the finite-population correction,
    the published value's rounding) against +-M; the interval for items like these beside it."""
    from abricot_local.analysis import reproduction as rp

    near = (("other", 0.35), ("far", 0.9))
    v = rp.judge(0.31, (0.29, 0.33), 0.30, 0.05, n=500, total=1000, neighbours=near)
    root = math.sqrt(500 / 999)  # the correction, sqrt((N - n) / (N - 1)), on the half-widths
    assert v.kind == rp.REPRODUCED and not v.warnings
    assert v.ci90 == pytest.approx((0.31 - 0.02 * root - 0.30, 0.31 + 0.02 * root - 0.30))  # no rounding given
    assert v.line.startswith("reproduced within 0.05: run - published +0.010, 90% CI [-0.004, +0.024] for the task's "
                             "1000 items (500 scored)")
    assert v.like_kind == rp.REPRODUCED and v.reasons[1].startswith("items like these (whether the model generalises)")
    v = rp.judge(0.31, (0.29, 0.33), 0.30, 0.05, n=500, total=1000, rounding=0.005)
    assert v.ci90 == pytest.approx((0.31 - 0.02 * root - 0.305, 0.31 + 0.02 * root - 0.295))
    assert "the published value's rounding +-0.005 included" in v.line
    v = rp.judge(0.50, (0.45, 0.55), 0.30, 0.05, n=500, total=1000)
    assert v.kind == rp.DIFFERS and "differs by more than 0.05" in v.line
    v = rp.judge(0.10, (0.05, 0.15), 0.30, 0.05, n=500, total=1000)
    assert v.kind == rp.DIFFERS  # below as well as above
    # 20 items, an interval of +-0.1 around a difference of 0.02, margin 0.1: more items would settle it, the task has them
    v = rp.judge(0.32, (0.22, 0.42), 0.30, 0.10, n=20, total=1000, neighbours=near)
    assert v.kind == rp.UNSETTLED and 20 < v.items <= 1000 and f"about {v.items:,} of the task's 1000" in v.line
    assert v.items <= v.like_items  # drawn from the task's own 1000, fewer are needed than for items like these
    assert v.warnings and "small sample" in v.warnings[-1] and "gap 0.05 from this published value (0.30) to the " \
        "nearest other model's (other 0.35): at this size a run cannot tell those two models apart" in v.warnings[-1]
    # ABRICOT-like, every item scored: the run's value is the set's; the verdict is exact, allowing the rounding
    v = rp.judge(0.30, (0.15, 0.45), 0.30, 0.05, n=127, total=127, rounding=0.005)
    assert v.kind == rp.REPRODUCED and v.exact and v.ci90 == pytest.approx((-0.005, 0.005))
    assert v.line == ("reproduced within 0.05: run - published +0.000 on all 127 items of the task (exact; "
                      "[-0.005, +0.005] with the published value's rounding +-0.005), inside +-0.05")
    # items like these: +-0.15 at 127 items against 0.05: no number of the task's items settles that question
    like = v.reasons[1]
    assert v.like_kind == rp.UNSETTLEABLE and abs(v.settles - 0.15) < 1e-9 and "this task cannot settle +-0.05" in like
    assert "all 127 items give a 90% CI of about +-0.15, and this interval settles margins of 0.156 or more" in like \
        and "power" not in like  # every item scored: the interval's own margins (margin_rule.settled_margins)
    v = rp.judge(0.0, (-0.1, 0.1), 0.30, 0.25, n=127, total=127, rounding=0.005)  # d = -0.3, h = 0.1
    assert v.kind == rp.DIFFERS and v.line.startswith("differs by -0.300: run - published -0.300 on all 127 items")
    assert "this interval settles margins of 0.406 or more (or, differing, 0.194 or under)" in v.reasons[1]
    v = rp.judge(0.349, (0.2, 0.5), 0.30, 0.05, n=127, total=127, rounding=0.005)  # 0.049 +- 0.005 straddles 0.05
    assert v.kind == rp.UNSETTLEABLE and "within the published value's rounding of the margin" in v.line
    # 20 of 127 items: the task's own value narrows to sqrt(107/126) of +-0.35, still holding the margin; all 127
    # items would settle it (the set's value, then exact), so never "this task cannot settle" but how many
    # (the finite-population formula says 126 of 127: within 5% of the task, the advice is every item, exact)
    v = rp.judge(0.30, (-0.05, 0.65), 0.30, 0.05, n=20, total=127)
    assert v.kind == rp.UNSETTLED and v.items == 127 and "all 127 of the task's items would tell (the value then " \
        "exact)" in v.line
    assert v.ci90 == pytest.approx((-0.35 * math.sqrt(107 / 126), 0.35 * math.sqrt(107 / 126)))
    assert v.like_kind == rp.UNSETTLEABLE and abs(v.settles - 0.35 * math.sqrt(20 / 127)) < 1e-9
    assert "even all 127" in v.reasons[1]
    v = rp.judge(float("nan"), (float("nan"), float("nan")), 0.30, 0.05, n=20, total=127)
    assert v.kind == rp.UNDEFINED and v.line.startswith("cannot tell")
    # a correlation over fewer than 10 items, or the same in every resample: cannot tell, never a width-0 interval
    v = rp.judge(0.5, (0.1, 0.8), 0.30, 0.05, n=6, total=127, correlation=True)
    assert v.kind == rp.UNDEFINED and "fewer than 10 items" in v.line
    v = rp.judge(1.0, (1.0, 1.0), 0.30, 0.05, n=40, total=127, correlation=True)
    assert v.kind == rp.UNDEFINED and "same in every resample" in v.line
    # below N, an estimate on the margin is no "cannot settle": the whole task tells (it said so from the estimate)
    v = rp.judge(0.55, (0.35, 0.75), 0.30, 0.25, n=40, total=127, rounding=0.005)
    assert v.kind == rp.UNSETTLED and v.items == 127 and "cannot tell yet within 0.25" in v.line


def test_all_items_are_no_promise_within_the_published_value_s_rounding_of_the_margin():
    """126 of 127 items, the estimate near the margin: all 127 give the exact value, but an exact value within the
    published value's rounding of +-M cannot tell (what `--sample 127` then says), so the advice promises nothing
    there: within the rounding, likely not; within twice it, maybe not; farther, all 127 items would tell."""
    from abricot_local.analysis import reproduction as rp

    def judged(value, within, rounding=0.005):
        return rp.judge(value, (-0.15, 0.19), 0.18, 0.16, n=126, total=127, within=within, rounding=rounding)

    v = judged(0.021, (0.0115, 0.0305))  # run - published -0.159: 0.001 from the margin, within 0.005
    assert v.kind == rp.UNSETTLED and v.items == 127 and "would tell" not in v.line
    assert v.line.endswith("; all 127 items would give the exact value, but the difference is within the published "
                           "value's rounding (+-0.005) of +-0.16: if it stays there even that cannot tell (this task "
                           "likely cannot settle +-0.16)")
    exact = rp.judge(0.021, None, 0.18, 0.16, n=127, total=127, rounding=0.005)  # the same value over all 127 items
    assert exact.kind == rp.UNSETTLEABLE and exact.line.startswith("this task cannot settle +-0.16")
    v = judged(0.012, (0.005, 0.019))  # -0.168: 0.008 from the margin, within twice the rounding
    assert v.kind == rp.UNSETTLED and v.items == 127 and v.line.endswith(
        "; all 127 items would give the exact value; within the published value's rounding (+-0.005) of +-0.16 even "
        "that may not tell")
    v = judged(0.0, (-0.02, 0.03))  # -0.18: 0.02 from the margin: all 127 would tell
    assert v.kind == rp.UNSETTLED and v.items == 127 and v.line.endswith(
        "; all 127 of the task's items would tell (the value then exact)")
    v = judged(0.021, (0.0115, 0.0305), rounding=0.0)  # no rounding: the exact value tells
    assert v.line.endswith("; all 127 of the task's items would tell (the value then exact)")


def test_run_margin_and_several_protocols(tmp_path):
    """--margin overrides the task's; --protocol paper,calamita scores both protocols without a registry entry."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b; CALAMITA: '
                      'Llama-3.1-8B-Instruct"\n', encoding="utf-8")
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--n-ctx", "8192", "--margin", "3", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["published"]["margin"] == 3 and "margin 3 (--margin)" in r.output
    assert {c["task"] for c in res["published"]["checks"]} == {"abricot_abs", "abricot_abs@calamita"}
    assert all(c["margin"] == 3 and c["verdict"] in ("reproduced", "cannot tell") for c in res["published"]["checks"])
    for bad in ("0", "-1", "inf", "nan"):
        r = invoke("run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
                   "--margin", bad, "--out", tmp_path / f"bad{bad}")
        assert r.exit_code != 0 and "--margin must be a finite number more than 0" in r.output, (bad, r.output)
        assert not (tmp_path / f"bad{bad}").exists()
    for spec, keys in (("paper,calamita", ["abricot_abs", "abricot_abs@calamita"]),
                       ("all", ["abricot_abs", "abricot_abs@calamita"]), ("calamita", ["abricot_abs@calamita"])):
        out = tmp_path / spec.replace(",", "-")
        r = invoke("run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
                   "--protocol", spec, "--n-ctx", "8192", "--out", out)
        assert r.exit_code == 0, r.output
        res = json.loads((out / "results.json").read_text())
        assert list(res["tasks"]) == keys, spec
        assert [res["tasks"][k]["config"]["protocol"] for k in keys] == [k.partition("@")[2] or "paper" for k in keys]
        if spec == "all":  # check rebuilds each instance from its key and the recorded --protocol all
            r = invoke("check", out)
            assert r.exit_code == 0, r.output
    r = invoke("run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--protocol", "all", "--n-ctx", "8192", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    assert [t["task"] for t in json.loads(r.stdout)["models"][0]["tasks"]] == ["abricot_abs", "abricot_abs@calamita"]
    r = invoke("run", "fake", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--protocol", "paper,leaderboard", "--out", tmp_path / "typo")
    assert r.exit_code != 0 and "no task of this run has a protocol 'leaderboard'" in r.output


def _reproduced_within_half(tmp_path) -> dict:
    """A run whose one published check is reproduced within a margin of 0.5, in ``tmp_path / "o"``: its check (3
    would cover every r from 0.30: cannot tell, reproduction.covered)."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--n-ctx", "8192", "--margin", "0.5", "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    recorded = json.loads((tmp_path / "o" / "results.json").read_text())["published"]["checks"]
    (check,) = recorded
    return check


def test_report_html_and_the_api_read_the_verdict_from_the_run(tmp_path):
    """The verdict recorded in results.json reaches `report`, the HTML page and Run.published() with no --models
    (as Chromium shows the page: the test after this one)."""
    from abricot_local import api

    check = _reproduced_within_half(tmp_path)
    assert check["verdict"] == "reproduced" and check["reasons"][0].startswith("reproduced within 0.5: ")
    r = invoke("report", tmp_path / "o", "--table", "published")
    assert r.exit_code == 0 and "0.30: reproduced within 0.5" in r.output, r.output
    r = invoke("report", tmp_path / "o", "--table", "published", "--format", "json")
    (row,) = json.loads(r.output)["published_checks"]
    assert row["verdict"] == "reproduced" and row["margin"] == 0.5 and row["reasons"] == check["reasons"]
    r = invoke("report", tmp_path / "o", "--format", "html", "-o", tmp_path / "page.html")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "reproduced within 0.5" in page
    p = api.load_run(tmp_path / "o").published()
    assert p.verdict.tolist() == ["reproduced within 0.5"] and p.margin.tolist() == [0.5]
    assert p.reasons.tolist() == ["; ".join(check["reasons"])]


@pytest.mark.real  # a browser
def test_the_html_pages_verdict_is_shown_by_chromium(tmp_path):
    """The page of the run above, as Chromium renders its published table, shows the recorded verdict."""
    check = _reproduced_within_half(tmp_path)
    r = invoke("report", tmp_path / "o", "--format", "html", "-o", tmp_path / "page.html")
    assert r.exit_code == 0, r.output
    shown_in_chromium(tmp_path / "page.html", "reproduced within 0.5", check["reasons"][0])


def test_merged_shards_get_the_whole_runs_verdict(tmp_path):
    """merge makes the published block again over every item: the unsharded run's, which `check` holds."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n', encoding="utf-8")
    base = ["run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
            "--n-ctx", "8192"]
    assert invoke(*base, "--out", tmp_path / "whole").exit_code == 0
    for k in (1, 2):
        assert invoke(*base, "--shard", f"{k}/2", "--out", tmp_path / f"s{k}").exit_code == 0
    r = invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "merged")
    assert r.exit_code == 0, r.output
    whole, merged, shard = (json.loads((tmp_path / d / "results.json").read_text())["published"]
                            for d in ("whole", "merged", "s1"))
    assert merged == whole and shard["checks"][0]["n"] < whole["checks"][0]["n"]
    r = invoke("check", tmp_path / "merged")
    assert r.exit_code == 0, r.output


def shown_in_chromium(page, *texts):
    """The page's published table, as Chromium renders it, shows ``texts`` (skipped without a browser)."""
    import os
    import shutil
    from pathlib import Path

    import pytest

    playwright = pytest.importorskip("playwright.sync_api")
    exe = os.environ.get("ABRICOT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip(f"no Chromium at {exe}")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            pg = browser.new_page()
            pg.goto(page.as_uri(), wait_until="load")
            table = pg.locator("#checks-table").inner_text()
        finally:
            browser.close()
    assert "verdict" in table and all(t in table for t in texts), table


def test_items_within_five_percent_of_the_task_are_the_whole_task():
    """stats.of_population: n0 N / (n0 + N - 1) nears N and never reaches it; when it leaves out at most 5% of the
    task the figure is N (every item: the task's value exactly, for at most 5% more items)."""
    from abricot_local.analysis.stats import MAX_ITEMS, of_population

    assert of_population(10_000, 127) == 127  # the formula's 126
    assert of_population(2_170, 127) == 127  # the formula's 121: 6 left out, 127 // 20
    assert of_population(2_160, 127) == 120  # 7 left out: the formula's figure stands
    assert of_population(60, 127) == 41 and of_population(60, None) == 60 and of_population(MAX_ITEMS, 127) == MAX_ITEMS
    assert of_population(30_000, 1600) == 1600 and of_population(20_000, 1600) == 1482  # the formula's 1,520 and 1,482


def test_the_first_items_of_a_limit_run_are_no_draw_of_the_task(tmp_path, discotex_dir):
    """--limit's first items (DISCOTEX's first 400 are all TED, gold E) got an interval "for the task's 1,600
    items" with the finite-population correction, as if drawn; now the task's value is not judged from them."""
    from abricot_local.analysis import reproduction as rp

    drawn = rp.judge(0.30, (0.22, 0.38), 0.30, 0.10, n=40, total=127)
    first = rp.judge(0.30, (0.22, 0.38), 0.30, 0.10, n=40, total=127, drawn=False)
    assert drawn.kind == rp.REPRODUCED and first.kind == rp.UNDEFINED and first.items == 40
    from abricot_local.errors import recorded_words, render

    assert "are the task's first (--limit), no draw of its 127: the task's value is not judged from them " \
        "(--sample N draws them)" in render(first.line, recorded_words) and first.like_kind == rp.REPRODUCED
    assert rp.judge(0.30, (0.22, 0.38), 0.30, 0.10, n=127, total=127, drawn=False).kind == rp.REPRODUCED  # all of it
    runs = []
    for name in ("fake", "fake2"):
        runs.append(tmp_path / name)
        r = invoke("run", name, "--backend", "fake", "--data-dir", discotex_dir, "--tasks", "discotex", "--limit",
                   60, "--n-ctx", "8192", "--out", runs[-1])
        assert r.exit_code == 0, r.output
    r = invoke("compare", *runs, "--margin", "0.05")
    assert r.exit_code == 0 and "for the task's 1,600 items" not in r.output and "items like these" in r.output, r.output


def test_a_verdict_of_an_earlier_method_is_held_to_its_other_fields(tmp_path):
    """A run made before the verdicts' method changed (record.Published.method) is not called doctored by `check`
    or `report --verify` for its verdict's figures; one of today's method with a changed figure is."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nn_ctx = 8192\nreproduces = "ABRICOT paper: llama-3.1-8b"\n',
                      encoding="utf-8")
    out = tmp_path / "o"
    r = invoke("run", "fake-as-llama", "--models", models, "--tasks", "abricot_abs", "--protocol", "paper", "--data",
               f"abricot={FIXTURE}", "--sample", 12, "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["published"]["method"] == reproduction.METHOD == 8
    doc["published"]["checks"][0]["ci90"] = [-0.9, -0.1]  # another method's figures (or a hand's)
    for method, held in ((8, False), (7, True), (6, True), (5, True), (4, True), (None, True), (1, True), (2, True), (3, True)):
        doc["published"]["method"] = method
        (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")
        for args in (("check", out), ("report", out, "--verify", "--models", models)):
            r = CliRunner().invoke(cli, [str(a) for a in args])
            assert (r.exit_code == 0) == held, (method, args, r.output)
