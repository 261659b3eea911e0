"""A run's published verdicts have one maker (analysis.baselines.rejudge), and each task's N (the items its data
holds: the finite-population correction's) one rule (baselines.items_total): the entry's ``available``, else the
recorded verdict's ``items_total`` (a record older than ``available``), else the data counted here, else no N and
no verdict, never the items scored. A run's end (run/record.py), `merge` and `report --verify`/`check`
(analysis/overview.py) all call it. Fake backend; the invented ABRICOT rows (18 items, 12 drawn)."""

from __future__ import annotations

import csv
import json
import shutil
from dataclasses import replace

import pytest
from click.testing import CliRunner

from abricot_local.analysis import baselines
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.overview import published_differences, verdict_differences
from abricot_local.cli import cli
from abricot_local.run import merge as merging
from conftest import FIXTURE

ARGS = ("--backend", "fake", "--tasks", "abricot_abs", "--n-ctx", 8192, "--sample", 12)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A fake run of 12 of the fixture's 18 ABRICOT items under an entry reproducing the paper's row, and its two
    shards."""
    root = tmp_path_factory.mktemp("one_rejudge")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for out, more in (("whole", ()), ("s1", ("--shard", "1/2")), ("s2", ("--shard", "2/2"))):
            r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", *ARGS, *more,
                       "--out", root / out)
            assert r.exit_code == 0, r.output
    return root


def judged(run):
    return [baselines.VerdictTask(t.name, t.instance(), tuple(t.samples)) for t in run.run_tasks]


def copied(made, tmp_path, name, change):
    """Run ``name`` of ``made`` copied, its results.json changed by ``change`` (the JSON document)."""
    out = tmp_path / name
    shutil.copytree(made / name, out)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    change(doc)
    (out / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    return out


def test_n_is_available_then_the_recorded_items_total_then_the_data_never_the_items_scored(made):
    run = load_run(made / "whole")
    entry, rec = run.record.tasks["abricot_abs"], run.record.published
    assert (entry.n, entry.available) == (12, 18) and [c.items_total for c in rec.checks] == [18]
    n = baselines.items_total
    assert n("abricot_abs", entry, rec, 99) == 18  # available first, over a verdict's claim and the data
    older = replace(entry, available=None)
    assert n("abricot_abs", older, rec, 99) == 18  # a record older than available: its verdict's N
    forged = replace(rec, checks=tuple(replace(c, items_total=7) for c in rec.checks))
    assert n("abricot_abs", older, forged, 99) == 7 and n("abricot_abs", entry, forged, 99) == 18
    assert n("abricot_abs", older, None, 99) == 99  # then the data, counted here
    assert n("abricot_abs", older, None, None) is None  # then none: never entry.n (12)
    assert n("other", older, rec, None) is None  # another task's verdict states nothing of this one


def test_a_verdict_claiming_the_sample_is_the_whole_task_is_caught(made, tmp_path):
    """The case where the three places' old rules differed: a record whose verdict states N = the items scored
    (12, a set judged exact; by hand, or the old fallbacks' `len(rows)`/`entry.n`). run/record.py counted the data
    (18); merge and `report --verify` took N from the very verdict they re-check (12), so verify agreed with it."""
    run = load_run(made / "whole")
    rec = run.record
    exact = baselines.verdict(rec.published.reproduces, rec.tasks,  # the verdict made at N = n
                              {t.key: baselines.evidence(t.task, t.samples, 12) for t in judged(run)})
    assert [c.items_total for c in exact.checks] == [12] and exact.checks != rec.published.checks
    forged = copied(made, tmp_path, "whole", lambda doc: doc.update(published=json.loads(json.dumps(
        replace(rec.published, checks=exact.checks).to_dict()))))
    was = load_run(forged)
    assert was.record.published.checks == exact.checks
    old_n = {c.task: c.items_total for c in was.record.published.checks if c.items_total}["abricot_abs"]
    with open(FIXTURE, encoding="utf-8", newline="") as f:
        rows = sum(1 for _ in csv.DictReader(f))
    assert old_n == 12 != rows == 18  # old verify's (and merge's) N, against old record.py's: its data counted
    found = verdict_differences(was)
    assert any("items_total: recorded 12, made again 18" in line for line in found), found
    assert published_differences(rec, rec.published.reproduces, judged(run)) == ()  # the honest record holds


def test_an_older_record_without_available_is_judged_as_recorded(made, tmp_path):
    older = copied(made, tmp_path, "whole", lambda doc: doc["tasks"]["abricot_abs"].pop("available"))
    run = load_run(older)
    assert run.record.tasks["abricot_abs"].available is None
    assert verdict_differences(run) == ()
    again = baselines.rejudge(run.record.published.reproduces, run.record.tasks, judged(run),
                              drawn=True, recorded=run.record.published)
    assert again.checks == run.record.published.checks


def test_no_n_known_gives_no_verdict_rather_than_an_exact_one(made):
    run = load_run(made / "whole")
    tasks = {k: replace(e, available=None) for k, e in run.record.tasks.items()}
    fresh = baselines.rejudge(run.record.published.reproduces, tasks, judged(run))
    assert [(c.verdict, c.items_total, c.n) for c in fresh.checks] == [(None, None, None)]
    assert fresh.checks[0].value == run.record.published.checks[0].value  # the row still checked, unjudged
    told = baselines.rejudge(run.record.published.reproduces, tasks, [replace(t, total=18) for t in judged(run)])
    assert told.checks == run.record.published.checks  # the data counted here: the run's own verdict


def test_merge_takes_n_from_available_not_from_a_shards_verdict(made, tmp_path):
    """A shard whose verdict states another N (7) merges into the verdict an unsharded run makes: merge reads the
    entries' ``available`` (its old code read the shard's ``items_total``)."""
    def forge(doc):
        for c in doc["published"]["checks"]:
            c["items_total"] = 7

    s1 = copied(made, tmp_path, "s1", forge)
    assert load_run(s1).record.published.checks[0].items_total == 7
    merging.merge([s1, made / "s2"], tmp_path / "m")
    merged = json.loads((tmp_path / "m" / "results.json").read_text(encoding="utf-8"))["published"]
    whole = json.loads((made / "whole" / "results.json").read_text(encoding="utf-8"))["published"]
    assert merged == whole and merged["checks"][0]["items_total"] == 18
