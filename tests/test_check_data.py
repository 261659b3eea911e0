"""`check` holds a run to its data (issue 38, item 2): samples and results.json edited together, the
metrics recomputed by the tool's own code so the two agree, still fail, each difference naming the task,
the item and the field. Fake backend; the ABRICOT invented rows and DISCOTEX invented data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.overview import recompute_entry
from abricot_local.cli import cli
from abricot_local.record import entry_samples, read_run
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished fake run of ABRICOT abs under a registry entry reproducing the paper's row (3 shots), and
    one of DISCOTEX, each copied by the test that edits it."""
    root = tmp_path_factory.mktemp("held")
    models = root / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    data = write_discotex(root / "d", 5)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={FIXTURE}", "--tasks",
                   "abricot_abs", "--n-ctx", 8192, "--out", root / "abricot")
        assert r.exit_code == 0, r.output
        r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--limit", 8,
                   "--out", root / "discotex")
        assert r.exit_code == 0, r.output
    return root, data


@pytest.fixture
def abricot(made, tmp_path):
    shutil.copytree(made[0] / "abricot", tmp_path / "abricot")
    return tmp_path / "abricot"


@pytest.fixture
def discotex(made, tmp_path):
    shutil.copytree(made[0] / "discotex", tmp_path / "discotex")
    return tmp_path / "discotex"


def samples_path(run: Path) -> Path:
    (path,) = run.glob("samples-*.jsonl")
    return path


def edit(run: Path, change_line=None, change_record=None, extra: list[dict] = ()) -> None:
    """Edit the samples (``change_line(k, line)``, lines appended), then let the tool's own recompute
    rewrite every metric and n of results.json, then ``change_record(doc)``."""
    path = samples_path(run)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for k, row in enumerate(rows):
        if change_line:
            change_line(k, row)
    rows += list(extra)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    doc = json.loads((run / "results.json").read_text())
    record = read_run(run)
    for task, entry in record.tasks.items():
        samples = entry_samples(run, entry, task, counted=False)
        fresh = recompute_entry(record, task, samples, run).recomputed
        doc["tasks"][task]["n"] = fresh.pop("n")
        doc["tasks"][task]["metrics"] = fresh
    if change_record:
        change_record(doc)
    (run / "results.json").write_text(json.dumps(doc))


def check(run: Path, *more) -> tuple[int, str]:
    r = invoke("check", run, *more)
    assert "Traceback" not in r.output
    return r.exit_code, r.output


def test_the_runs_as_written_pass(made):
    root, data = made
    assert check(root / "abricot")[0] == 0
    assert check(root / "discotex", "--data-dir", data)[0] == 0


def test_gold_rewritten_to_the_prediction_fails_naming_the_item(discotex, made):
    before = json.loads((discotex / "results.json").read_text())["tasks"]["discotex"]["metrics"]["accuracy"]
    edit(discotex, lambda k, row: row.update(gold=row["pred"], gold_label=row["pred_label"]))
    after = json.loads((discotex / "results.json").read_text())["tasks"]["discotex"]["metrics"]["accuracy"]
    assert after == 1.0 and before < 1.0  # the record and its samples agree: only the data tells
    rc, out = check(discotex, "--data-dir", made[1])
    assert rc == 1 and "NOT reproduced" in out and "the run does not match its data" in out
    assert "results.json does not match its samples" not in out
    wrong = [x.strip() for x in out.splitlines() if " gold: recorded " in x]
    assert wrong and all(x.startswith("discotex item ") and ", the data gives " in x for x in wrong)


@pytest.mark.parametrize("field, value", [
    ("human_mean", 0.99), ("target", "parola-inventata"), ("shot_ids", ["x", "y", "z"]), ("source", "invented"),
    ("choices", ["5", "4", "3", "2", "1"]), ("continuations", [" 5", " 4", " 3", " 2", " 1"]),
])
def test_an_edited_item_field_fails_naming_it(abricot, field, value):
    def change(k, row):
        if k == 2:
            row[field] = value
    edit(abricot, change)
    rc, out = check(abricot)
    item = json.loads(samples_path(abricot).read_text().splitlines()[2])["id"]
    assert rc == 1 and "NOT reproduced" in out, out
    assert f"abricot_abs item {item} {field}: recorded " in out, out


def test_a_human_mean_edited_on_every_item_fails(abricot):
    """Pearson against the human means made 1.0 by rewriting them: the data's means tell."""
    edit(abricot, lambda k, row: row.update(human_mean=(row["pred"] + 0.5) / 5))
    rc, out = check(abricot)
    assert rc == 1 and out.count(" human_mean: recorded ") >= 10


def test_invented_items_fail(abricot):
    rows = [json.loads(x) for x in samples_path(abricot).read_text().splitlines()]
    extra = [{**rows[k % len(rows)], "id": f"invented-{k}"} for k in range(20)]
    edit(abricot, extra=extra)
    assert json.loads((abricot / "results.json").read_text())["tasks"]["abricot_abs"]["n"] == len(rows) + 20
    rc, out = check(abricot)
    assert rc == 1 and f"abricot_abs n: recorded {len(rows) + 20}, the data gives {len(rows)} item(s)" in out
    assert "20 recorded item(s) are not items of the data" in out and "invented-0" in out


def test_edited_config_shots_fail(abricot):
    edit(abricot, change_record=lambda d: d["tasks"]["abricot_abs"]["config"].update(shots=0))
    rc, out = check(abricot)
    assert rc == 1 and "abricot_abs config.shots: recorded 0, the run's options give 3" in out


def test_an_edited_published_block_fails(abricot):
    def change(doc):
        c = doc["published"]["checks"][0]
        c.update(verdict="differs" if c["verdict"] != "differs" else "reproduced", inside=True, published=0.01)
    edit(abricot, change_record=change)
    rc, out = check(abricot)
    assert rc == 1 and "published.checks[0] (llama-3.1-8b, abricot_abs.pearson) verdict: recorded " in out
    assert "published.checks[0] (llama-3.1-8b, abricot_abs.pearson) published: recorded 0.01, made again 0.3" in out

    def dropped(doc):
        doc["published"]["checks"] = []
    edit(abricot, change_record=dropped)
    rc, out = check(abricot)
    assert rc == 1 and "published.checks: recorded 0, made again 1" in out


def test_a_fake_run_named_like_a_registry_alias_is_held_to_what_it_recorded(tmp_path):
    """The fake backend under a shipped alias records no published rows; `check` does not demand the entry's."""
    r = invoke("run", "llama-3.1-8b-q4", "--backend", "fake", "--data", f"abricot={FIXTURE}", "--tasks", "abricot_abs",
               "--n-ctx", 8192, "--limit", 6, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "o" / "results.json").read_text())["published"]["reproduces"] is None
    assert check(tmp_path / "o")[0] == 0



def test_a_run_whose_published_verdict_differs_reproduces_its_record_and_check_says_which(made, tmp_path):
    """check's `reproduced` is the run against its own record: after a published verdict that differs, its last
    line says so, not a bare `reproduced` a reader takes for the paper's number."""
    r = invoke("run", "fake-as-llama", "--models", made[0] / "models.toml", "--data", f"abricot={FIXTURE}", "--tasks",
               "abricot_abs", "--n-ctx", 8192, "--margin", 0.01, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "o" / "results.json").read_text())["published"]["checks"][0]["verdict"] == "differs"
    rc, out = check(tmp_path / "o")
    assert rc == 0 and out.splitlines()[-1] == ("reproduced: the re-scored items match the run's record (not a verdict "
                                                "on a published value)")
