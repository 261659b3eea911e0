"""The other doors' JSON, like `report`'s and `compare`'s (test_rendered_once.py): the options its texts name
(errors.opt) are written in the door's words into each text before the document is serialised, never over the
serialised text. A named value holding a quote or a ``<`` (a data path) keeps JSON's escapes and the JSON parses:
the API's ``Comparison.render("json")``, `check --json` and ``Check.to_json()``, `kld --json`; and `kld --dry-run
--json` names its options as the command line's flags (they were left as markers, escaped). Fake backend, invented
data."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import test_rendered_once
from abricot_local.cli import cli
from abricot_local.errors import keywords, opt, render
from test_rendered_once import QUOTED, SAID

runs = test_rendered_once.runs  # a run labelled with errors' opening mark, and a plain one, both naming QUOTED
NOTE = f"the data: {opt('data', QUOTED)}"
KEYWORDS = render(opt("data", QUOTED), keywords)  # the API's words: data={"abricot": "a\\"b</script>.csv"}


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


def test_api_comparison_json_parses_with_a_quote_in_a_named_value(runs):
    import abricot_local as al
    from abricot_local.api.comparison import Comparison

    c = al.compare(*runs)
    c = Comparison(replace(c.result, notes=(*c.result.notes, NOTE)))
    doc = json.loads(c.render("json"))
    assert doc["notes"][-1] == f"the data: {KEYWORDS}" and KEYWORDS == 'data={"abricot": "a\\"b</script>.csv"}'
    assert f"note: the data: {KEYWORDS}" in c.render("table") == str(c)
    assert not any(m in c.render(fmt) for fmt in ("table", "markdown", "csv", "json") for m in "\ue001\ue002")


def _report():
    from abricot_local.run.check import CheckReport

    return CheckReport(checked=2, identical_predictions=2, max_abs_diff=0.0, atol=0.0, differences=(),
                       notes=("threads did not matter", NOTE))


def test_check_json_parses_with_a_quote_in_a_named_value(monkeypatch):
    from abricot_local.api.maintain import Check
    from abricot_local.run import check

    monkeypatch.setattr(check, "check_run", lambda *a, **k: _report())
    printed = invoke("check", "run-folder", "--json").stdout
    doc = json.loads(printed)
    assert doc["notes"] == ["threads did not matter", f"the data: {SAID}"] and doc["passed"] is True
    assert "\ue001" not in printed
    api = Check(**{f.name: getattr(_report(), f.name) for f in fields(_report())}).to_json()
    assert api == {**doc, "notes": ["threads did not matter", f"the data: {KEYWORDS}"]}


def test_kld_json_writes_its_texts_options_as_flags(monkeypatch):
    from abricot_local.run import kld

    result = SimpleNamespace(to_json=lambda: {"run": 'runs/a"b', "tasks": {"abricot_abs": {"text": NOTE}}})
    monkeypatch.setattr(kld, "kld_runs", lambda *a, **k: [result])
    doc = json.loads(invoke("kld", "ref", "run", "--json").stdout)
    assert doc == [{"run": 'runs/a"b', "tasks": {"abricot_abs": {"text": f"the data: {SAID}"}}}]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    """A fake ladder of two rungs (F16, Q4_0) on the first 2 of 4 invented DISCOTEX items: its rungs' folders."""
    from invented_data import write_discotex

    root = tmp_path_factory.mktemp("doors-ladder")
    models = root / "models.toml"
    models.write_text("".join(f'[t-{q.lower()}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "t"\n\n'
                              for q in ("F16", "Q4_0")), encoding="utf-8")
    invoke("run", "t-f16", "--models", models, "--quants", "F16,Q4_0", "--tasks", "discotex", "--data-dir",
           write_discotex(root / "d", 4), "--limit", 2, "--out", root / "ladder")
    return root / "ladder" / "t-f16", root / "ladder" / "t-q4_0"


def test_kld_dry_run_json_names_its_options_as_flags(ladder):
    printed = invoke("kld", *ladder, "--dry-run", "--json").stdout
    plan = json.loads(printed)
    note = plan["model"]["speed_note"]
    assert note.startswith("no calibration yet for these settings: --dry-run with --calibrate measures"), note
    assert "\\ue00" not in printed and "\ue000" not in json.dumps(plan, ensure_ascii=False)
