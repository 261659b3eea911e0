"""kld.json's entry typed once (analysis/kld.KldEntry: written by run/kld.write, read back by kld_of, its version
checked), `kld --json`'s shape from its result (run/kld.KldResult.to_json); a speed's `calibrated` asked of the
Speed (run/cost.Speed.calibrated); the dead helpers gone."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from abricot_local.analysis import kld as stats
from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import ResultsError
from abricot_local.record import Model
from abricot_local.run.kld import KldResult, write

S = stats.KldStats(7, 0.25, (0.125, 0.5), 0.25, 0.5, 0.75, 1.0, 0.5, 2, 0.0625, 2, "m")
OLD_ENTRY = {"reference": {"folder": "/x", "model": "old", "quant": "Q9", "model_sha256": "z" * 64},
             "model_sha256": "b" * 64, "quant": "Q4_0", "seconds": 1.5, "decode_calls": 3, "engine": "prefix",
             "n_batch": 512, "tasks": {"t": {"n_tokens": 10, "mean": 0.01, "ci95": [0.005, 0.015], "median": 0.008,
                                             "p99": 0.05, "p99_9": 0.06, "max": 0.07, "same_top": 0.9}}}
STATS_TEXT = """{
     "n_tokens": 7,
     "mean": 0.25,
     "ci95": [
      0.125,
      0.5
     ],
     "median": 0.25,
     "p99": 0.5,
     "p99_9": 0.75,
     "max": 1.0,
     "same_top": 0.5,
     "n_items": 2,
     "se_token": 0.0625,
     "n_units": 2,
     "ci_method": "m"
    }"""


def _written(tmp_path) -> tuple[Path, KldResult, SimpleNamespace, SimpleNamespace]:
    rung = tmp_path / "rung"
    rung.mkdir()
    (rung / stats.FILE).write_text(json.dumps({"kind": stats.KIND, "version": 1, "references": {"z" * 64: OLD_ENTRY}}))
    res = KldResult(Path("/runs/ref"), rung, "Q4_0", {"t": S}, 2.34567, 9, (rung, Path("/runs/other")))
    ref, rec = SimpleNamespace(model=Model(name="ref", sha256="a" * 64)), SimpleNamespace(model=Model(name="r",
                                                                                                       sha256="b" * 64))
    write(res, ref, rec, ScoringOptions(engine="prefix", n_batch=64))
    return rung, res, ref, rec


def test_an_entry_is_written_in_the_file_s_one_shape_and_read_back_as_written(tmp_path):
    """The bytes kld.json held before the entry was typed (an older entry kept as it is), and reading it back
    gives what was written."""
    rung, res, ref, rec = _written(tmp_path)
    old = json.dumps(OLD_ENTRY, indent=1).replace("\n", "\n  ")
    assert (rung / stats.FILE).read_text() == f"""{{
 "kind": "abricot-local kld",
 "version": 2,
 "references": {{
  "{'z' * 64}": {old},
  "{'a' * 64}": {{
   "reference": {{
    "folder": "/runs/ref",
    "model": "ref",
    "model_sha256": "{'a' * 64}"
   }},
   "model_sha256": "{'b' * 64}",
   "quant": "Q4_0",
   "seconds": 2.346,
   "decode_calls": 9,
   "pass_runs": [
    "{rung}",
    "/runs/other"
   ],
   "engine": "prefix",
   "n_batch": 64,
   "tasks": {{
    "t": {STATS_TEXT}
   }}
  }}
 }}
}}
"""
    kept = stats.entries(rung)
    back = stats.KldEntry.from_dict(kept["a" * 64])
    assert back == res.entry(ref.model, rec.model, ScoringOptions(engine="prefix", n_batch=64))
    assert back.to_dict() == kept["a" * 64] and back.tasks == {"t": S} and back.pass_runs == (str(rung), "/runs/other")
    assert stats.kld_of(rung, ref.model, rec.model) == {"t": S}
    older = stats.KldEntry.from_dict(kept["z" * 64])  # version 1's shape: no pass_runs, its reference's quant
    assert (older.pass_runs, older.reference_model, older.seconds) == ((), "old", 1.5)
    with pytest.raises(ResultsError, match=r"rung/kld.json: an entry is damaged .*seconds 'soon' is not a number"):
        stats.KldEntry.from_dict({**kept["a" * 64], "seconds": "soon"}, str(rung / stats.FILE))


def test_kld_json_output_is_the_result_s_own_shape():
    res = KldResult(Path("ref"), Path("rung"), "Q4_0", {"t": S}, 2.34567, 9, (Path("rung"),))
    got = res.to_json()
    assert list(got) == ["reference", "run", "quant", "seconds", "decode_calls", "pass_runs", "tasks"]
    assert got == {"reference": "ref", "run": "rung", "quant": "Q4_0", "seconds": 2.34567, "decode_calls": 9,
                   "pass_runs": ["rung"], "tasks": {"t": {**S.to_dict(), "covers": "over 2 items (7 tokens)",
                                                          "text": "0.2500 [0.1250, 0.5000] over 2 items (7 tokens)"}}}


@pytest.mark.parametrize("version,why", [(3, "a newer abricot-local wrote it: read it with that one, or move it"),
                                         (0, "not one kld writes"), ("2", "not one kld writes"),
                                         (None, "not one kld writes"), (True, "not one kld writes")])
def test_a_kld_json_of_a_version_not_read_here_is_refused_in_one_line(tmp_path, version, why):
    rung, res, ref, rec = _written(tmp_path)
    path = rung / stats.FILE
    doc = json.loads(path.read_text())
    doc["version"] = version
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    for read in (lambda: stats.kld_of(rung, ref.model, rec.model),
                 lambda: write(res, ref, rec, ScoringOptions())):  # the writer keeps what it cannot read
        with pytest.raises(ResultsError) as err:
            read()
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"{path}: version {version!r}, which this abricot-local does not "
                                                  "read (it reads 1 to 2)") and why in msg
        assert msg.endswith("move it away and run `abricot-local kld` again")
    assert path.read_bytes() == before


def test_a_speed_says_whether_it_is_calibrated_and_the_dead_helpers_are_gone():
    from abricot_local.cli import options
    from abricot_local.models.spec import ModelSpec
    from abricot_local.run.cost import CALIBRATED, SCALED, Speed
    from abricot_local.run.plan import Plan

    assert Speed(1e-3, 0.0, 1e-2, 1e-3, 2.0, CALIBRATED, "m", "now").calibrated
    assert not Speed(1e-3, 0.0, 1e-2, 1e-3, 2.0, SCALED, "m", "now", 0.25).calibrated
    assert not hasattr(options, "data_dir_option") and not hasattr(Plan, "model_alias")
    assert not hasattr(ModelSpec, "is_split")
