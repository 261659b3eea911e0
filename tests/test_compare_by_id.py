"""`compare --by-id` (API ``by_id=True``): items paired on their id alone, each pair one item scored under two
contexts. Two fake-backend runs of ABRICOT's paper protocol with two --shot-seed values (the same ids, every item's
shots drawn anew) compared item by item, the pairing said in the text, the JSON and every verdict; the refusal
without it naming the way forward in each door's words; runs that scored the same contexts give the very numbers
of the default pairing."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

import planned
from abricot_local import api
from abricot_local.analysis import compare as cmp
from abricot_local.analysis.loading import load_run
from abricot_local.analysis.matching import by_id_words
from abricot_local.backends.options import ScoringOptions
from abricot_local.cli import cli
from abricot_local.errors import ResultsError
from abricot_local.models.given import Given
from abricot_local.record import Sample
from abricot_local.report.comparison import render
from abricot_local.run.session import run_plan
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """abricot_inc under its paper protocol (shots drawn per item with --shot-seed), --seed and --shot-seed 1, 2, 3."""
    root = tmp_path_factory.mktemp("by-id")
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for seed in (1, 2, 3):
            out[seed] = root / f"seed{seed}"
            r = invoke("run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_inc", "--protocol",
                       "paper", "--data", f"abricot={FIXTURE}", "--seed", seed, "--shot-seed", seed, "--out", out[seed])
            assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two fake models (other log-probs) on the same prompts of two ABRICOT tasks: the same contexts."""
    root = tmp_path_factory.mktemp("by-id-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        plan = planned.plan_run(model="fake", given=Given.of(ScoringOptions(n_ctx=8192), backend="fake"),
                                 task_spec="abricot_abs,abricot_inc",
                                 task_options=TaskOptions(data=(("abricot", str(FIXTURE)),)), limit=None, sample=None)
        out = []
        for name, seed in (("fake-1", 1), ("fake-2", 2)):
            p = replace(plan, model=replace(plan.model, label=name, as_written=name),
                        backend_options=replace(plan.backend_options, seed=seed))
            out.append(load_run(run_plan(p, root / name).path.parent))
    return out


def _contexts(folder) -> dict[str, str]:
    return {s.id: s.context for s in load_run(folder).task("abricot_inc").samples}


def test_two_seeds_compared_by_id(seeds):
    a, b = _contexts(seeds[1]), _contexts(seeds[2])
    n = len(a)
    assert n > 1 and a.keys() == b.keys() and all(a[i] != b[i] for i in a)  # same ids, every context other
    r = invoke("compare", seeds[1], seeds[2], "--by-id", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [(m["task"], m["n"], m["n_common"], m["n_context_differs"], m["paired_on"]) for m in doc["matches"]] == \
        [("abricot_inc", [n, n], n, n, "id")]
    assert {m["n"] for m in doc["metrics"]} == {n}
    assert doc["paired_on"] == "id"
    assert {ch["compared"] for ch in doc["answers_changed"]} == {"other contexts"}  # never "one model": other prompts
    said = by_id_words(n, n)
    assert said == f"paired by id, the scored context differing on {n} of {n} items"
    assert [v["reason"].startswith(said + "; ") for v in doc["verdicts"]] == [True]
    assert any(f"items paired by id alone, the scored context differing on {n} of {n} common items" in x
               for x in doc["notes"])
    # the table says it too: its note and its verdict line
    text = " ".join(invoke("compare", seeds[1], seeds[2], "--by-id").stdout.split())
    assert f"items paired by id alone, the scored context differing on {n} of {n} common items" in text
    assert "Items paired on id alone (the scored context may differ)" in text
    assert f"cannot tell apart ({said};" in text or f"different ({said};" in text
    # the API: the same comparison, its pairing named
    c = api.compare(seeds[1], seeds[2], by_id=True)
    assert c.paired_on == "id" and c.result.matches[0].n_common == n
    assert [v.line for v in c.verdicts] == [v["line"] for v in doc["verdicts"]]
    assert all(reason.startswith(said) for reason in c.to_frame()["reason"])


def test_three_seeds_every_pair_by_id(seeds):
    n = len(_contexts(seeds[1]))
    c = cmp.compare([load_run(seeds[k]) for k in (1, 2, 3)], by_id=True)
    assert [(m.n, m.n_common, m.n_context_differs) for m in c.matches] == [((n, n, n), n, n)]
    assert len(c.verdicts) == 3 and all(v.reason.startswith(by_id_words(n, n) + "; ") for v in c.verdicts)
    assert {m.n for m in c.metrics} == {n} and not any(m.p_holm < m.p for m in c.metrics)


def test_without_by_id_the_refusal_names_it_in_each_doors_words(seeds):
    n = len(_contexts(seeds[1]))
    r = invoke("compare", seeds[1], seeds[2])
    text = " ".join(r.stderr.split())
    assert r.exit_code == 2 and f"{n} items share an id but not the scored context" in text, text
    assert text.endswith("nothing to compare; to pair them on id alone (each item under its two contexts: is the "
                         "result sensitive to the seed?), compare with --by-id"), text
    with pytest.raises(ResultsError) as err:
        api.compare(seeds[1], seeds[2])
    assert str(err.value).endswith("compare with by_id=True"), str(err.value)
    assert "--by-id" not in str(err.value)


def test_runs_sharing_no_id_are_refused_without_the_way_forward(models):
    a, b = models
    renamed = [t.with_samples(Sample.from_dict({**s.to_dict(), "id": "other-" + s.id}) for s in t.samples)
               for t in b.run_tasks]
    other = replace(b, path=b.path + "-renamed", label="renamed", run_tasks=tuple(renamed))
    for by_id in (False, True):
        with pytest.raises(ResultsError) as err:
            cmp.compare([a, other], by_id=by_id)
        assert "share an id" not in str(err.value) and "by_id" not in str(err.value)
        assert ("(same id)" if by_id else "(same id and same scored context)") in str(err.value)


def test_the_same_contexts_give_the_default_numbers(models):
    default, by_id = cmp.compare(models), cmp.compare(models, by_id=True)
    assert (default.paired_on, by_id.paired_on) == ("id+context", "id")
    assert [replace(m, paired_on="id") for m in default.matches] == list(by_id.matches)
    assert all(m.n_common and not m.n_context_differs for m in by_id.matches)
    for field in ("metrics", "agreements", "power", "equivalence", "changes", "groups", "totals", "primary"):
        assert repr(getattr(default, field)) == repr(getattr(by_id, field)), field  # bit for bit (repr: NaN too)
    n = sum(g.n for g in default.agreements)
    assert [(v.a, v.b, v.kind, v.p, f"{by_id_words(0, n)}; {v.reason}") for v in default.verdicts] == \
        [(v.a, v.b, v.kind, v.p, v.reason) for v in by_id.verdicts]
    assert [x for x in by_id.notes if "paired by id" not in x] == list(default.notes)
    assert sum("paired by id alone" in x for x in by_id.notes) == len(by_id.matches)
    x, y = (json.loads(render(c, "json")) for c in (default, by_id))
    assert (x["metrics"], x["equivalence"], x["agreement"]) == (y["metrics"], y["equivalence"], y["agreement"])


def test_some_contexts_other_still_pair_every_id(models):
    """One run's contexts changed on some items: the default compares the others, --by-id every item, the
    context differing on those."""
    a, b = models
    ids = sorted(s.id for s in b.task("abricot_inc").samples)
    moved = set(ids[::3])
    tasks = [t.with_samples(Sample.from_dict({**s.to_dict(), "context": "moved " + str(s.context)})
                            if t.name == "abricot_inc" and s.id in moved else s for s in t.samples)
             for t in b.run_tasks]
    other = replace(b, path=b.path + "-moved", label="moved", run_tasks=tuple(tasks))
    default, by_id = cmp.compare([a, other]), cmp.compare([a, other], by_id=True)
    inc = {m.task: m for m in default.matches}["abricot_inc"]
    assert (inc.n_common, inc.n_context_differs) == (len(ids) - len(moved), len(moved))
    inc = {m.task: m for m in by_id.matches}["abricot_inc"]
    assert (inc.n_common, inc.n_context_differs, inc.paired_on) == (len(ids), len(moved), "id")
    assert {m.n for m in by_id.metrics if m.task == "abricot_inc"} == {len(ids)}
    n = sum(g.n for g in by_id.agreements)
    assert by_id.verdicts[0].reason.startswith(by_id_words(len(moved), n) + "; ")
