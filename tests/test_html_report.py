"""`report --format html`: the page's data, and the page itself in a real headless Chromium.

The browser tests open a report of two fake-backend runs x three tasks (the
whole DISCOTEX release, 1600 items, and the invented ABRICOT fixture) built
from copies of the data with markup injected into an item's text, a choice
and an ABRICOT sentence. They need Debian's ``chromium`` and the ``playwright``
package (test extra); nothing downloads a browser. Without them, or without the
DisCoTEX release (tests/realdata.py finds it), they skip with the reason, except under
CI=true where they fail.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.report.html import script_json, unpacked
from conftest import FIXTURE, oracle_sample, rewrite_run

SCRIPT_ITEM = "<script>window.__pwned = 1;</script>"
IMG_CHOICE = "<img src=x onerror='window.__pwned = 2'>"
SCRIPT_SENTENCE = "<script>window.__pwned = 3;</script>"
LOAD_BUDGET_MS = 1000


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)



# -- without a browser ---------------------------------------------------------------------------
def test_script_json_leaves_no_markup_and_round_trips():
    data = {"t": "</script><script>alert(1)</script> & <!-- \u2028",
            "n": [1.5, float("nan"), float("inf"), -float("inf")]}
    text = script_json(data)
    assert not set("<>&") & set(text) and "\u2028" not in text
    assert json.loads(text) == {"t": data["t"], "n": [1.5, None, "inf", "-inf"]}  # the page reads "inf" back


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory) -> list[Path]:
    """Two fake runs of the invented ABRICOT fixture (seeds differ, so the shots differ too)."""
    root = tmp_path_factory.mktemp("small")
    out = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for label, seed in (("alpha", 1), ("beta", 2)):
            r = invoke("run", label, "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
                       "--n-ctx", 8192, "--seed", seed, "--out", root / label)
            assert r.exit_code == 0, r.output
            out.append(root / label)
    return out


def test_cli_writes_html_to_a_file_or_stdout(small_runs, tmp_path):
    dest = tmp_path / "sub" / "r.html"
    r = invoke("report", *small_runs, "--format", "html", "-o", dest)
    assert r.exit_code == 0, r.output
    page = dest.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count("<script") == 2
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    stdout = invoke("report", *small_runs, "--format", "html").stdout
    assert stdout.startswith("<!DOCTYPE html>") and stdout.rstrip().endswith("</html>")
    # the data block holds each run's samples: ids, answers and the exact log-probs
    block = page.split('<script type="application/json" id="report-data">', 1)[1].split("</script>", 1)[0]
    data = json.loads(block)
    samples = [json.loads(x) for x in (small_runs[0] / "samples-abricot_abs.jsonl").read_text().splitlines()]
    task, contexts = data["tasks"][0], unpacked(data["contexts"])
    items = {it["id"]: it for it in task["items"]}
    assert len(items) == len(samples) == 18
    for s in samples:
        item = items[s["id"]]
        assert item["m"][0]["lp"] == s["logprobs"] and item["m"][0]["p"] == s["pred"]
        assert task["prefix"] + contexts[item["c"]] == s["context"]
        assert [data["strings"][k] for k in item["ch"]] == s["choices"]
    # plots.py's per-run figures, inline (the test extra installs matplotlib)
    assert [f["caption"] for f in data["figures"]] == ["alpha-abricot_abs-scatter", "beta-abricot_abs-scatter"]
    assert all(f["src"].startswith("data:image/png;base64,iVBORw0KGgo") for f in data["figures"])
    # -o works for the text formats as well
    r = invoke("report", *small_runs, "--format", "csv", "-o", tmp_path / "r.csv")
    assert r.exit_code == 0 and (tmp_path / "r.csv").read_text().startswith("model,quant,source,folder,")  # one plain table


def test_without_matplotlib_the_page_says_so_and_keeps_its_own_plots(small_runs, monkeypatch):
    import importlib.util

    from abricot_local.report import html as html_report, tables as report

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    data = html_report.report_data(report.build(small_runs))
    assert data["figures"] == [] and "matplotlib" in data["figuresNote"]
    assert data["primary"] == ["abricot_abs.pearson"]  # drawn by the page as SVG


def test_chance_levels_are_the_tasks_declarations(small_runs, tmp_path):
    """The chance line is what the task declared (results.json tasks.<t>.chance), never a guess from a
    metric's name: a metric the task gives no chance level has none on the page."""
    from abricot_local.report import html as html_report, tables as report

    data = html_report.report_data(report.build(small_runs), figures=False)
    chance = {c["key"]: c["chance"] for c in data["columns"]}
    assert chance["abricot_abs.accuracy"] == 0.2 and chance["abricot_abs.pearson"] == 0.0
    edited = tmp_path / "edited"
    shutil.copytree(small_runs[0], edited)
    doc = json.loads((edited / "results.json").read_text())
    doc["tasks"]["abricot_abs"]["chance"] = {"pearson": 0.125}  # declares pearson only
    (edited / "results.json").write_text(json.dumps(doc))
    data = html_report.report_data(report.build([edited]), figures=False)
    chance = {c["key"]: c["chance"] for c in data["columns"]}
    assert chance["abricot_abs.pearson"] == 0.125
    assert chance["abricot_abs.accuracy"] is None  # five choices, but nothing declared: no line


# -- the page in Chromium ------------------------------------------------------------------------
def _inject(data: Path, discotex: Path) -> tuple[Path, Path, str]:
    """Copies of the DISCOTEX release and the ABRICOT fixture with markup in them."""
    dx = data / "discotex"
    dx.mkdir(parents=True)
    script_id = ""
    for src in sorted(discotex.glob("discotex_1_*_test_set_release.tsv")):
        with src.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t")
            fields, rows = reader.fieldnames, list(reader)
        if "wiki" in src.name:
            rows[0]["PROMPT"] += " " + SCRIPT_ITEM
            script_id = rows[0]["ID"]
        else:
            rows[5]["TARGET"] += " " + IMG_CHOICE
        with (dx / src.name).open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields, delimiter="\t")
            writer.writeheader()
            writer.writerows(rows)
    with FIXTURE.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        fields, rows = reader.fieldnames, list(reader)
    rows[0]["text"] += " " + SCRIPT_SENTENCE
    fixture = data / "abricot.csv"
    with fixture.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return dx, fixture, script_id


@pytest.fixture(scope="module")
def site(tmp_path_factory, discotex_dir):
    """Two fake runs x (DISCOTEX 1600 items, ABRICOT abs and inc) and their HTML report."""
    root = tmp_path_factory.mktemp("site")
    dx, fixture, script_id = _inject(root / "data", discotex_dir)
    runs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        # the same items; the second run wraps them in the fake chat template, so its answers differ
        for label, extra in (("fake-q8_0", ()), ("fake-q4_0", ("--chat-template",))):
            r = invoke("run", label, "--backend", "fake", "--tasks", "discotex,abricot", "--data-dir", dx,
                       "--data", f"abricot={fixture}", "--n-ctx", 8192, "--out", root / label, *extra)
            assert r.exit_code == 0, r.output
            runs.append(root / label)
        page = root / "report.html"
        r = invoke("report", *runs, "--format", "html", "-o", page)
        assert r.exit_code == 0, r.output
    samples = {t: [{s["id"]: s for s in map(json.loads, (run / f"samples-{t}.jsonl").read_text().splitlines())}
                   for run in runs] for t in ("discotex", "abricot_abs", "abricot_inc")}
    return {"page": page, "runs": runs, "samples": samples, "script_id": script_id,
            "results": [json.loads((run / "results.json").read_text()) for run in runs]}



@pytest.fixture
def page(browser, site):
    """The report opened from file://; every request recorded, any other than the file refused."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    requests, problems = [], []
    url = site["page"].as_uri()
    ctx.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    pg = ctx.new_page()
    pg.on("request", lambda req: requests.append(req.url))
    pg.on("pageerror", lambda err: problems.append(str(err)))
    pg.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
    pg.goto(url, wait_until="load")
    pg.requests, pg.problems, pg.url0 = requests, problems, url
    yield pg
    ctx.close()


def _rows(pg, kind):
    return pg.locator(f"#leaderboard-table tbody tr[data-kind={kind}]")


def _timing(pg) -> dict:
    return pg.evaluate("""() => {
        const nav = performance.getEntriesByType('navigation')[0];
        return {load: nav.loadEventEnd, ready: window.abricotReport.readyAt};
    }""")


@pytest.mark.real  # a browser
def test_opens_offline_fast_and_clean(page, site, tmp_path):
    # the first load, then two reloads: the best of three discounts a machine busy with other work
    timings = [_timing(page)]
    for _ in range(2):
        page.reload(wait_until="load")
        timings.append(_timing(page))
    best = min(timings, key=lambda t: t["load"])
    print(f"\nreport of 2 runs x 3 tasks ({site['page'].stat().st_size / 1e6:.1f} MB), ms after navigation start: "
          + ", ".join(f"script done {t['ready']:.0f} / load {t['load']:.0f}" for t in timings))
    assert 0 < best["ready"] <= best["load"] < LOAD_BUDGET_MS, timings
    assert page.problems == []
    assert all(u == page.url0 or u.startswith("data:") for u in page.requests), page.requests
    assert page.evaluate("window.__pwned") is None
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@pytest.mark.real  # a browser
def test_leaderboard_rows_chance_and_sort(page, site):
    runs = _rows(page, "run")
    assert runs.count() == 2
    assert runs.locator("td .name").all_text_contents() == ["fake-q8_0", "fake-q4_0"]
    pub = _rows(page, "published")
    # the paper's three rows (3-shot, the runs' protocol); the leaderboard's 0-shot rows have a column of their
    # own (abricot_abs@calamita) that these runs did not score, so they are not set beside them
    assert pub.count() == 3 and all("published" in pub.nth(k).inner_text() for k in range(3))
    assert all("CALAMITA" not in pub.nth(k).inner_text() for k in range(3))
    keys = page.eval_on_selector_all("#leaderboard-table thead th", "ths => ths.map(t => t.dataset.key)")
    chance = page.eval_on_selector_all("#leaderboard-table tfoot td", "tds => tds.map(t => t.textContent)")
    by_key = dict(zip(keys, chance))
    assert by_key["discotex.accuracy"] == "0.20" and by_key["discotex.binary_accuracy"] == "0.50"
    assert by_key["abricot_abs.pearson"] == "0.00" and by_key["abricot_inc.accuracy"] == "0.20"
    # the cells are results.json's numbers
    col = keys.index("discotex.accuracy")
    for k, res in enumerate(site["results"]):
        m = res["tasks"]["discotex"]["metrics"]
        cell = runs.nth(k).locator("td").nth(col).inner_text()
        assert cell.split("\n")[0] == f"{m['accuracy']:.3f}"
        assert f"[{m['accuracy_ci95'][0]:.3f}, {m['accuracy_ci95'][1]:.3f}]" in cell

    def column(key):
        return page.eval_on_selector_all(
            "#leaderboard-table tbody tr", f"trs => trs.map(tr => tr.children[{keys.index(key)}].dataset.value ?? null)")

    header = page.locator('#leaderboard-table th[data-key="abricot_abs.pearson"] button')
    header.click()
    values = [float(v) for v in column("abricot_abs.pearson") if v is not None]
    assert len(values) == 5 and values == sorted(values, reverse=True)
    assert page.get_attribute('#leaderboard-table th[data-key="abricot_abs.pearson"]', "aria-sort") == "descending"
    header.click()
    values = [float(v) for v in column("abricot_abs.pearson") if v is not None]
    assert values == sorted(values)
    # rows without the metric stay at the bottom
    page.locator('#leaderboard-table th[data-key="discotex.accuracy"] button').click()
    first = column("discotex.accuracy")[:2]
    accs = sorted((r["tasks"]["discotex"]["metrics"]["accuracy"] for r in site["results"]), reverse=True)
    assert [float(v) for v in first] == accs and column("discotex.accuracy")[2:] == [None] * 3


def _expected(site, task, source=None):
    a, b = site["samples"][task]
    ids = [i for i in a if source is None or a[i]["source"] == source]
    disagree = sum(a[i]["choices"][a[i]["pred"]] != b[i]["choices"][b[i]["pred"]] for i in ids)
    wrong = sum(a[i]["pred"] != a[i]["gold"] and b[i]["pred"] != b[i]["gold"] for i in ids)
    return len(ids), disagree, wrong


@pytest.mark.real  # a browser
def test_filters_count_what_the_samples_say(page, site):
    panel = page.locator("#explorer-discotex")
    count = panel.locator(".count")
    n, disagree, wrong = _expected(site, "discotex")
    assert n == 1600 and 0 < wrong < disagree < n
    assert count.get_attribute("data-count") == str(n)
    assert panel.locator("table.items tbody tr").count() == 50  # paginated
    panel.locator('input[data-filter="disagree"]').check()
    assert count.get_attribute("data-count") == str(disagree)
    panel.locator('input[data-filter="disagree"]').uncheck()
    panel.locator('input[data-filter="allwrong"]').check()
    assert count.get_attribute("data-count") == str(wrong)
    panel.locator('select[data-filter="source"]').select_option("wiki")
    assert count.get_attribute("data-count") == str(_expected(site, "discotex", "wiki")[2])
    panel.locator('input[data-filter="allwrong"]').uncheck()
    assert count.get_attribute("data-count") == str(_expected(site, "discotex", "wiki")[0])
    # every row shown is a wiki item
    assert set(panel.locator("table.items tbody tr td:nth-child(2)").all_inner_texts()) == {"wiki"}
    # another task's tab
    page.locator('.tabs button[data-task="abricot_abs"]').click()
    other = page.locator("#explorer-abricot_abs")
    assert other.is_visible() and not panel.is_visible()
    n, disagree, _ = _expected(site, "abricot_abs")
    other.locator('input[data-filter="disagree"]').check()
    assert other.locator(".count").get_attribute("data-count") == str(disagree)


@pytest.mark.real  # a browser
def test_item_detail_shows_the_scored_context_and_every_log_prob_as_text(page, site):
    from playwright.sync_api import expect

    item_id = site["script_id"]
    a, b = (runs[item_id] for runs in site["samples"]["discotex"])
    panel = page.locator("#explorer-discotex")
    panel.locator('input[data-filter="search"]').fill(item_id)
    panel.locator(f'table.items tbody tr[data-id="{item_id}"]').click()
    detail = page.locator("#detail-discotex")
    contexts = detail.locator("pre.ctx")
    expect(contexts).to_have_count(2)  # the chat-wrapped run scored another text (unpacked in the background)
    assert contexts.nth(0).text_content() == a["context"] and contexts.nth(1).text_content() == b["context"]
    assert SCRIPT_ITEM in a["context"] and SCRIPT_ITEM in contexts.nth(0).text_content()
    cells = detail.locator("table.choices tbody tr")
    assert cells.count() == 5
    for j in range(5):
        row = cells.nth(j).locator("td")
        assert row.nth(1).text_content() == a["choices"][j]
        for k, s in enumerate((a, b)):
            cell = row.nth(2 + k)
            assert cell.locator(".lp").text_content() == f"{s['logprobs'][j]:.4f}"
            p = math.exp(s["logprobs"][j]) / sum(math.exp(x) for x in s["logprobs"])
            assert abs(int(cell.locator(".p").text_content().rstrip("%")) - 100 * p) <= 0.5 + 1e-9
            assert ("pred" in cell.get_attribute("class")) == (j == s["pred"])
    # the markup is text: no element was made from it, nothing ran
    assert page.evaluate("document.scripts.length") == 2
    assert page.evaluate("document.querySelectorAll('img:not([src^=\"data:image/png;base64,\"])').length") == 0
    assert page.evaluate("window.__pwned") is None
    # a choice holding an <img> tag shows as text in an item that offers it
    with_img = next(i for i, s in site["samples"]["discotex"][0].items() if any(IMG_CHOICE in c for c in s["choices"]))
    panel.locator('input[data-filter="search"]').fill(with_img)
    panel.locator(f'table.items tbody tr[data-id="{with_img}"]').click()
    assert IMG_CHOICE in detail.locator("table.choices").text_content()
    page.locator('.tabs button[data-task="abricot_inc"]').click()
    sentence_item = next(i for i, s in site["samples"]["abricot_inc"][0].items() if SCRIPT_SENTENCE in s["context"])
    page.locator('#explorer-abricot_inc input[data-filter="search"]').fill(sentence_item)
    page.locator(f'#explorer-abricot_inc tr[data-id="{sentence_item}"]').click()
    expect(page.locator("#detail-abricot_inc pre.ctx").first).to_contain_text(SCRIPT_SENTENCE)
    assert page.evaluate("window.__pwned") is None and page.problems == []
    assert all(u == page.url0 for u in page.requests), page.requests


@pytest.mark.real  # a browser
def test_quantization_table(page, site):
    rows = page.locator("#quant-table tbody tr")
    assert rows.count() == 3
    first = rows.nth(0).locator("td").all_text_contents()
    a, b = site["samples"]["discotex"]
    agree = sum(a[i]["pred"] == b[i]["pred"] for i in a) / len(a)
    assert first[:2] == ["fake", "discotex"] and "Q8_0" in first[2] and "Q4_0" in first[3]
    assert first[4] == "1600" and first[5] == f"{agree:.3f}"



@pytest.mark.real  # a browser
def test_the_ladder_and_the_changed_answer_filters(page, site):
    """fake-q4_0 against fake-q8_0 (its reference: more bits): the explorer's decisive / near-tie filters
    count the items (by id) whose answer moved, by q8_0's top-two margin, as counted here; the ladder's row."""
    ref, other = site["samples"]["discotex"]

    def margin(lp):
        top = sorted(lp, reverse=True)
        return top[0] - top[1]

    moved = [i for i in ref if ref[i]["pred"] != other[i]["pred"]]
    decisive = sum(margin(ref[i]["logprobs"]) >= 0.5 for i in moved)
    assert 0 < decisive < len(moved)
    panel = page.locator("#explorer-discotex")
    count = panel.locator(".count")
    panel.locator('input[data-filter="decisive"]').check()
    assert count.get_attribute("data-count") == str(decisive)
    panel.locator('input[data-filter="decisive"]').uncheck()
    panel.locator('input[data-filter="neartie"]').check()
    assert count.get_attribute("data-count") == str(len(moved) - decisive)
    panel.locator('input[data-filter="neartie"]').uncheck()
    # against the gold answer: wrong -> right, right -> wrong, wrong -> another wrong answer
    fixed = sum(other[i]["pred"] == other[i]["gold"] for i in moved)
    broken = sum(ref[i]["pred"] == ref[i]["gold"] for i in moved)
    for key, n in (("fixed", fixed), ("broken", broken), ("stillwrong", len(moved) - fixed - broken)):
        panel.locator(f'input[data-filter="{key}"]').check()
        assert count.get_attribute("data-count") == str(n), key
        panel.locator(f'input[data-filter="{key}"]').uncheck()
    rows = page.locator("#ladder-table tbody tr")
    cells = [rows.nth(k).locator("td").all_text_contents() for k in range(rows.count())]
    disco = [c for c in cells if c[1] == "discotex"]
    assert [c[2] for c in disco] == ["Q8_0", "Q4_0"] and disco[0][5] == "reference"
    first = rows.nth(0).locator("td")  # issue 47: the model and run names stay on one line
    assert [first.nth(k).evaluate("e => getComputedStyle(e).whiteSpace") for k in (0, 3)] == ["nowrap", "nowrap"]
    # the second run wrapped its prompts in the chat template: compare (same id and scored context) pairs none
    assert disco[1][4:6] == ["0", "no common item"]

# -- the pairwise view, best groups, labels (three runs sharing their items) -----------------------
@pytest.fixture(scope="module")
def trio(tmp_path_factory, discotex_dir):
    """fake at n_batch 512 and 64 (one model: identical numbers), and an oracle (every DISCOTEX
    answer gold), on the same 24 DISCOTEX items and the invented ABRICOT items; their report."""
    root = tmp_path_factory.mktemp("trio")
    runs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for n_batch in (512, 64):
            r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex,abricot_abs", "--data-dir", discotex_dir,
                       "--data", f"abricot={FIXTURE}", "--sample", 24, "--n-ctx", 8192, "--n-batch", n_batch,
                       "--out", root / f"nb{n_batch}")
            assert r.exit_code == 0, r.output
            runs.append(root / f"nb{n_batch}")
        runs.append(rewrite_run(runs[0], root / "oracle", "oracle",
                                lambda t, s: oracle_sample(t, s) if t == "discotex" else s))
        page = root / "trio.html"
        r = invoke("report", *runs, "--format", "html", "-o", page)
        assert r.exit_code == 0, r.output
    return {"runs": runs, "page": page}


def _data(page: Path) -> dict:
    return json.loads(page.read_text().split('id="report-data">', 1)[1].split("</script>", 1)[0])


def test_pairwise_data_is_compare_s(trio):
    """The page's matrices and best groups are compare.py's, per task, over the runs' common items."""
    from abricot_local.analysis import compare as cmp
    from dataclasses import replace

    from abricot_local.analysis.loading import load_run

    data = _data(trio["page"])
    labels = [r["label"] for r in data["runs"]]
    assert labels == ["fake (n_batch=512)", "fake (n_batch=64)", "oracle"]
    views = [replace(load_run(f), label=lab).only("discotex") for lab, f in zip(labels, trio["runs"])]
    c = cmp.compare(views)
    (task,) = [t for t in data["pairwise"]["tasks"] if t["task"] == "discotex"]
    assert task["runs"] == [0, 1, 2] and task["n"] == [24] and task["metric"] == "accuracy"
    for v, cell in zip(c.verdicts, task["cells"]):
        m = next(m for m in c.metrics if (m.a, m.b, m.metric) == (v.a, v.b, "accuracy"))
        assert (labels[cell["a"]], labels[cell["b"]], cell["kind"], cell["line"]) == (v.a, v.b, v.kind, v.line)
        assert (cell["diff"], cell["ci"], cell["p"]) == (m.diff, list(m.ci), m.p_holm)
    kinds = {(labels[x["a"]], labels[x["b"]]): x["kind"] for x in task["cells"]}
    assert kinds[("fake (n_batch=512)", "fake (n_batch=64)")] == cmp.IDENTICAL
    assert kinds[("fake (n_batch=512)", "oracle")] == cmp.DIFFERENT
    assert data["pairwise"]["best"]["discotex.accuracy"]["members"] == [2]  # the oracle alone
    settings = {(x["a"], x["b"]): dict((k, (va, vb)) for k, va, vb in x["differs"]) for x in data["pairwise"]["settings"]}
    assert settings[(0, 1)] == {"n_batch": ("512", "64")}


@pytest.mark.real  # a browser
def test_pairwise_matrix_best_group_labels_and_answer_columns_in_the_page(browser, trio):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    problems = []
    pg.on("pageerror", lambda err: problems.append(str(err)))
    pg.goto(trio["page"].as_uri(), wait_until="load")
    data = _data(trio["page"])
    labels = [r["label"] for r in data["runs"]]
    # every run named apart, in the leaderboard and as the explorer's answer columns
    assert pg.locator("#leaderboard-table tbody tr[data-kind=run] td .name").all_text_contents() == labels
    for task in ("discotex", "abricot_abs"):
        if task != "discotex":
            pg.locator(f'.tabs button[data-task="{task}"]').click()
        heads = pg.locator(f"#explorer-{task} table.items thead th").all_text_contents()
        assert heads[-4:] == ["gold", *labels] and heads[:2] == ["id", "source"]
        assert "gold_label" not in heads and "pred_label" not in heads  # one gold column, one answer per run
    # the matrix: 3 x 3, the diagonal empty, each cell the verdict and the difference row - column
    matrix = pg.locator('table.pairwise[data-task="discotex"]')
    assert matrix.locator("tbody tr").count() == 3 and matrix.locator("td.self").count() == 3
    cell = next(x for x in data["pairwise"]["tasks"][0]["cells"] if (x["a"], x["b"]) == (0, 2))
    upper = matrix.locator('td[data-a="0"][data-b="2"]')
    lower = matrix.locator('td[data-a="2"][data-b="0"]')
    assert upper.get_attribute("data-kind") == lower.get_attribute("data-kind") == "different"
    assert upper.locator(".diff").text_content() == "\u0394 {:+.3f} [{:+.3f}, {:+.3f}]".format(cell["diff"], *cell["ci"])
    assert lower.locator(".diff").text_content() == "\u0394 {:+.3f} [{:+.3f}, {:+.3f}]".format(
        -cell["diff"], -cell["ci"][1], -cell["ci"][0])
    shown_p = float(upper.locator(".p").text_content().removeprefix("p = "))
    assert shown_p == pytest.approx(cell["p"], rel=0.05) and shown_p < 0.05
    assert "settings that differ" in upper.get_attribute("title") and "model: fake / oracle" in upper.get_attribute("title")
    upper.click()
    detail = pg.locator('.pair-detail[data-task="discotex"]')
    assert detail.locator("p").text_content() == cell["line"]
    rows = detail.locator("table.settings tbody tr")
    assert [rows.nth(k).locator("td").all_text_contents() for k in range(rows.count())] == [["model", "fake", "oracle"]]
    # the best group: the oracle alone is marked on DISCOTEX accuracy
    keys = pg.eval_on_selector_all("#leaderboard-table thead th", "ths => ths.map(t => t.dataset.key)")
    col = keys.index("discotex.accuracy")
    marked = pg.eval_on_selector_all("#leaderboard-table tbody tr[data-kind=run]",
                                     f"trs => trs.map(tr => tr.children[{col}].dataset.best === '1')")
    assert marked == [False, False, True]
    assert problems == []
    ctx.close()


@pytest.mark.real  # a browser
def test_the_leaderboard_fits_1400_px(page):
    """14 metric columns: the ones that fit are shown, the chooser brings the others."""
    def widths():
        return page.evaluate("""() => { const box = document.querySelector('#leaderboard .scroll');
            return [box.scrollWidth, box.clientWidth, document.documentElement.scrollWidth,
                    document.documentElement.clientWidth]; }""")

    scroll, client, doc_scroll, doc_client = widths()
    assert scroll <= client and doc_scroll <= doc_client
    shown = int(page.get_attribute("#leaderboard-table", "data-shown"))
    total = page.locator("#leaderboard-columns input[type=checkbox]").count()
    assert 4 <= shown < total == 14  # each task's first metric at least; not all of them
    visible = page.eval_on_selector_all("#leaderboard-table thead th[data-key]",
                                        "ths => ths.filter(t => !t.hidden).map(t => t.dataset.key)")
    assert {"discotex.accuracy", "abricot_abs.pearson", "abricot_inc.pearson"} <= set(visible)
    page.locator("#leaderboard-columns summary").click()
    hidden = page.eval_on_selector_all("#leaderboard-columns input:not(:checked)", "xs => xs.map(x => x.dataset.column)")
    assert len(hidden) == total - shown
    for key in hidden:
        page.locator(f'#leaderboard-columns input[data-column="{key}"]').check()
    assert int(page.get_attribute("#leaderboard-table", "data-shown")) == 14  # the user's choice: it may scroll
    page.locator("#leaderboard-columns button").click()
    assert int(page.get_attribute("#leaderboard-table", "data-shown")) == shown and widths()[0] <= widths()[1]
