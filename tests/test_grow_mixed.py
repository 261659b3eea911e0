"""A run --until-settled, grown by --sample (a fixed-n run whose record says the looks taken in a note), then grown
--until-settled again, would plan those looks afresh and spend their error twice: refused, saying why and what
works (settle_record.refuse_said_looks); a --sample grow of it still works. Fake backend, in-process."""

from __future__ import annotations

from test_grow_interrupted import LOOKS, run


def test_an_until_settled_grow_of_a_run_that_took_looks_before_a_sample_grow_is_refused(tmp_path, claims,
                                                                                         abricot_file):
    out = tmp_path / "o"
    assert run(out, claims, abricot_file, *LOOKS, "--max-items", 15).exit_code == 0
    assert run(out, claims, abricot_file, "--sample", 20, "--resume").exit_code == 0
    before = (out / "results.json").read_bytes()
    r = run(out, claims, abricot_file, *LOOKS, "--max-items", 40, "--resume")
    assert r.exit_code == 2, r.output
    assert "its looks are said in a note, not kept as a rule" in r.output and "--sample N" in r.output, r.output
    assert (out / "results.json").read_bytes() == before  # nothing scored, nothing rewritten
    assert run(out, claims, abricot_file, "--sample", 25, "--resume").exit_code == 0
