"""`report` and `compare` write the options their texts name (errors.opt) in the command line's words as each document
is built, never over its serialised text: a named value holding a quote or a ``<`` keeps JSON's and the HTML page's
escapes (the JSON parses, no ``</script>`` in the page), and a private-use character of a user's (a model's label)
passes through untouched, not read as a marker taking the rest of the document (every later ``_`` a ``-``).
errors.render leaves an opening mark with no whole marker after it as text."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.errors import Call, call, opt, render
from conftest import FIXTURE

ODD = "odd\ue000label"  # a model's label holding errors' opening mark (U+E000), alone
QUOTED = ("abricot", 'a"b</script>.csv')  # a data path a warning names: a quote, and the end of a script block
SAID = '--data abricot=a"b</script>.csv'


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def relabelled(src, dst, name: str):
    """A copy of the run ``src`` as model ``name``, its pearson warning naming :data:`QUOTED` (errors.opt)."""
    import shutil

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text(encoding="utf-8"))
    doc["model"]["name"] = doc["config"]["model"] = name
    warnings = doc["tasks"]["abricot_abs"]["warnings"]
    at = next(k for k, w in enumerate(warnings) if w.startswith("pearson rests on "))
    warnings[at] += f" (the data: {opt('data', QUOTED)})"
    (dst / "results.json").write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def runs(finished_run, tmp_path_factory):
    src = finished_run("run", "m", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
                       "--n-ctx", "8192", "--limit", "10")
    tmp = tmp_path_factory.mktemp("rendered-once")
    return relabelled(src, tmp / "odd", ODD), relabelled(src, tmp / "plain", "plain")


def test_render_reads_only_whole_markers():
    said = render(f"{ODD} {opt('limit')} and {opt('sample', 'N')} tail\ue000", flags)
    assert said == f"{ODD} --limit and --sample N tail\ue000"  # the lone mark kept, the options after it rendered
    assert render(f"\ue000not a field\ue002 {opt('max_items', 20)}", flags) == "\ue000not a field\ue002 --max-items 20"
    assert render("\ue000\ue004{not json\ue002", flags) == "\ue000\ue004{not json\ue002"
    assert render(call(Call("run", ("A",))), flags) == "abricot-local run A"
    assert render(opt("data", QUOTED), flags) == SAID


def test_json_report_parses_with_a_quote_in_a_named_value_and_keeps_a_label(runs):
    odd, _ = runs
    printed = invoke("report", odd, "--format", "json").stdout
    doc = json.loads(printed)
    run = doc["runs"][0]
    assert run["label"] == ODD and "registry_alias" in run and list(run["tasks"]) == ["abricot_abs"]
    assert run["tasks"]["abricot_abs"]["no_interval"]["pearson"].endswith(f"(the data: {SAID})")
    assert "\ue001" not in printed and "\ue002" not in printed  # no marker left


def test_html_page_keeps_its_escapes(runs):
    from abricot_local.report.html import render_html
    from abricot_local.report.tables import build

    page = render_html(build([str(runs[0])]), figures=False, namer=flags)
    block = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and ">" not in block  # the value's "</script>" stays escaped
    data = json.loads(block)
    assert data["runs"][0]["label"] == ODD
    assert any(w.endswith(f"(the data: {SAID})") for w in data["runs"][0]["warnings"])


def test_text_csv_and_samples_keep_a_label_and_the_keys_after_it(runs):
    odd, _ = runs
    for args in (("--format", "table"), ("--format", "markdown"), ("--format", "csv"),
                 ("--table", "samples", "--format", "csv")):
        out = invoke("report", odd, *args).stdout
        assert ODD in out and "abricot_abs" in out and "abricot-abs" not in out, args


def test_compare_writes_its_options_once(runs, tmp_path):
    odd, plain = runs
    out = invoke("compare", odd, plain, "--margin", "0.05").stdout
    assert ODD in out and "abricot_abs" in out and "abricot-abs" not in out and "(--margin 0.05)" in out
    invoke("compare", odd, plain, "--format", "json", "-o", tmp_path / "c.json")
    written = (tmp_path / "c.json").read_text(encoding="utf-8")
    assert written == invoke("compare", odd, plain, "--format", "json").stdout  # stdout and the file: rendered once
    doc = json.loads(written)
    assert [r["label"] for r in doc["runs"]] == [ODD, "plain"] and doc["matches"][0]["task"] == "abricot_abs"


def test_compare_json_parses_with_a_quote_in_a_named_value(runs):
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.loading import load_all
    from abricot_local.report.comparison import render as written

    c = compare(load_all([str(r) for r in runs]))
    c = replace(c, notes=(*c.notes, f"the data: {opt('data', QUOTED)}"))
    doc = json.loads(written(c, "json", flags))
    assert doc["notes"][-1] == f"the data: {SAID}"
    assert f"note: the data: {SAID}" in written(c, "table", flags)
    assert opt("data", QUOTED) in written(c, "table")  # no namer: left to the caller, as before
