"""The HTML report's quant ladder as a hobbyist reads it, and the words `report` says it in. A rung a
--until-settled rule judged shows its verdict short in its cell (``cannot tell yet within 0.2 (look 3 of 3)``), the
whole verdict (the rule's look, interval and guarantee, compare's fixed-n one beside it) listed under the table, so
that the table (size, speed, KLD, the verdict) fits a 1400 px window without a sideways scroll; the keep line and a
rule's next bound name the options in one door's words (`report`: the command line's flags; the API: Python's
keywords), never both; `report --html` is told ``--format html``. Pure and in-process; the window's check in a real
headless Chromium (marked real) as tests/test_html_ladder.py does."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.equivalence import UNSETTLED, Equivalence
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.analysis.sequential import Look
from abricot_local.analysis.settled import SettledVerdict
from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.errors import keywords, render
from abricot_local.report import ladder as rows

MARK = "\ue000"  # errors.opt's: never in what a door shows


def _rungs() -> list[Rung]:
    """F16 and a Q2_K its rule left open at its last look (40 of 600 items), a grow to 80 items its next bound."""
    look = Look("q", 3, 40, 600, 0.9, 0.2, UNSETTLED, 0.0, (-0.3, 0.3), (-0.3, 0.3))
    fixed_n = Equivalence("Q2_K", "F16", "discotex", "accuracy", 0.2, 40, 0.0, (-0.3, 0.3), UNSETTLED, items=101,
                          total=600)
    line = ("cannot tell yet within 0.2 (not settled by the last look, look 3 of 3: [-0.300, +0.300] at 90%, 40 of "
            "600 items; Bonferroni over the looks)")
    ref = Rung("fakebase", "discotex", "f16", "F16", "", None, None, n=40)
    return [ref, Rung("fakebase", "discotex", "q2_k", "Q2_K", "f16", None, None, n=40, verdict=fixed_n,
                      settled=SettledVerdict(look, 3, line, 80, 80))]


def test_report_html_is_told_format_html():
    r = CliRunner().invoke(cli, ["report", "--html"])
    assert r.exit_code == 2
    assert "Did you mean '--format html'?" in r.output and "--help" not in r.output.split("error:")[1], r.output
    r = CliRunner().invoke(cli, ["report", "--quant"])  # a value of --table
    assert "Did you mean '--table quant'?" in r.output, r.output
    r = CliRunner().invoke(cli, ["report", "--formt"])  # no value of any option: click's own guess
    assert "'--format'" in r.output, r.output


def test_the_keep_line_and_the_rules_step_name_the_options_in_one_doors_words():
    ref, q2 = _rungs()
    (c,) = choices([ref, q2])
    for said in (rows.choice_text(c), q2.settled.step):
        cli_words, api_words = render(said, flags), render(said, keywords)
        assert "--resume --until-settled --max-items 80" in cli_words, cli_words
        assert "=" not in cli_words and "Python" not in cli_words, cli_words
        assert "resume=True until_settled=True max_items=80" in api_words and "--" not in api_words, api_words
    # the JSON's line is the same text, for `report`'s door to render
    (j,) = [d["choice"] for d in rows.records([ref, q2]) if "choice" in d]
    assert j["line"] == rows.choice_text(c)


def test_the_page_says_a_rules_verdict_short_and_keeps_the_whole_for_under_the_table():
    from importlib import resources

    ref, q2 = _rungs()
    page = {p["quant"]: p for p in rows.page_records([ref, q2])}
    assert page["Q2_K"]["verdict_short"] == "cannot tell yet within 0.2 (look 3 of 3)"
    whole = page["Q2_K"]["verdict_text"]
    assert whole.startswith(q2.settled.line) and whole.endswith(rows.fixed_n_text(q2))  # nothing lost
    assert "verdict_short" not in page["F16"]  # the reference, a rung without a rule: its verdict is short
    css, js = (resources.files("abricot_local").joinpath("assets", n).read_text(encoding="utf-8")
               for n in ("report.css", "report.js"))  # (report/html.py's asset)
    assert "#ladder-table th { white-space: normal;" in css  # headers fold: th is nowrap elsewhere
    assert "r.verdict_short ?? r.verdict_text" in js and '"ladder-whole-" + (k + 1)' in js


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


NAMES = {"smollm2-135m-pypi-q4_1-dequantized-f16": "F16", "smollm2-135m-pypi-q4_1-dequantized-q8_0": "Q8_0",
         "smollm2-135m-pypi-q4_1-dequantized-q3_k_m": "Q3_K_M"}  # the hobbyist's ladder's names


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """The hobbyist's sweep, fake: three quants of one base --until-settled at a margin of 0.02, stopped at 20 items
    with their verdicts open (each model its own numbers); `report --format html -o`."""
    from dataclasses import replace

    from abricot_local.backends.fake import FakeBackend
    from abricot_local.backends.options import ScoringOptions
    from invented_data import write_discotex

    root = tmp_path_factory.mktemp("ladder_page")
    data = write_discotex(root / "d", 12)
    models = root / "models.toml"
    models.write_text("".join(f'[{n}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\n'
                              'base = "smollm2-135m-pypi-q4_1-dequantized"\n\n' for n, q in NAMES.items()),
                      encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        init = FakeBackend.__init__
        mp.setattr(FakeBackend, "__init__", lambda self, model="fake", options=ScoringOptions(): init(
            self, model, replace(options, seed=options.seed + sum(model.encode()))))
        invoke("run", next(iter(NAMES)), "--models", models, "--quants", ",".join(NAMES.values()), "--tasks",
               "discotex", "--data-dir", data, "--until-settled", "--margin", 0.02, "--max-items", 20,
               "--out", root / "sweep")
        out = root / "report.html"
        invoke("report", root / "sweep", "--models", models, "--format", "html", "-o", out)
    return out


@pytest.mark.real  # a browser
def test_the_ladder_fits_a_1400_px_window_its_verdicts_whole_under_it(browser, page):
    from test_html_ladder import opened, page_data

    text = page.read_text(encoding="utf-8")
    assert MARK not in text and "in Python" not in text  # `report -o`: the command line's words, as on stdout
    data = page_data(page)
    judged = [r for r in data["ladder"] if "verdict_short" in r]
    assert judged and all(r["choice"]["line"].count("--max-items") for r in data["ladder"] if r.get("choice"))
    pg, ctx, problems = opened(browser, page)
    try:
        assert not problems, problems
        box = pg.evaluate("""() => {
          const t = document.querySelector('#ladder-table'), wrap = t.parentElement;
          const cols = [...t.querySelectorAll('thead th')].map(th => th.textContent);
          const right = name => t.querySelector('thead th:nth-child(' + (cols.indexOf(name) + 1) + ')')
            .getBoundingClientRect().right;
          return {table: t.scrollWidth, room: wrap.clientWidth, window: innerWidth,
                  rights: ['verdict', 'size MB', 'items/s', 'KLD mean [95% CI]'].map(right)};
        }""")
        assert box["table"] <= box["room"], box  # no sideways scroll
        assert all(x <= box["window"] for x in box["rights"]), box
        rows_ = pg.locator("#ladder-table tbody tr")
        cells = {rows_.nth(k).locator("td").nth(3).inner_text(): rows_.nth(k).locator("td").nth(5).inner_text()
                 for k in range(rows_.count())}
        listed = pg.locator("#ladder-whole li").all_text_contents()
        for k, r in enumerate(judged, 1):
            assert cells[r["run"]] == f"{r['verdict_short']} [{k}]"
            assert listed[k - 1].startswith(f"{r['quant']} (") and f"verdict: {r['verdict_text']}" in listed[k - 1]
    finally:
        ctx.close()
