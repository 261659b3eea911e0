"""An lm-eval output read as a run says what the `run` of the same items records: its tasks' warnings made from
the items read by the rule `run` records by (record/misleading.py), not the task's own alone; and a run's export
(`Run.to_lm_eval`, `report --format lm-eval`) carries the data files its run recorded, so that it reads back alone
where those files still are, as that run, warnings included.
"""

from __future__ import annotations

import json

from conftest import FIXTURE

import abricot_local

# the fake run test_lm_eval_export_provenance.py makes (finished_run makes it once a session)
FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")


def _warnings(run) -> dict:
    return {key: entry.warnings for key, entry in run.record.tasks.items()}


def test_an_export_reads_back_alone_as_its_run_warnings_included(finished_run, tmp_path):
    run = abricot_local.load_run(finished_run("run", "fake", *FAKE))
    assert all(entry.data and entry.warnings for entry in run.record.tasks.values())  # what the export must carry
    where = run.to_lm_eval(tmp_path / "exp")
    (results,) = where.glob("results_*.json")
    configs = json.loads(results.read_text(encoding="utf-8"))["configs"]
    assert {c["metadata"]["abricot_local_task"]: c["metadata"]["data"] for c in configs.values()} == {
        key: [f.to_dict() for f in entry.data] for key, entry in run.record.tasks.items()}

    back = abricot_local.load_run(where)  # no data given: the files the run recorded
    assert _warnings(back) == _warnings(run)
    assert {k: e.data for k, e in back.record.tasks.items()} == {k: e.data for k, e in run.record.tasks.items()}
    assert {v.kind for v in abricot_local.compare(run, back).verdicts} == {"identical"}


def test_an_lm_eval_output_keeps_the_warnings_its_items_give(finished_run, tmp_path):
    run = abricot_local.load_run(finished_run("run", "fake", *FAKE))
    where = run.to_lm_eval(tmp_path / "lm")
    (results,) = where.glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    for c in doc["configs"].values():  # as lm-eval writes it: no run's metadata, its --limit 4 in config
        c["metadata"] = {"version": c["metadata"]["version"]}
    results.write_text(json.dumps(doc), encoding="utf-8")

    back = abricot_local.load_run(where, data={"abricot": str(FIXTURE)})
    assert all(e.config.get("lm_eval_task") for e in back.record.tasks.values())  # read as lm-eval's run
    scored = {k: tuple(w for w in ws if "rests on" in w) for k, ws in _warnings(run).items()}
    assert all(scored.values())  # the run's warnings about its items' metrics
    assert _warnings(back) == _warnings(run)  # the data not the release, then what the 4 items give
