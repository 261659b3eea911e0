"""`tasks`: the published rows listed as published, and its JSON free of the library's option markers."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.tasks.catalog import task_catalog


def test_the_listing_shows_each_published_value_and_its_json_names_flags(tmp_path):
    runner = CliRunner()
    text = runner.invoke(cli, ["tasks", "--data-dir", str(tmp_path)]).output
    rows = task_catalog((), str(tmp_path))
    refs = [(r["name"], x) for r in rows for x in r["references"]]
    assert refs  # ABRICOT's published rows
    block: dict[str, list[str]] = {}  # each task's lines, by its name
    name = ""
    for ln in text.splitlines():
        if ln.startswith("  "):
            block[name].append(ln)
        else:
            name = ln.split(":", 1)[0].split()[0]
            block[name] = []
    for name, x in refs:
        line = next(ln for ln in block[name] if ln.startswith(f"    {x['source']} ({x['metric']}):"))
        assert f"{x['model']} {x['value']:.2f}" in line, (name, x, line)
    listing = runner.invoke(cli, ["tasks", "--json", "--data-dir", str(tmp_path)]).output
    assert not any("\ue000" <= ch <= "\uf8ff" for ch in listing)
    assert "--data abricot=FILE" in json.loads(listing)[0]["data_note"]
