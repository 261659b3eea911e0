"""A sweep's models each into a folder of their own (run.request.apart: two models whose files have one name, or one
model given twice, refused at request time by every door); a plan the run refuses for its memory says so in its repr
and JSON (memory.refusal, unless force); merge's missing-shard advice carries the recorded data files; the API
warns a --resume that grows a run, as the CLI prints it. Fake backend, in-process."""

from __future__ import annotations

import ast
import warnings

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local import memory
from abricot_local.cli import cli
from abricot_local.errors import ModelError, render
from abricot_local.record import RESULTS
from abricot_local.run import machine_cost
from conftest import FIXTURE

FAKE = dict(backend="fake", n_ctx=8192, progress=False)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def quiet(call, *args, **kw):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got = call(*args, **kw)
    return got, [str(w.message) for w in said if issubclass(w.category, al.AbricotWarning)]


def test_a_sweep_refuses_two_models_of_one_folder_and_a_model_given_twice(tmp_path):
    for d in ("m1", "m2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "model.gguf").write_bytes(b"GGUF")
    m1, m2, out = tmp_path / "m1" / "model.gguf", tmp_path / "m2" / "model.gguf", tmp_path / "sw"
    dry = invoke("run", m1, m2, "--backend", "fake", "--tasks", "abricot_inc", "--out", out, "--dry-run")
    assert dry.exit_code == 2 and "would share the sweep's folder" in dry.output, dry.output
    assert f"{m1}" in dry.output and f"{m2}" in dry.output and f"{out / 'model'}" in dry.output
    with pytest.raises(al.AbricotError, match="would share the sweep's folder") as caught:
        al.evaluate([m1, m2], "abricot_inc", out=out, data={"abricot": FIXTURE}, **FAKE)
    assert "own out" in str(caught.value) and not out.exists()  # refused before anything is written
    for twice, said in ((["fake", "fake"], "'fake' is given twice"),
                        ([m1, f"{tmp_path}/m1/./model.gguf"], "are one model file")):
        with pytest.raises(al.AbricotError, match=said):
            al.plan(twice, "abricot_inc", data={"abricot": FIXTURE}, backend="fake")
    got = al.plan(["fake-a", "fake-b"], "abricot_inc", data={"abricot": FIXTURE}, sample=1, backend="fake")
    assert [m.label for m in got.models] == ["fake-a", "fake-b"]  # distinct folders: planned


def test_a_plan_whose_memory_does_not_fit_says_the_run_refuses_it(monkeypatch, capsys):
    over = memory.Fit(weights=8 << 30, kv=8 << 30, available=1 << 30)  # the run's check_memory raises on it
    with pytest.raises(ModelError) as caught:
        memory.check_memory(over.weights, over.kv, available=over.available)
    monkeypatch.setattr(machine_cost, "_memory", lambda *a: (over, ""))
    args = dict(sample=1, data={"abricot": FIXTURE}, backend="fake")
    refused = al.plan("fake", "abricot_inc", **args)
    assert "a problem in fake" in repr(refused)
    assert refused.to_json()["models"][0]["problem"] == render(str(caught.value.raw()))  # one rule, one text
    assert "does NOT fit (run refuses it without force=True)" in " ".join(str(refused).split())
    forced = al.plan("fake", "abricot_inc", force=True, **args)
    assert "problem" not in repr(forced) and forced.to_json()["models"][0]["problem"] is None
    assert "does NOT fit (force=True: the run tries it)" in " ".join(str(forced).split())
    cli_json = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_inc", "--sample", 1, "--data",
                      f"abricot={FIXTURE}", "--dry-run", "--json")
    assert "--force to try anyway" in cli_json.output and "force=True" not in cli_json.output


def test_merge_advice_names_the_recorded_data_and_works_as_said(tmp_path):
    shard1, _ = quiet(al.evaluate, "fake", "abricot_inc", shard="1/2", out=tmp_path / "s1", data={"abricot": FIXTURE},
                      **FAKE)
    with pytest.raises(al.AbricotError) as caught:
        al.merge(shard1, out=tmp_path / "m")
    said = str(caught.value)
    assert "models_file or model_dirs" in said and "data_dir" not in said  # only what a run does not record
    call = ast.parse(next(ln.strip() for ln in said.splitlines() if ln.strip().startswith("abricot_local.evaluate(")))
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.body[0].value.keywords}
    assert keywords["data"] == {"abricot": str(FIXTURE)} and keywords["shard"] == "2/2"
    quiet(al.evaluate, "fake", **{**keywords, "progress": False})  # the call as said, nothing added
    merged = al.merge(shard1, keywords["out"], out=tmp_path / "m")
    assert merged.record.config.shard is None and (tmp_path / "m" / RESULTS).is_file()
    cli_said = invoke("merge", tmp_path / "s1", "--out", tmp_path / "m2").output.replace(" \\\n", " ")
    assert f"--data abricot={FIXTURE}" in cli_said and "--models or --model-dir" in cli_said


def test_the_api_warns_a_resume_that_grows_the_run(tmp_path):
    args = dict(out=tmp_path / "g", data={"abricot": FIXTURE}, **FAKE)
    quiet(al.evaluate, "fake", "abricot_inc", sample=2, **args)
    grown, said = quiet(al.evaluate, "fake", "abricot_inc", sample=3, resume=True, **args)
    assert grown.record.config.sample == 3
    assert any(w.startswith(f"resume: the run in {tmp_path / 'g'} grows from sample=2 to sample=3") for w in said), said
