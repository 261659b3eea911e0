"""The run record (issue 19 item 2): results.json read and written by one typed module, runs of
this code and of main before it round-trip byte for byte, and a file that is not a run, or of
another schema, or with a wrong value, is one line naming it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import record as rec
from abricot_local.cli import cli
from abricot_local.record.outputs import samples_name
from abricot_local.run.check import check_run
from abricot_local.errors import ResultsError, UsageError
from abricot_local.record import docs
from conftest import FIXTURE
from invented_data import write_discotex

ROOT = Path(__file__).resolve().parents[1]
REF_RUN = ROOT / "tests" / "reference" / "gemma-3-270m"  # a committed run (tests/reference/README.md)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def fake_run(out: Path, data: Path, *extra) -> Path:
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--data", f"abricot={FIXTURE}",
               "--n-ctx", 8192, "--out", out, *extra)
    assert r.exit_code == 0, r.output
    return out


def assert_round_trips(folder: Path) -> rec.Record:
    """results.json and every samples file, read and written back, are the same bytes."""
    text = (folder / "results.json").read_text(encoding="utf-8")
    record = rec.read_run(folder)
    assert rec.to_json(record) == text
    assert rec.record_from_json(json.loads(text), "x").to_dict() == record.to_dict()
    for task, entry in record.tasks.items():
        path = folder / (entry.samples_file or samples_name(task))
        lines = "".join(json.dumps(s.line, ensure_ascii=False) + "\n" for s in rec.read_samples(path))
        assert lines == path.read_text(encoding="utf-8"), path
    return record


@pytest.fixture
def data(tmp_path):
    return write_discotex(tmp_path / "d", 5)  # 10 items


# -- round trips ---------------------------------------------------------------------------------
def test_runs_of_the_fake_backend_round_trip(tmp_path, data):
    plain = assert_round_trips(fake_run(tmp_path / "plain", data, "--tasks", "discotex,abricot"))
    assert plain.synthetic and plain.backend == "fake" and plain.config.seed == 1234
    assert list(plain.tasks) == ["discotex", "abricot_abs", "abricot_inc"] and plain.tasks["discotex"].n == 10
    assert plain.tasks["discotex"].chance["accuracy"] == 0.2 and plain.provenance.bootstrap.n_boot == 1000
    chat = assert_round_trips(fake_run(tmp_path / "chat", data, "--tasks", "abricot_abs", "--chat-template",
                                       "--sample", 7, "--shots", 1))
    assert chat.provenance.chat_template.head and chat.config.sample == 7
    # no --tasks: ABRICOT's data given, the others found; a task without data is skipped
    alone = tmp_path / "alone"
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--n-ctx", 8192, "--out", alone)
    assert r.exit_code == 0, r.output
    skipped = assert_round_trips(alone).skipped
    assert {s.task for s in skipped} == {"abricot_abs", "abricot_inc"} and all(s.how for s in skipped)
    for k in (1, 2):
        shard = assert_round_trips(fake_run(tmp_path / f"s{k}", data, "--tasks", "discotex", "--shard", f"{k}/2"))
        assert shard.config.shard == f"{k}/2" and shard.manifest.config.shard == f"{k}/2"
    assert invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m").exit_code == 0
    merged = assert_round_trips(tmp_path / "m")
    assert merged.config.shard is None and "shard" not in json.loads((tmp_path / "m" / "results.json").read_text())["config"]
    assert merged.provenance.merged_from == (str(tmp_path / "s1"), str(tmp_path / "s2"))


def test_published_checks_and_model_sources_round_trip(tmp_path):
    record = rec.read_run(REF_RUN)
    assert "source_facts" not in record.model.to_dict()
    check = rec.PublishedCheck(reference="m", source="paper 3-shot", task="abricot_abs", metric="pearson",
                               published=0.3, value=0.1, ci95=(0.05, 0.2), difference=-0.2, inside=False,
                               notes=("shots 0 (published: 3)",))
    model = replace(record.model, source="hf", as_written="org/repo:Q4_K_M", revision="abc", sha256_origin="memo",
                    source_facts={"etag": "x"})
    edited = replace(record, model=model, published=rec.Published(reproduces="ABRICOT paper: m", checks=(check,)))
    path = rec.write_record(tmp_path / "results.json", edited)
    back = rec.read_record(path)
    assert back == edited and rec.to_json(back) == path.read_text()
    written = json.loads(path.read_text())
    assert written["model"]["sha256_origin"] == "memo" and written["published"]["checks"][0]["ci95"] == [0.05, 0.2]
    written["model"]["sha256_origin"] = "guessed"
    with pytest.raises(ResultsError, match=r"model.sha256_origin is a string \('guessed'\), not 'computed' or 'memo'"):
        rec.record_from_json(written, "r.json")


def test_unknown_keys_of_this_schema_are_kept_in_place(tmp_path):
    doc = json.loads((REF_RUN / "results.json").read_text())
    doc = {"schema_version": 1, "future": {"a": [1, 2]}, **{k: v for k, v in doc.items() if k != "schema_version"}}
    doc["model"]["quantizer"] = "someone"
    doc["tasks"]["discotex"]["extra_stat"] = 0.5
    doc["provenance"]["gpu"] = {"name": "x"}
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    record = rec.record_from_json(json.loads(text), "r.json")
    assert record.extra == {"future": {"a": [1, 2]}} and record.model.extra == {"quantizer": "someone"}
    assert rec.to_json(record) == text


# -- what is not a run ---------------------------------------------------------------------------
@pytest.mark.parametrize("doc, says", [
    ({"results": {"t": {}}, "configs": {}, "versions": {}}, "is an lm-eval results file, not an abricot-local run"),
    ({"schema_version": 1, "runs": [], "baselines": []}, "is an abricot-local report (report --format json), not"),
    ({"checked": 3, "reproduced": True}, "is an abricot-local check report (check --json), not an abricot-local run"),
    ([1, 2], "is a JSON list, not an abricot-local run"),
    ({"name": "x"}, "is a JSON object with no schema_version, model or tasks, not an abricot-local run"),
    ({"schema_version": 7, "model": {}, "tasks": {}}, "has schema_version 7; this version reads 1"),
    ({"schema_version": 1, "model": {"name": "x"}}, "is malformed: tasks is missing"),
])
def test_a_file_that_is_not_a_run_is_named(tmp_path, doc, says):
    (tmp_path / "results.json").write_text(json.dumps(doc))
    with pytest.raises(ResultsError) as err:
        rec.read_run(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'results.json'} {says}")
    assert "\n" not in str(err.value)
    r = invoke("report", tmp_path, "--strict")
    assert r.exit_code == 2 and says in r.stderr and "Traceback" not in r.output


def test_json_that_does_not_parse_is_named(tmp_path):
    (tmp_path / "results.json").write_text('{"schema_version": 1,')
    with pytest.raises(ResultsError, match=r"results.json is not valid JSON"):
        rec.read_run(tmp_path)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["tasks"]["discotex"]["metrics"].update(accuracy="0.2"),
     "tasks.discotex.metrics.accuracy is a string ('0.2'), not a number"),
    (lambda d: d["tasks"]["discotex"]["metrics"].update(accuracy_ci95="[0, 1]"),
     "tasks.discotex.metrics.accuracy_ci95 is a string ('[0, 1]'), not a [low, high] pair of numbers"),
    (lambda d: d["tasks"]["discotex"].update(n="3"), "tasks.discotex.n is a string ('3'), not an integer"),
    (lambda d: d.pop("model"), "model is missing"),
    (lambda d: d["config"].update(tasks="discotex"), "config.tasks is a string ('discotex'), not a list"),
])
def test_a_wrong_value_names_its_key_for_report_and_check(tmp_path, edit, says):
    run = tmp_path / "run"
    shutil.copytree(REF_RUN, run)
    doc = json.loads((run / "results.json").read_text())
    edit(doc)
    (run / "results.json").write_text(json.dumps(doc))
    for args in (("report", run, "--strict"), ("check", run, "--data-dir", FIXTURE.parent)):
        r = invoke(*args)
        assert r.exit_code == 2 and f"{run / 'results.json'} is malformed: {says}" in r.stderr, (args, r.output)
        assert "Traceback" not in r.output


# -- samples files and checkpoints ---------------------------------------------------------------
@pytest.mark.parametrize("line, says", [
    ('[1, 2]', "line 2 is malformed: it is a JSON list, not a JSON object"),
    ('{"logprobs": [0.0], "gold": 0, "pred": 0}', "line 2 is malformed: id is missing"),
    ('{"id": "x", "gold": 0, "pred": 0}', "line 2 is malformed: logprobs is missing"),
    ('{"id": "x", "logprobs": [0.0, "-1"], "gold": 0, "pred": 0}',
     "line 2 is malformed: logprobs[1] is a string ('-1'), not a number"),
])
def test_a_bad_sample_line_is_named_by_html_csv_and_report(tmp_path, data, line, says):
    run = fake_run(tmp_path / "run", data, "--tasks", "discotex")
    path = run / "samples-discotex.jsonl"
    rows = path.read_text().splitlines()
    rows[1] = line
    path.write_text("\n".join(rows) + "\n")
    for args in (("--format", "html"), ("--table", "samples", "--format", "csv")):
        r = invoke("report", run, *args)
        assert r.exit_code == 2 and f"{path} {says}" in r.stderr, (args, r.output)
    r = invoke("report", run, "--verify")
    assert r.exit_code == 2 and says in r.stderr


@pytest.mark.parametrize("damage, says", [
    (lambda ck: (ck / "run.json").write_text('{"config": '), "run.json is not valid JSON"),
    (lambda ck: (ck / "run.json").write_text("[1, 2]"), "run.json is not a run's manifest (it is a JSON list"),
    (lambda ck: (ck / "run.json").write_text('{"model_sha256": null}'), "run.json is not a run's manifest (config is"),
    (lambda ck: _line(ck, 1, '{"logprobs": [0.0, 1.0], "gold": 0, "pred": 1}'), "line 2 is malformed: id is missing"),
    (lambda ck: _line(ck, 0, '["a", "b"]'), "line 1 is malformed: it is a JSON list"),
])
def test_a_hand_edited_checkpoint_is_named_on_resume(tmp_path, data, monkeypatch, damage, says):
    from conftest import fail_after

    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        assert invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data,
                      "--out", out).exit_code == 130
    damage(out / ".checkpoint")
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--out", out, "--resume")
    assert r.exit_code == 2 and says in r.stderr and ".checkpoint" in r.stderr, r.output
    assert "Traceback" not in r.output and not (out / "results.json").exists()


def _line(ck: Path, k: int, text: str) -> None:
    path = ck / "samples-discotex.jsonl"
    rows = path.read_text().splitlines()
    rows[k] = text
    path.write_text("\n".join(rows) + "\n")


# -- check passes only with everything checked ---------------------------------------------------
def test_check_with_items_missing_or_none_checked_fails(tmp_path, data):
    run = fake_run(tmp_path / "run", data, "--tasks", "discotex", "--limit", 3)
    path = run / "samples-discotex.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    ids = [json.loads(x)["id"] for x in lines]
    path.write_text(lines[0])  # cut to 1 of 3
    r = invoke("check", run)
    assert r.exit_code == 1 and "NOT reproduced" in r.output and "checked 1 items" in r.output
    assert f"discotex: 2 item(s) the run scored are missing from its samples file: {ids[1]}, {ids[2]}" in r.output
    path.write_text("")
    r = invoke("check", run, "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["reproduced"] is False and json.loads(r.stdout)["checked"] == 0
    assert [m["id"] for m in json.loads(r.stdout)["missing"]] == ids
    path.unlink()
    r = invoke("check", run)
    assert r.exit_code == 2 and f"{path} is missing" in r.stderr
    path.write_text("".join(lines))
    r = invoke("check", run, "--sample", 0)  # refused by the command line's range, before anything
    assert r.exit_code == 2 and "--sample must be at least 1, got 0" in r.stderr  # as run says it
    with pytest.raises(UsageError, match="^sample must be at least 1"):  # and by the library itself
        check_run(run, sample=0)
    assert invoke("check", run, "--sample", 2).exit_code == 0


# -- resume ----------------------------------------------------------------------------------------
def test_resume_of_a_finished_run_changes_nothing(tmp_path, data):
    run = fake_run(tmp_path / "run", data, "--tasks", "discotex")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--data", f"abricot={FIXTURE}",
               "--n-ctx", 8192, "--out", run, "--tasks", "discotex", "--resume")
    assert r.exit_code == 0, r.output
    assert f"{run} holds this run, complete: nothing to score, nothing written" in r.stderr
    assert "accuracy" in r.stdout and "wrote" not in r.output
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # created, seconds, scored_now kept


def test_resume_names_each_differing_option_with_both_values(tmp_path, data, monkeypatch):
    from conftest import fail_after

    out = tmp_path / "o"
    args = ("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
            "--n-ctx", 8192, "--shots", 3, "--out", out)
    with monkeypatch.context() as m:
        fail_after(m, 2, KeyboardInterrupt)
        assert invoke(*args).exit_code == 130
    r = invoke(*args[:-4], "--shots", 2, "--seed", 7, "--out", out, "--resume")
    assert r.exit_code == 2
    assert ("its config differs from the recorded run (--seed: recorded 1234, given 7; "
            "--shots: recorded 3, given 2)") in r.stderr, r.stderr
    fake_run(tmp_path / "done", tmp_path / "none", "--tasks", "abricot_abs")
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
               "--n-ctx", 4096, "--out", tmp_path / "done", "--resume")
    assert r.exit_code == 2 and "(--n-ctx: recorded 8192, given 4096)" in r.stderr


def test_differences_name_data_and_versions():
    m = rec.read_run(REF_RUN).manifest
    other = replace(m, model_sha256="ab" * 32, data_sha256={**m.data_sha256, "discotex": ("cd" * 32,)},
                    task_versions={**m.task_versions, "discotex": "2"})
    text = rec.resume_refusal("OUT", m, other)
    assert text.startswith("cannot resume OUT: its model file, data and task versions differ from the recorded run")
    assert f"recorded sha256 {m.model_sha256[:12]}..., given abababababab..." in text
    assert "discotex: recorded 1, given 2" in text
    assert rec.resume_refusal("OUT", m, m) is None


# -- the documentation -------------------------------------------------------------------------------
def test_results_md_is_generated_from_the_record():
    page = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    assert docs.render(page) == page, "docs/RESULTS.md is stale: python -m abricot_local.record.docs docs/RESULTS.md"
    for name in docs.DOCUMENTED:
        assert f"<!-- record:{name} -->" in page, name
    for cls in docs.DOCUMENTED.values():
        for f, _ in rec.codec.typed_fields(cls):
            assert f"| `{f.name}` |" in page and f.metadata["doc"]
