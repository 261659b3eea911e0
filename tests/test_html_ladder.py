"""The HTML report's quant ladder and forest plots in a real headless Chromium: a long model name (a quant
ladder's ``gemma-3-270m-q4_k_m-dequantized-q2_k``) is drawn whole in the forest plots' labels, inside the
figure; a name over 56 characters is cut in its middle and whole in its tooltip; the notes on what the ladders
leave out are listed; a KLD cell shows its text (mean, CI or why none, the items and tokens it covers), never
``nan``, also from a page whose records lack the text. Fake backend, invented DISCOTEX items; needs Debian's
``chromium`` and ``playwright`` as tests/test_html_report.py does (skips without them, fails under CI=true)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

REF = "gemma-3-270m-f16"
LONG = "gemma-3-270m-q4_k_m-dequantized-q2_k"  # 36 characters: drawn whole
LONGER = "gemma-3-270m-it-qat-q4_0-unquantized-requantized-imatrix-q3_k_s"  # 63: cut in the middle
MODELS = {REF: "F16", LONGER: "Q3_K_S", LONG: "Q2_K"}


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r



@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A ladder F16 > Q3_K_S > Q2_K of one base on 8 DISCOTEX items (``sweep``), a second F16 run alone in its own
    folder (left out: a note); KLD of Q2_K over 3 items (a CI) and of Q3_K_S over 1 (none); the report's page."""
    from dataclasses import replace

    from abricot_local.backends.fake import FakeBackend
    from abricot_local.backends.options import ScoringOptions

    root = tmp_path_factory.mktemp("html_ladder")
    data = write_discotex(root / "d", 4)
    models = root / "models.toml"
    models.write_text("".join(f'[{name}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "gemma-3-270m"\n\n'
                              for name, q in MODELS.items()), encoding="utf-8")
    sweep, lone = root / "sweep", root / "alone"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        init = FakeBackend.__init__  # each model its own numbers (the fake's are the same for every name)
        mp.setattr(FakeBackend, "__init__", lambda self, model="fake", options=ScoringOptions(): init(
            self, model, replace(options, seed=options.seed + sum(model.encode()))))
        invoke("run", REF, "--models", models, "--quants", ",".join(MODELS.values()), "--tasks", "discotex",
               "--data-dir", data, "--limit", 8, "--out", sweep)
        invoke("run", REF, "--models", models, "--tasks", "discotex", "--data-dir", data, "--limit", 5,
               "--out", lone / REF)
        invoke("kld", sweep / REF, sweep / LONG, "--limit", 3)
        invoke("kld", sweep / REF, sweep / LONGER, "--limit", 1)
        page = root / "report.html"
        invoke("report", sweep, lone, "--models", models, "--format", "html", "-o", page)
    return {"page": page, "root": root}


def page_data(page: Path) -> dict:
    return json.loads(page.read_text(encoding="utf-8").split('id="report-data">', 1)[1].split("</script>", 1)[0])


def with_data(page: Path, dest: Path, change) -> Path:
    """``page`` with its data block changed by ``change`` (the data is not hashed: the page's script still runs)."""
    from abricot_local.report.html import script_json

    text = page.read_text(encoding="utf-8")
    head, rest = text.split('id="report-data">', 1)
    old, tail = rest.split("</script>", 1)
    data = page_data(page)
    change(data)
    dest.write_text(head + 'id="report-data">' + script_json(data) + "</script>" + tail, encoding="utf-8")
    return dest



def opened(browser, page: Path):
    """The page from file://, nothing else fetched; (page, context, the errors it logged)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    url = page.as_uri()
    ctx.route("**/*", lambda route: route.continue_() if route.request.url == url else route.abort())
    pg = ctx.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda err: problems.append(str(err)))
    pg.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
    pg.goto(url, wait_until="load")
    return pg, ctx, problems


def reference(data: dict) -> str:
    """The ladder's reference run's label (the F16 of the sweep, named apart from the lone F16)."""
    (ref,) = [r["run"] for r in data["ladder"] if r["reference"] is None]
    return ref


def ladder_cells(pg) -> list[list[str]]:
    rows = pg.locator("#ladder-table tbody tr")
    return [rows.nth(k).locator("td").all_text_contents() for k in range(rows.count())]


KLD = 9  # the ladder table's "KLD mean [95% CI]" column


def test_the_data_holds_what_the_page_draws(site):
    data = page_data(site["page"])
    labels = [r["label"] for r in data["rows"] if r["kind"] == "run"]
    ref = reference(data)
    assert {LONG, LONGER, ref} <= set(labels) and len(labels) == 4 and ref.startswith(REF + " (")  # two F16 runs
    ladder = {r["run"]: r for r in data["ladder"]}
    assert set(ladder) == {ref, LONGER, LONG}
    assert ladder[LONG]["kld"]["covers"].startswith("over 3 of the 8 items (") and "[" in ladder[LONG]["kld"]["text"]
    assert ladder[LONGER]["kld"]["ci95"] == [None, None] and "(no CI: one item)" in ladder[LONGER]["kld"]["text"]
    (note,) = data["ladderNotes"]
    lone = next(x for x in labels if x.startswith(REF) and x != ref)
    assert note.startswith(f"discotex: {lone} (F16) left out of the quant ladders of gemma-3-270m"), note


@pytest.mark.real  # a browser
def test_forest_labels_are_whole_inside_the_figure_and_in_their_tooltips(browser, site):
    pg, ctx, problems = opened(browser, site["page"])
    try:
        labels = pg.evaluate("""() => [...document.querySelectorAll('#figures svg g.label')].map(g => {
            const t = g.querySelector('text'), b = t.getBBox();
            return {text: t.textContent, title: g.querySelector('title').textContent, x: b.x, right: b.x + b.width,
                    anchor: +t.getAttribute('x'), width: +g.ownerSVGElement.getAttribute('width')};
        })""")
        assert not problems, problems
        assert labels
        titles = [x["title"] for x in labels]
        runs = [r["label"] for r in page_data(site["page"])["rows"] if r["kind"] == "run"]
        assert sorted(titles) == sorted(runs)  # one plot: every run's label, whole, in its tooltip
        for x in labels:
            assert x["x"] >= 0 and x["right"] <= x["anchor"] + 1, x  # inside the figure, left of the plot
            if len(x["title"]) <= 56:
                assert x["text"] == x["title"], x
            else:
                assert x["text"] != x["title"] and len(x["text"]) == 56, x
                assert x["text"] == x["title"][:27] + "\u2026" + x["title"][-28:], x
        assert any(x["text"] == LONG for x in labels)
        # the plot keeps its 330 px beside the margin
        assert all(x["width"] - x["anchor"] >= 320 for x in labels)
    finally:
        ctx.close()


@pytest.mark.real  # a browser
def test_the_ladder_notes_and_kld_text_never_nan(browser, site):
    data = page_data(site["page"])
    pg, ctx, problems = opened(browser, site["page"])
    try:
        assert not problems, problems
        notes = pg.locator("#ladder ul.note li").all_text_contents()
        assert notes == data["ladderNotes"]
        cells = {c[3]: c for c in ladder_cells(pg)}
        ref = reference(data)
        assert set(cells) == {ref, LONG, LONGER}
        for run in (LONG, LONGER):
            rec = next(r for r in data["ladder"] if r["run"] == run)
            assert cells[run][KLD] == rec["kld"]["text"], cells[run]
            assert "items (" in cells[run][KLD] and "tokens)" in cells[run][KLD]
        assert "(no CI: one item) over 1 of the 8 items" in cells[LONGER][KLD]
        assert cells[ref][KLD] == ""
        table = pg.locator("#ladder-table").inner_text()
        assert "nan" not in table.lower(), table
    finally:
        ctx.close()


@pytest.mark.real  # a browser
def test_without_the_text_the_cell_says_mean_ci_and_cover_never_nan(browser, site, tmp_path):
    def strip(data):
        for r in data["ladder"]:
            if r["kld"]:
                r["kld"].pop("text")
    page = with_data(site["page"], tmp_path / "old.html", strip)
    data = page_data(page)
    pg, ctx, problems = opened(browser, page)
    try:
        assert not problems, problems
        cells = {c[3]: c for c in ladder_cells(pg)}
        with_ci = next(r for r in data["ladder"] if r["run"] == LONG)["kld"]
        lo, hi = with_ci["ci95"]
        assert cells[LONG][KLD] == f"{with_ci['mean']:.4f} [{lo:.4f}, {hi:.4f}] {with_ci['covers']}"
        without = next(r for r in data["ladder"] if r["run"] == LONGER)["kld"]
        assert cells[LONGER][KLD] == f"{without['mean']:.4f} (no CI) {without['covers']}"
        assert "nan" not in pg.locator("#ladder-table").inner_text().lower()
    finally:
        ctx.close()


@pytest.mark.real  # a browser
def test_notes_alone_still_make_the_ladder_section(browser, site, tmp_path):
    def notes_only(data):
        data["ladder"] = []
    page = with_data(site["page"], tmp_path / "notes.html", notes_only)
    pg, ctx, problems = opened(browser, page)
    try:
        assert not problems, problems
        assert pg.locator("#ladder-table").count() == 0
        assert pg.locator("#ladder ul.note li").all_text_contents() == page_data(page)["ladderNotes"]
        assert "No ladder" in pg.locator("#ladder").inner_text()
    finally:
        ctx.close()
