"""What the tests' shared helpers must keep: conftest.fake_quants writes the registry the ladder modules wrote by hand;
test_quantize's models, written once per module and copied, are byte for byte what writing them gives, in the test's
own folder, a copy the test may change without changing the next test's; test_quant_pairs_per_folder's runs are made
once and are the ones test_quant_pairs_html reads."""

from __future__ import annotations

import pytest

import test_quant_pairs_per_folder as per_folder
import test_quantize
from abricot_local.models.registry import load_registry
from conftest import fake_quants

runs = per_folder.runs  # its fixture, as test_quant_pairs_html takes it
two, two_made, write_two = test_quantize.two, test_quantize.two_made, test_quantize.write_two  # as its tests get them


@pytest.mark.parametrize("quants, base, by_hand", [
    ({"fake-q8": "Q8_0", "fake-q2": "Q2_K"}, "fakebase",
     '[fake-q8]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q8_0"\n\n'
     '[fake-q2]\nbackend = "fake"\nbase = "fakebase"\nquant = "Q2_K"\n'),
    ({"smollm2-f16": "F16", "smollm2-q4_1": "Q4_1"}, "smollm2",
     '[smollm2-f16]\nbackend = "fake"\nbase = "smollm2"\nquant = "F16"\n\n'
     '[smollm2-q4_1]\nbackend = "fake"\nbase = "smollm2"\nquant = "Q4_1"\n\n'),
], ids=["fakebase", "smollm2"])
def test_fake_quants_is_the_registry_written_by_hand(tmp_path, quants, base, by_hand):
    from dataclasses import replace

    (tmp_path / "hand.toml").write_text(by_hand, encoding="utf-8")
    got, want = load_registry(fake_quants(tmp_path / "models.toml", quants, base)), load_registry(tmp_path / "hand.toml")
    assert {got[a].origin for a in quants} == {str(tmp_path / "models.toml")}
    assert {k: replace(v, origin="") for k, v in got.items()} == {k: replace(v, origin="") for k, v in want.items()}
    assert {a: (got[a].backend, got[a].base, got[a].quant) for a in quants} == {a: ("fake", base, q)
                                                                               for a, q in quants.items()}


def test_the_models_copied_for_a_test_are_the_ones_written_and_its_own(two, two_made, tmp_path):
    written = write_two(tmp_path / "again")
    for copy, made, fresh in zip(two, two_made, written):
        assert copy.read_bytes() == made.read_bytes() == fresh.read_bytes()
        assert copy.parent.parent == tmp_path and copy.relative_to(tmp_path) == made.relative_to(made.parents[1])
    before = two_made[0].read_bytes()
    two[0].write_bytes(b"changed")
    assert two_made[0].read_bytes() == before  # the next test's copy comes from it, unchanged


def test_the_pairs_runs_are_made_once_for_every_module_that_reads_them(runs):
    tmp, sweep, ladder = runs
    assert per_folder.MADE["runs"] is runs
    assert sorted(p.name for p in sweep.iterdir() if (p / "results.json").is_file()) == ["fake-f16", "fake-q2_k",
                                                                                        "fake-q8_0"]
    assert all((tmp / f / "results.json").is_file() for f in ("x/f16", "y/q8", "z/q2", "w/q8b")) and ladder.is_dir()
