"""Runs edited, cut or pointed elsewhere after they finished (issue 29, items 2, 3, 5, 8, 10):
`check`, `report --verify`, `compare`, `merge` and html refuse what a model could not have
written, with one line naming the file, instead of "reproduced", "verified" or "identical".
All on the fake backend."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import jsonfiles
from abricot_local.run import folder as results
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.record import Sample, check_line, read_samples
from invented_data import write_discotex

SAMPLES = "samples-discotex.jsonl"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One finished fake run of 6 DISCOTEX items (and its data), copied by each test that edits it."""
    root = tmp_path_factory.mktemp("doctored")
    data = write_discotex(root / "d", 5)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 6,
                   "--out", root / "run")
    assert r.exit_code == 0, r.output
    return root / "run", data


@pytest.fixture
def run(made, tmp_path):
    shutil.copytree(made[0], tmp_path / "run")
    return tmp_path / "run"


def lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / SAMPLES).read_text().splitlines()]


def write_lines(out: Path, rows) -> None:
    (out / SAMPLES).write_text("".join(json.dumps(r) + "\n" for r in rows))


def edit_record(out: Path, change) -> None:
    doc = json.loads((out / "results.json").read_text())
    change(doc)
    (out / "results.json").write_text(json.dumps(doc))


def one_line(r) -> str:
    text = r.output.strip()
    assert "Traceback" not in text
    return text


# -- item 2: check recomputes the record; --verify validates every line --------------------------
def test_check_recomputes_every_metric_and_n_before_re_scoring(run, made):
    assert invoke("check", run, "--data-dir", made[1]).exit_code == 0  # the run as written reproduces

    edit_record(run, lambda d: d["tasks"]["discotex"]["metrics"].update(accuracy=0.95))
    r = invoke("check", run, "--data-dir", made[1])
    out = one_line(r)
    assert r.exit_code == 1 and "NOT reproduced" in out and "\nreproduced" not in out
    assert "results.json does not match its samples files" in out
    assert "discotex accuracy: recorded 0.95, recomputed from the samples" in out

    edit_record(run, lambda d: d["tasks"]["discotex"].update(n=600))
    r = invoke("check", run, "--data-dir", made[1], "--json")
    rep = json.loads(r.output[r.output.index("{"):])
    assert r.exit_code == 1 and not rep["reproduced"] and not rep["passed"]
    assert any(d.startswith("discotex n: recorded 600, recomputed from the samples 6") for d in rep["record_differs"])


def _n600(out):
    edit_record(out, lambda d: d["tasks"]["discotex"].update(n=600))


def _line(k, **change):
    def edit(out):
        rows = lines(out)
        rows[k].update(change)
        write_lines(out, rows)
    return edit


def _all_nan(out):
    write_lines(out, [{**s, "logprobs": [float("nan")] * len(s["logprobs"])} for s in lines(out)])


def _duplicate(out):
    rows = lines(out)
    rows[3] = {**rows[3], "id": rows[1]["id"]}
    write_lines(out, rows)


DOCTORED = {
    "n 600 over 6 samples": (_n600, "holds 6 sample(s) but results.json records n = 600"),
    "gold 99": (_line(2, gold=99), "line 3 is malformed (id 'task_1_ted_test_3'): gold 99 is not a choice index"),
    "pred -3 on 5 choices": (_line(0, pred=-3), "line 1 is malformed (id 'task_1_ted_test_1'): pred -3 is not a "
                                                "choice index (0..4: 5 choices)"),
    "all-NaN log-probs": (_all_nan, "line 1 is malformed (id 'task_1_ted_test_1'): logprobs[0] is nan (5 of 5 not "
                                    "finite)"),
    "1 log-prob for 5 choices": (_line(4, logprobs=[-1.0]), "line 5 is malformed (id 'task_1_ted_test_5'): it "
                                                            "holds 1 log-prob(s) for 5 choices"),
    "a duplicated id with other content": (_duplicate, "id 'task_1_ted_test_2' is on line 2 and again on line 4 "
                                                       "(other content)"),
    "pred not the argmax": (_line(1, pred=4, logprobs=[-0.1, -1.0, -2.0, -3.0, -4.0]),
                            "pred 4 is not the choice of the highest log-prob (0)"),
}


@pytest.mark.parametrize("case", list(DOCTORED))
def test_verify_check_and_html_refuse_a_doctored_samples_file(run, made, case):
    edit, why = DOCTORED[case]
    edit(run)
    r = invoke("report", run, "--verify")
    assert r.exit_code == 2 and "verified" not in r.output.replace("not verified", ""), r.output
    assert why in r.output and str(run / SAMPLES) in r.output, r.output
    r = invoke("report", run, "--format", "html")
    assert r.exit_code != 0 and r.output == f"error: {r.output[7:]}" and why in r.output, r.output
    assert r.output.count("\n") == 1
    r = invoke("check", run, "--data-dir", made[1])
    if case.startswith("n 600"):  # check reads every line it has, and names the record's n
        why = "discotex n: recorded 600, recomputed from the samples 6"
    assert r.exit_code != 0 and why in r.output and "\nreproduced" not in r.output, r.output
    assert "Traceback" not in r.output


# -- item 3: a finished run's samples match its record ------------------------------------------
def test_a_lost_last_line_is_an_error_for_compare_and_report(run, made):
    write_lines(run, lines(run)[:-1])
    r = invoke("compare", made[0], run)
    assert r.exit_code != 0 and "identical" not in r.output, r.output
    assert f"{run / SAMPLES} holds 5 sample(s) but results.json records n = 6 for task discotex (1 item(s) " \
           "missing" in r.output and "`abricot-local check" in r.output
    r = invoke("check", run, "--data-dir", made[1])  # check names the missing item
    assert r.exit_code == 1 and "1 item(s) the run scored are missing from its samples file: task_1_wiki_test_1" \
        in r.output and "NOT reproduced" in r.output


def test_a_torn_last_line_of_a_finished_file_names_the_item(run, made):
    text = (run / SAMPLES).read_text()
    (run / SAMPLES).write_text(text[: text.rindex('"logprobs"')])  # cut inside the last line
    r = invoke("report", run, "--verify")
    assert r.exit_code == 2 and "its last line (6) is cut short" in r.output
    assert "(item task_1_wiki_test_1)" in r.output and "verified: the metrics" not in r.output


def test_a_torn_line_is_forgiven_only_in_a_checkpoint(tmp_path):
    path = tmp_path / SAMPLES
    good = {"id": "a", "logprobs": [-1.0, -2.0], "gold": 0, "pred": 0}
    path.write_text(json.dumps(good) + '\n{"id": "b", "logpr')
    assert [s.id for s in read_samples(path, required=False, repair=True)] == ["a"]
    assert path.read_text() == json.dumps(good) + "\n"  # cut, so appends continue cleanly
    path.write_text(json.dumps(good))  # whole, but no newline: given one back
    read_samples(path, required=False, repair=True)
    assert path.read_text() == json.dumps(good) + "\n"
    path.write_text(json.dumps(good) + '\n{"id": "b", "logpr')
    with pytest.raises(ResultsError, match=r"last line \(2\) is cut short.*\(item b\)"):
        read_samples(path)


def test_merge_of_a_shard_that_lost_a_line_is_refused(made, tmp_path):
    data = made[1]
    shards = []
    for k in (1, 2):
        out = tmp_path / f"s{k}"
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 8,
                   "--shard", f"{k}/2", "--out", out)
        assert r.exit_code == 0, r.output
        shards.append(out)
    write_lines(shards[1], lines(shards[1])[:-1])
    r = invoke("merge", *shards, "--out", tmp_path / "m")
    assert r.exit_code != 0 and f"{shards[1] / SAMPLES} holds 3 sample(s) but results.json records n = 4" in r.output
    assert not (tmp_path / "m" / "results.json").exists()


def test_compare_against_an_all_nan_run_is_refused_not_told_apart(run, made):
    _all_nan(run)
    r = invoke("compare", made[0], run)
    assert r.exit_code != 0 and "cannot tell apart" not in r.output and "logprobs[0] is nan" in r.output

    from abricot_local.analysis import compare as cmp
    from abricot_local.analysis.loading import load_run

    views = [load_run(made[0]), load_run(made[0])]
    bad = replace(views[1], label="nan", path="x", run_tasks=tuple(
        t.with_samples(replace(s, logprobs=(float("nan"),) * 5) for s in t.samples) for t in views[1].run_tasks))
    with pytest.raises(ResultsError, match=r"run nan \(x\): task discotex: 6 sample\(s\) hold non-finite"):
        cmp.compare([views[0], bad])


# -- item 5: samples files lie inside their run folder ------------------------------------------
@pytest.mark.parametrize("name", ["/etc/passwd", "../../..", "../run2/samples-discotex.jsonl", "..", ""])
def test_a_samples_file_outside_the_folder_is_refused(run, made, name):
    edit_record(run, lambda d: d["tasks"]["discotex"].update(samples_file=name))
    for args in (("report", run, "--verify", "--strict"), ("report", run, "--format", "html", "--strict"),
                 ("check", run, "--data-dir", made[1])):
        r = invoke(*args)
        assert r.exit_code != 0 and "not a file name inside the run folder" in r.output, (args, r.output)
        assert "root:" not in r.output and "Traceback" not in r.output


def test_a_samples_file_linked_out_of_the_folder_is_refused(run, made, tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    shutil.move(run / SAMPLES, outside)
    os.symlink(outside, run / SAMPLES)
    for args in (("report", run, "--verify"), ("check", run, "--data-dir", made[1]), ("compare", made[0], run)):
        r = invoke(*args)
        assert r.exit_code != 0 and "is not a file inside the run folder" in r.output, (args, r.output)


# -- what is written is what a reader accepts ----------------------------------------------------
def test_a_sample_a_reader_would_refuse_is_not_written(tmp_path):
    good = Sample(id="a", logprobs=(-1.0, -2.0), gold=1, pred=0)  # a task's, built in code
    with results.OutputDir(tmp_path / "o") as out:
        out.append("t", good)
        with pytest.raises(ResultsError, match="pred 1 is not the choice of the highest log-prob"):
            out.append("t", replace(good, id="b", pred=1))
        with pytest.raises(ResultsError, match=r"logprobs\[1\] is a string"):
            out.append("t", replace(good, id="c", logprobs=(-1.0, "-2")))  # checked as its line will be read
    assert [s.id for s in read_samples(tmp_path / "o" / ".checkpoint" / "samples-t.jsonl")] == ["a"]
    with pytest.raises(ResultsError, match="gold 2 is not a choice index"):
        check_line(replace(good, gold=2), "x")


# -- item 8: temp files of an interrupted final write -------------------------------------------
def test_no_temp_file_survives_a_signal_in_the_final_write_and_a_resume(made, tmp_path, monkeypatch):
    data = made[1]
    out = tmp_path / "o"
    args = ("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 6, "--out", out)
    real = os.replace

    def replace(src, dst):
        if Path(dst).name == SAMPLES:
            raise KeyboardInterrupt  # SIGTERM (the CLI's KeyboardInterrupt) between the temp file and the rename
        return real(src, dst)

    monkeypatch.setattr(jsonfiles.os, "replace", replace)
    r = invoke(*args)
    assert r.exit_code == 130 and "resume with:" in r.output
    monkeypatch.undo()
    assert not list(out.glob(".*.tmp")) and (out / "INTERRUPTED").is_file()
    (out / f".{SAMPLES}.k1ll3d.tmp").write_text("{")  # what a SIGKILL there leaves
    (out / ".results.json.x9.tmp").write_text("{")
    r = invoke(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert not list(out.glob(".*.tmp")) and (out / SAMPLES).read_bytes() == (made[0] / SAMPLES).read_bytes()


# -- item 10: check on a folder that a run is still writing ------------------------------------
def test_check_on_a_folder_being_written_says_so(made, tmp_path, monkeypatch):
    from abricot_local.backends.fake import FakeBackend
    from abricot_local.run.check import check_run

    out = tmp_path / "o"
    real = FakeBackend.score_many
    seen = []

    def score_many(self, reqs):
        if not seen:
            with pytest.raises(ResultsError) as err:
                check_run(out, data_dir=str(made[1]))
            seen.append(str(err.value))
        return real(self, reqs)

    monkeypatch.setattr(FakeBackend, "score_many", score_many)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", made[1], "--limit", 2,
               "--out", out)
    assert r.exit_code == 0, r.output
    assert "a run is still writing it; wait for it to finish" in seen[0], seen
    assert "interrupted" not in seen[0] and f"{out} holds no finished run (running" in seen[0]
