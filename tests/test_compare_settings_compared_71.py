"""compare says the settings that differ over the tasks it compares only, task by task, whether a run records an
option at its top level or in each task's config (labels.per_task_options, the one rule of the settings and of the
labels): `--protocol calamita` given to a run of ABRICOT and DISCOTEX is none of DISCOTEX's (the run said it was not
used), so a DISCOTEX-only run beside it differs in nothing when DISCOTEX alone is compared; an lm-eval output of
ABRICOT and DISCOTEX (its `protocol`, `chat_template` and `shot_sampler` not every task's) beside a run of ABRICOT
alone differs in nothing either, and the labels say the same of both; a real difference in a compared task is still
said (fake backend, invented data)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURE
from invented_data import write_discotex

import abricot_local
from abricot_local.analysis.compare import compare
from abricot_local.analysis.differing import differing_settings, lm_eval_only, one_side_settings


@pytest.fixture(scope="module")
def runs(finished_run, tmp_path_factory):
    disco = write_discotex(tmp_path_factory.mktemp("disco"), per_source=4)
    base = ("run", "fk", "--backend", "fake", "--limit", "4", "--data-dir", str(disco), "--data", f"abricot={FIXTURE}")

    def made(tasks, *more, n_ctx="8192"):
        return abricot_local.load_run(finished_run(*base, "--n-ctx", n_ctx, "--tasks", tasks, *more))

    return {"ita": made("discotex", "--prompt-variant", "ita-bench"),
            "mix": made("abricot_abs,abricot_inc,discotex", "--protocol", "calamita", "--prompt-variant", "ita-bench"),
            "card": made("discotex", "--prompt-variant", "card", n_ctx="4096"),
            "cal": made("abricot_abs,abricot_inc", "--protocol", "calamita"),
            "both": made("abricot_abs,abricot_inc,discotex", "--protocol", "calamita"), "disco": disco}


def _lm_eval(run, into, data):
    """``run``'s export as `lm_eval --model abricot-local` writes it: no abricot-local task in its metadata."""
    where = run.to_lm_eval(into)
    (results,) = where.glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    doc["lm_eval_version"] = "0.4.13"
    for config in doc["configs"].values():
        del config["metadata"]["abricot_local_task"]
    results.write_text(json.dumps(doc), encoding="utf-8")
    return abricot_local.load_run(where, data=data)


def test_an_option_the_compared_task_does_not_use_is_no_difference(runs):
    """The repro: DISCOTEX alone compared; `protocol` (given, used by ABRICOT alone) neither a setting that differs
    nor what the labels tell the two runs apart by."""
    ita, mix = runs["ita"], runs["mix"]
    assert mix.record.config_dict()["protocol"] == "calamita" and "protocol" not in mix.record.tasks["discotex"].config
    c = compare([ita, mix])
    assert [m.task for m in c.matches] == ["discotex"]
    assert c.differs == () and differing_settings(mix, ita) == ()
    assert not any("protocol" in r.label for r in c.runs), [r.label for r in c.runs]


def test_a_real_difference_in_a_compared_task_is_still_said(runs):
    """DISCOTEX in the card's wording at n_ctx 4096 beside the mixed run's in ITA-Bench's: both said, and nothing of
    ABRICOT's (not compared)."""
    c = compare([runs["card"], runs["mix"]], by_id=True)  # another wording: the same items by id
    said = {d.key: (d.value_a, d.value_b) for d in c.differs}
    assert said["discotex.config.prompt_variant"] == ("card", "ita-bench")
    assert said["n_ctx"] == (4096, 8192) and "discotex.prompt_hash" in said
    assert not any(k.startswith("abricot") or k in ("protocol", "chat_template", "shot_sampler") for k in said), said


def test_a_run_beside_an_lm_eval_output_of_more_tasks_differs_in_nothing(runs, tmp_path):
    """The cross-door case: the lm-eval output holds ABRICOT and DISCOTEX under --protocol calamita (its `protocol`
    and `chat_template` not DISCOTEX's), the run ABRICOT alone; compared on ABRICOT, nothing differs, what only
    lm-eval records is said apart, and a three-way compare labels the two alike (shot_sampler lm-eval on each task of
    both: never `no shot_sampler` on one)."""
    lm = _lm_eval(runs["both"], tmp_path / "lm", {"abricot": str(FIXTURE), "discotex": str(runs["disco"])})
    assert lm.lm_eval and lm.record.config_dict()["protocol"] == "calamita"
    assert "protocol" not in lm.record.tasks["discotex"].config
    cal = runs["cal"]
    c = compare([cal, lm])
    assert {m.task for m in c.matches} == {"abricot_abs@calamita", "abricot_inc@calamita"}
    assert c.differs == () and differing_settings(lm, cal) == ()
    assert all(lm_eval_only(d.key) for d in one_side_settings(cal, lm))
    three = compare([runs["ita"], cal, lm])
    assert three.differs == ()
    labels = [r.label for r in three.runs]
    assert not any("shot_sampler" in lab for lab in labels), labels
    assert [lab.split(", ")[0] for lab in labels[1:]] == ["fk (protocol=calamita"] * 2, labels  # alike, then folder
