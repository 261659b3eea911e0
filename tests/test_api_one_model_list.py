"""``evaluate([model], ...)``: a list of one model is a sweep, as docs/python.md's table says (a list back, the run
in <out>/<model>/); a plain string stays one run (the run in <out>/)."""

from __future__ import annotations

import warnings

import abricot_local as api
from abricot_local.record import RESULTS
from conftest import FIXTURE

ARGS = dict(backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, progress=False, sample=1)


def test_a_list_of_one_model_is_a_sweep_and_a_string_one_run(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        swept = api.evaluate(["fake"], "abricot_abs", out=tmp_path / "one", **ARGS)
        single = api.evaluate("fake", "abricot_abs", out=tmp_path / "single", **ARGS)
    assert isinstance(swept, list) and len(swept) == 1, swept
    assert (tmp_path / "one" / "fake" / RESULTS).is_file() and not (tmp_path / "one" / RESULTS).exists()
    assert swept[0].path == str(tmp_path / "one" / "fake")
    assert not isinstance(single, list) and (tmp_path / "single" / RESULTS).is_file()
    assert swept[0].record.model == single.record.model  # the same run, only its folder differs
