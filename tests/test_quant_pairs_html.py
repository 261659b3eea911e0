"""`report`'s quant comparison on the HTML page as in the text table (the `base` cell naming the folder of a pair of one
folder's runs: QuantPair.base_cell, one text for both), and, with no pair, a message the quant ladders' notes do not
contradict (a folder holding only two runs of one quant, a run of another quant given on its own: analysis.overview.
no_pairs). Reuses test_quant_pairs_per_folder's fake runs; in-process, no browser."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import test_quant_pairs_per_folder as per_folder

runs = per_folder.runs  # its module-scoped fixture: two sweeps of F16, Q8_0, Q2_K; runs given one by one


def page_data(rep) -> dict:
    from abricot_local.report.html import render_html

    page = render_html(rep, figures=False)
    block = re.search(r'<script[^>]*type="application/json"[^>]*>(.*?)</script>', page, re.S)
    return json.loads(block.group(1))


@pytest.fixture(scope="module")
def lone_beside_doubles(runs):
    """``dup/`` holding only two runs of Q8_0 (copies of ``y/q8`` and ``w/q8b``), and ``z/q2`` given on its own."""
    tmp = runs[0]
    dup = tmp / "dup"
    if not dup.exists():
        shutil.copytree(tmp / "y/q8", dup / "q8")
        shutil.copytree(tmp / "w/q8b", dup / "q8b")
    return [str(dup / "q8"), str(dup / "q8b"), str(tmp / "z/q2")]


def test_the_page_names_each_pairs_folder_as_the_text_table(runs):
    from abricot_local.report import tables

    _, sweep, ladder = runs
    rep = per_folder.build(*per_folder.folders(sweep), *per_folder.folders(ladder))
    page = [q["base"] for q in page_data(rep)["quant"]]
    assert sorted(page) == sorted([f"fakebase ({sweep})"] * 3 + [f"fakebase ({ladder})"] * 3), page
    text = tables.render(rep, "markdown", table="quant").split("### Quant ladder")[0]
    assert [ln.split("|")[1].strip() for ln in text.splitlines() if ln.startswith("| fakebase")] == page


def test_runs_given_one_by_one_keep_the_bare_base_on_the_page(runs):
    tmp = runs[0]
    rep = per_folder.build(*(tmp / p for p in ("x/f16", "y/q8", "z/q2")))
    assert {q["base"] for q in page_data(rep)["quant"]} == {"fakebase"}


def test_no_pair_says_so_without_contradicting_the_ladders_notes(lone_beside_doubles):
    from abricot_local.report import tables

    rep = per_folder.build(*lone_beside_doubles)
    assert not rep.quant
    text = tables.render(rep, "table", table="quant")
    assert "No two runs share a base model" not in text and "within one folder" in text, text
    assert "left out of the quant ladder" in text  # the notes that say why, beside it
    assert "\n\n- note: " in tables.render(rep, "markdown", table="quant")
    data = page_data(rep)
    assert data["quant"] == [] and "within one folder" in data["quantEmpty"]
    assert any("left out" in n for n in data["ladderNotes"])


def test_no_two_runs_of_one_base_still_says_so(runs):
    from abricot_local.report import tables

    tmp = runs[0]
    rep = per_folder.build(tmp / "x/f16")
    assert tables.render(rep, "table", table="quant") == "No two runs share a base model at different quants."
    assert page_data(rep)["ladderNotes"] == []

