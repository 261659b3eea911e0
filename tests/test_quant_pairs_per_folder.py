"""`report`'s "Quantization comparison" pairs runs as its quant ladder groups them (analysis.ladder.quant_groups, the one
rule): two sweeps of the same quants given to one report (a plain `--quants` sweep and a `--quants --until-settled`
one) are paired within each folder only, never across, each pair's reference its own folder's, the text table's `base`
cell naming the folder as the ladder's `model` cell does; runs given one by one (each alone in its folder) pair as they
always did. Fake backend, in-process; invented DISCOTEX items."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke
from invented_data import write_discotex

QUANTS = ("F16", "Q8", "Q2")  # the order of precision: a pair's reference is the higher


MADE: dict[str, tuple[Path, Path, Path]] = {}  # runs' runs, made once for the session


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Fake F16, Q8_0 and Q2_K of one base: ``sweep1`` a plain sweep (20 items), ``ladder1`` an --until-settled one
    (--max-items 20); and runs given one by one, each alone in its folder: ``x/f16``, ``y/q8``, ``z/q2``, ``w/q8b`` (a
    second Q8). Made once for the session (test_quant_pairs_html's fixture is this one; they are only read, but for
    its folder ``dup/`` of copies beside them), with a private cache and config."""
    from conftest import isolated_env

    if "runs" not in MADE:
        tmp = tmp_path_factory.mktemp("pairs")
        data = write_discotex(tmp / "discotex", per_source=30)
        models = fake_quants(tmp / "models.toml", {f"fake-{q.lower()}": q for q in ("F16", "Q8_0", "Q2_K")})
        sweep, ladder = tmp / "sweep1", tmp / "ladder1"
        common = ("--models", models, *FAKE, "--data-dir", data)
        with pytest.MonkeyPatch.context() as mp:  # as isolated_home, for runs shared past their test
            for name, value in isolated_env(tmp).items():
                mp.setenv(name, value)
            invoke("run", "fake-f16", "--quants", "F16,Q8_0,Q2_K", *common, "--sample", 20, "--out", sweep)
            invoke("run", "fake-f16", "--quants", "F16,Q8_0,Q2_K", *common, "--until-settled", "--max-items", 20,
                   "--out", ladder)
            for model, out, n in (("fake-f16", "x/f16", 12), ("fake-q8_0", "y/q8", 10), ("fake-q2_k", "z/q2", 14),
                                  ("fake-q8_0", "w/q8b", 8)):
                invoke("run", model, *common, "--sample", n, "--out", tmp / out)
        MADE["runs"] = tmp, sweep, ladder
    return MADE["runs"]


def folders(sweep: Path) -> list[str]:
    return [str(x) for x in sorted(sweep.iterdir()) if (x / "results.json").exists()]


def build(*paths):
    from abricot_local.report import tables

    return tables.build([str(p) for p in paths])


def quant_doc(rep) -> dict:
    from abricot_local.report import tables

    return json.loads(tables.render(rep, "json", table="quant"))


def pairs(doc) -> list[tuple[str, str, str, str]]:
    """(ref folder, other folder, ref quant, other quant) of each row of the quant comparison (Q8_0 as Q8)."""
    return [(r["ref_folder"], r["other_folder"], r["ref_quant"].split("_")[0], r["other_quant"].split("_")[0])
            for r in doc["quant_comparison"]]


def test_two_sweeps_of_the_same_quants_are_paired_within_each_folder(runs):
    _, sweep, ladder = runs
    for order in ((sweep, ladder), (ladder, sweep)):
        got = pairs(quant_doc(build(*folders(order[0]), *folders(order[1]))))
        assert all(Path(a).parent == Path(b).parent for a, b, _, _ in got), got  # never across the folders
        for folder in (sweep, ladder):
            mine = [(q1, q2) for a, _, q1, q2 in got if Path(a).parent == folder]
            assert sorted(mine) == sorted(combinations(QUANTS, 2)), mine  # every pair, its reference the higher
        assert len(got) == 6  # not 12: F16 of one folder against Q2 of the other gone


def test_the_pairs_group_as_the_ladder_does(runs):
    from abricot_local.analysis.ladder import ladders

    _, sweep, ladder = runs
    rep = build(*folders(sweep), *folders(ladder))
    rungs = ladders(rep.runs)
    in_ladders: dict = {}
    for r in rungs:
        in_ladders.setdefault((r.task, r.ladder), set()).add(r.run)
    in_pairs: dict = {}
    for q in rep.quant:
        in_pairs.setdefault((q.task, q.ladder), set()).update({q.ref.label, q.other.label})
    assert in_pairs == in_ladders and {w for _, w in in_pairs} == {str(sweep), str(ladder)}


def test_the_text_table_names_each_pairs_folder(runs):
    from abricot_local.report import tables

    _, sweep, ladder = runs
    rep = build(*folders(sweep), *folders(ladder))
    text = tables.render(rep, "markdown", table="quant")
    quant, ladder_part = text.split("### Quant ladder", 1)
    bases = [ln.split("|")[1].strip() for ln in quant.splitlines() if ln.startswith("| fakebase")]
    models = {ln.split("|")[1].strip() for ln in ladder_part.splitlines() if ln.startswith("| fakebase")}
    assert sorted(bases) == sorted([f"fakebase ({sweep})"] * 3 + [f"fakebase ({ladder})"] * 3), bases
    assert set(bases) == models  # the ladder's model cells: the same words for the same group
    for q, row in zip(rep.quant, quant_doc(rep)["quant_comparison"]):
        assert row["base"] == "fakebase" and row["ref_model"] == q.ref.label  # JSON, CSV: as they were


def test_runs_given_one_by_one_pair_as_they_always_did(runs):
    tmp, _, _ = runs
    x, y, z, w = (str(tmp / p) for p in ("x/f16", "y/q8", "z/q2", "w/q8b"))
    got = pairs(quant_doc(build(x, y, z)))
    assert got == [(x, y, "F16", "Q8"), (x, z, "F16", "Q2"), (y, z, "Q8", "Q2")]
    # a quant given twice, each run alone in its folder: every pair of different quants still (the ladder has none)
    doc = quant_doc(build(x, y, z, w))
    assert pairs(doc) == [(x, y, "F16", "Q8"), (x, z, "F16", "Q2"), (x, w, "F16", "Q8"), (y, z, "Q8", "Q2"),
                          (w, z, "Q8", "Q2")]
    assert doc["quant_ladder"] == [] and len(doc["quant_ladder_notes"]) == 4
    from abricot_local.report import tables

    text = tables.render(build(x, y, z, w), "markdown", table="quant")
    assert "| fakebase |" in text and "fakebase (" not in text.split("### Quant ladder")[0]


def test_a_run_alone_beside_two_sweeps_pairs_with_neither(runs):
    tmp, sweep, ladder = runs
    lone = str(tmp / "z/q2")
    doc = quant_doc(build(*folders(sweep), *folders(ladder), lone))
    assert lone not in {f for a, b, _, _ in pairs(doc) for f in (a, b)} and len(pairs(doc)) == 6
    assert any("left out" in n and "fake-q2" in n for n in doc["quant_ladder_notes"])  # the ladder says why
