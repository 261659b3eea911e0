"""`tasks` and `doctor` report each task's data (issue 10, item 10): found where, with its
item count, or missing and how to get it; nothing is downloaded."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.models import fetch
from abricot_local.cli import cli
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def block(text: str, name: str) -> str:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(name))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])


def test_tasks_lists_items_metrics_references_and_data(tmp_path):
    data = write_discotex(tmp_path / "d", 6)
    r = invoke("tasks", "--data-dir", data)
    assert r.exit_code == 0, r.output
    disco = block(r.stdout, "discotex")
    assert "metrics: accuracy, accuracy_ted, accuracy_wiki, binary_accuracy" in disco
    assert "items: 12" in disco and f"data: found at {data} (12 items)" in disco
    assert "published references: 0" in disco
    abs_ = block(r.stdout, "abricot_abs")
    assert "(group abricot)" in abs_ and "data: missing:" in abs_ and "abricot-local data pull abricot" in abs_
    assert "published references: 0" not in abs_
    # each option with the values it takes: the wordings and the published protocols, the default first
    assert "--prompt-variant (card, ita-bench)" in disco and "--protocol" not in disco
    assert "--prompt-variant (paper, calamita), --protocol (paper, calamita)" in abs_
    assert "group abricot: abricot_abs, abricot_inc" in r.stdout
    rows = {row["name"]: row for row in json.loads(invoke("tasks", "--data-dir", data, "--json").stdout)}
    assert rows["discotex"]["items"] == 12 and rows["discotex"]["data_path"] == str(data)
    assert rows["abricot_abs"]["items"] is None and rows["abricot_abs"]["references"]
    assert rows["abricot_abs"]["choices"] == {"prompt_variant": ["paper", "calamita"], "protocol": ["paper", "calamita"]}


def test_tasks_without_data_says_how_to_get_it_and_downloads_nothing(tmp_path):
    r = invoke("tasks")
    assert r.exit_code == 0, r.output
    disco = block(r.stdout, "discotex")
    assert "items: ?" in disco and "data: missing:" in disco and "abricot-local data pull discotex" in disco
    assert not (fetch.cache_dir() / "data").exists() or not any((fetch.cache_dir() / "data").rglob("*.tsv"))


def test_doctor_reports_the_data_status(tmp_path):
    write_discotex(fetch.cache_dir() / "data" / "discotex", 5)  # as `data pull discotex` leaves it
    r = invoke("doctor")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("task data"))
    rows = {ln.split()[0]: ln for ln in lines[head + 1:] if ln.startswith("  ")}
    assert rows["discotex"].split(None, 1)[1] == f"found at {fetch.cache_dir() / 'data' / 'discotex'} (10 items)"
    assert "missing:" in rows["abricot_abs"] and "abricot-local data pull abricot" in rows["abricot_abs"]
    facts = json.loads(invoke("doctor", "--json").stdout)
    tasks = {t["name"]: t for t in facts["tasks"]}
    assert tasks["discotex"]["items"] == 10 and tasks["abricot_inc"]["data_path"] is None
