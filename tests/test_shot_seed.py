"""``shot_seed`` (--shot-seed): the few-shot draws' seed apart from --seed's sample. ABRICOT's paper protocol fixes
it (1234, lm-eval's fewshot_random_seed), not --seed: a --sample drawn with another --seed scores the paper's shots
for its items and is held to the paper's rows; another --shot-seed is made otherwise. Each task's config records it
resolved. A run recorded before the option (its task config without ``shot_seed``) drew its shots with its --seed:
read so by every reader (tasks.options.as_read). Fake backend, the invented ABRICOT rows."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.analysis import baselines
from abricot_local.analysis.runs import options_of
from abricot_local.cli import cli
from abricot_local.record import read_run
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE

MODELS = '[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n'


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """abricot_abs under a registry entry reproducing the paper's row: the whole data at the default seed, a
    --sample 12 at --seed 7, and the same sample with --shot-seed 7 too."""
    root = tmp_path_factory.mktemp("shot-seed")
    (root / "models.toml").write_text(MODELS)
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("ABRICOT_CACHE_DIR", str(root / "cache"))
        mp.setenv("ABRICOT_OFFLINE", "1")
        for name, more in (("whole", ()), ("seed7", ("--seed", 7, "--protocol", "paper", "--sample", 12)),
                           ("shot7", ("--seed", 7, "--shot-seed", 7, "--sample", 12))):
            out[name] = root / name
            r = invoke("run", "fake-as-llama", "--models", root / "models.toml", "--data", f"abricot={FIXTURE}",
                       "--tasks", "abricot_abs", "--n-ctx", 8192, *more, "--out", out[name])
            assert r.exit_code == 0, r.output
    return out


def _contexts(folder) -> dict[str, str]:
    return {json.loads(x)["id"]: json.loads(x)["context"]
            for x in next(folder.glob("samples-*.jsonl")).read_text().splitlines()}


def test_another_seed_under_the_paper_protocol_scores_the_papers_shots_and_is_comparable(runs):
    whole, sample = _contexts(runs["whole"]), _contexts(runs["seed7"])
    assert len(sample) == 12 and sample == {i: whole[i] for i in sample}  # the paper's shots, item for item
    record = read_run(runs["seed7"])
    config = record.tasks["abricot_abs"].config
    assert (config["seed"], config["shot_seed"], config["protocol_differences"]) == (7, 1234, [])
    (check,) = record.published.checks
    assert check.comparable and not check.differences and check.value is not None and check.verdict  # judged


def test_another_shot_seed_under_the_paper_protocol_is_made_otherwise(runs):
    other = _contexts(runs["shot7"])
    assert other.keys() == _contexts(runs["seed7"]).keys()  # --seed draws the sample alone
    assert any(other[i] != c for i, c in _contexts(runs["seed7"]).items())
    record = read_run(runs["shot7"])
    assert record.config.extra["shot_seed"] == 7 and record.tasks["abricot_abs"].config["shot_seed"] == 7
    (check,) = record.published.checks
    assert not check.comparable and check.differences == ("shot_seed 7, published 1234",)


def test_the_task_config_records_the_seed_resolved():
    def config(**given):
        return make_task(given.pop("key", "abricot_abs"), TaskOptions(data=(("abricot", str(FIXTURE)),), **given))

    assert config(seed=5).config()["shot_seed"] == 1234  # the paper's
    assert config(key="abricot_abs@calamita", seed=5, shots=2).config()["shot_seed"] == 5  # no protocol's: --seed
    assert config(key="abricot_abs@calamita", seed=5, shots=2, shot_seed=9).config()["shot_seed"] == 9
    disco = make_task("discotex", TaskOptions(seed=5))
    assert disco.shot_seed == 1234 and make_task("discotex", TaskOptions(shot_seed=3)).shot_seed == 3


def _as_before(folder, tmp_path, name, differences=None):
    """A copy of the run ``folder`` as a run made before the option records it: no ``shot_seed`` anywhere in its
    record, ``differences`` its protocol's as they were worded then."""
    out = tmp_path / name
    shutil.copytree(folder, out)
    doc = json.loads((out / "results.json").read_text())
    for config in (doc["config"], doc["manifest"]["config"], doc["tasks"]["abricot_abs"]["config"]):
        config.pop("shot_seed", None)
    if differences is not None:
        doc["tasks"]["abricot_abs"]["config"]["protocol_differences"] = differences
    (out / "results.json").write_text(json.dumps(doc))
    return out


def test_a_run_recorded_before_the_option_is_read_with_its_seed_as_its_shot_seed(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))
    old = _as_before(runs["shot7"], tmp_path, "old7", ["seed 7, published 1234"])  # its shots drawn with --seed 7
    record = read_run(old)
    assert options_of(record, "abricot_abs").shot_seed == options_of(record).shot_seed == 7
    (check,) = baselines.check_run(check_ref(), {"abricot_abs": record.tasks["abricot_abs"]}).to_record(),
    assert check.differences == ("shot_seed 7, published 1234",)  # its shots were not the paper's
    r = invoke("check", old, "--data", f"abricot={FIXTURE}")
    text = " ".join(r.output.split())
    assert "Traceback" not in r.output and "checked 12 items: 12 identical predictions" in text, r.output
    assert "(1 difference(s)): abricot_abs config.protocol_differences: recorded [\"seed 7, published 1234\"], " \
           "the run's options give [\"shot_seed 7, published 1234\"]" in text, r.output  # the items as it drew them
    r = invoke("check", _as_before(runs["whole"], tmp_path, "old1234"), "--data", f"abricot={FIXTURE}")
    assert r.exit_code == 0 and "reproduced" in r.output, r.output  # the default seed: the paper's shots
    r = invoke("run", "fake-as-llama", "--models", runs["whole"].parent / "models.toml", "--data", f"abricot={FIXTURE}",
               "--tasks", "abricot_abs", "--n-ctx", 8192, "--seed", 7, "--sample", 14, "--resume", "--out", old)
    text = " ".join(r.output.split())  # grown, its new items would have the paper's shots: refused, never mixed
    assert r.exit_code != 0 and "the saved line of item" in text and "so it does not grow" in text, r.output


def check_ref():
    return next(r for r in baselines.find("ABRICOT paper", "llama-3.1-8b") if r.task == "abricot_abs")


def test_compare_names_the_shot_seed_among_the_settings_that_differ(runs):
    r = invoke("compare", runs["seed7"], runs["shot7"], "--by-id")
    assert r.exit_code == 0, r.output
    assert any(line.split()[:3] == ["abricot_abs.config.shot_seed", "1234", "7"] for line in r.output.splitlines())


def test_lm_evals_layout_keeps_the_two_seeds_apart(runs, tmp_path):
    from abricot_local.analysis.lm_eval_input import read

    r = invoke("report", runs["seed7"], "--format", "lm-eval", "-o", tmp_path / "x")
    assert r.exit_code == 0, r.output
    (results,) = (tmp_path / "x").glob("*/results_*.json")
    config = json.loads(results.read_text())["config"]
    assert (config["random_seed"], config["fewshot_seed"]) == (7, 1234)
    back = read(results.parent, data=(("abricot", str(FIXTURE)),)).record  # the run's seed, the paper's shots
    assert back.config.seed == 7 and back.tasks["abricot_abs"].config["shot_seed"] == 1234
    same = read_run(runs["seed7"]).tasks["abricot_abs"].metrics  # its bootstrap's seed 7 (NaN: no interval read)
    assert json.dumps(back.tasks["abricot_abs"].metrics, sort_keys=True) == json.dumps(same, sort_keys=True)
