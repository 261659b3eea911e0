"""The CLI end to end on the fake backend (same code paths as llama.cpp, no model)."""

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import FIXTURE


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


DISCOTEX = "<the discotex_dir fixture>"  # in parametrize lists, replaced in the test


@pytest.fixture
def run_fake(discotex_dir):
    def run(out, *extra):
        return invoke("run", "fake", "--backend", "fake", "--data-dir", discotex_dir, "--out", out, *extra)

    return run


def early_children(tmp_path_factory) -> dict:
    """`python -m abricot_local --version` in a fresh process, started by conftest once the tests are collected,
    beside the other tests (conftest.start_early)."""
    from conftest import Early

    return {"version": Early([sys.executable, "-m", "abricot_local", "--version"], timeout=120,
                             cwd=Path(__file__).resolve().parents[1])}


@pytest.fixture(scope="module")
def module_version(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_module_entry_point_runs(module_version):
    out = module_version.result()
    assert out.returncode == 0 and "abricot-local" in out.stdout


def test_discotex_run_writes_results_and_samples(tmp_path, run_fake):
    out = tmp_path / "out"
    r = run_fake(out, "--limit", 12)
    assert r.exit_code == 0, r.output
    assert "discotex" in r.output and "accuracy" in r.output
    res = json.loads((out / "results.json").read_text())
    samples = [json.loads(l) for l in (out / "samples-discotex.jsonl").read_text().splitlines()]
    assert len(samples) == 12 == res["tasks"]["discotex"]["n"]
    s = samples[0]
    assert s["id"] == "task_1_ted_test_1" and s["source"] == "ted"
    assert s["continuations"] == [" A", " B", " C", " D", " E"]
    assert len(s["logprobs"]) == 5 and len(s["continuation_tokens"]) == 5
    assert s["pred"] == max(range(5), key=lambda k: s["logprobs"][k])
    assert s["context"].endswith("Risposta:")
    # every number can be recomputed from the samples
    acc = sum(x["pred"] == x["gold"] for x in samples) / len(samples)
    assert res["tasks"]["discotex"]["metrics"]["accuracy"] == pytest.approx(acc)
    assert res["schema_version"] == 1
    prov = res["provenance"]
    assert prov["schedule"]["version"] and prov["abricot_local"]
    assert res["config"]["seed"] == 1234 and res["config"]["limit"] == 12
    assert len(res["tasks"]["discotex"]["data"]) == 2 and all(len(d["sha256"]) == 64 for d in res["tasks"]["discotex"]["data"])
    assert res["tasks"]["discotex"]["prompt_hash"]
    assert not (out / ".checkpoint").exists() and not (out / ".lock").exists()


def test_same_config_gives_identical_samples(tmp_path, run_fake):
    run_fake(tmp_path / "a", "--limit", 8)
    run_fake(tmp_path / "b", "--limit", 8)
    assert (tmp_path / "a" / "samples-discotex.jsonl").read_bytes() == (tmp_path / "b" / "samples-discotex.jsonl").read_bytes()


def test_abricot_group_runs_both_tasks(tmp_path):
    out = tmp_path / "o"
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", 8192, "--out", out)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert set(res["tasks"]) == {"abricot_abs", "abricot_inc"}
    for name in ("abricot_abs", "abricot_inc"):
        m = res["tasks"][name]["metrics"]
        for key in ("pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy"):
            assert key in m and f"{key}_ci95" in m
        cfg = res["tasks"][name]["config"]
        assert cfg["shots"] == 3 and cfg["shot_sampler"] == "lm-eval" and cfg["protocol"] == "paper"
        samples = [json.loads(x) for x in (out / f"samples-{name}.jsonl").read_text().splitlines()]
        assert all(len(s["shot_ids"]) == 3 and s["id"] not in s["shot_ids"] for s in samples)


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "fake", "--backend", "fake", "--tasks", "discotx"], "did you mean: discotex"),
        (["run", "no-such-model", "--data-dir", DISCOTEX], "no-such-model"),
        (["run", "missing.gguf", "--data-dir", DISCOTEX], "not found"),
        (["run", "fake", "--backend", "fake", "--data-dir", "/nonexistent"], "not found"),
        (["run", "fake", "--backend", "fake", "--data", "oops"], "TASK=PATH"),
        (["run", "fake", "--backend", "fake", "--data-dir", DISCOTEX, "--limit", "0"], "--limit"),
        (["run", "fake", "--backend", "nope", "--data-dir", DISCOTEX], "unknown backend"),
    ],
)
def test_bad_input_is_one_clean_line(args, message, tmp_path, request):
    args = [request.getfixturevalue("discotex_dir") if a == DISCOTEX else a for a in args]
    r = invoke(*args, "--out", tmp_path / "o")
    assert r.exit_code != 0
    assert message.lower() in r.output.lower()
    assert "Traceback" not in r.output
    assert not (tmp_path / "o" / "results.json").exists()


def test_not_gguf_and_truncated_gguf(tmp_path, discotex_dir):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model")
    r = invoke("run", bad, "--data-dir", discotex_dir, "--out", tmp_path / "o")
    assert r.exit_code != 0 and "not a GGUF file" in r.output


def test_malformed_tsv_is_reported(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    for name in ("discotex_1_ted_test_set_release.tsv", "discotex_1_wiki_test_set_release.tsv"):
        (d / name).write_text("ID\tPROMPT\tTARGET\tCLASS\n" + "".join(f"r{i}\tp\tt{i}\t7\n" for i in range(5)))
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", d, "--out", tmp_path / "o")
    assert r.exit_code != 0 and "CLASS must be 0 or 1" in r.output


def test_prompt_over_n_ctx_names_item_and_counts(tmp_path, run_fake):
    r = run_fake(tmp_path / "o", "--limit", 2, "--n-ctx", 64)
    assert r.exit_code != 0
    assert "task_1_ted_test_1" in r.output and "context window holds 64 (--n-ctx 64)" in r.output
    assert not (tmp_path / "o" / "results.json").exists()


def test_labels_command_on_fake(discotex_dir):
    r = invoke("labels", "fake", "--backend", "fake", "--data-dir", discotex_dir)
    assert r.exit_code == 0, r.output
    assert "' A'" in r.output and "fast path" in r.output


def test_chat_template_wraps_prompts_and_is_recorded(tmp_path):
    out = tmp_path / "o"
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data", f"abricot={FIXTURE}",
               "--n-ctx", 8192, "--limit", 3, "--chat-template", "--out", out)
    assert r.exit_code == 0, r.output
    s = json.loads((out / "samples-abricot_abs.jsonl").read_text().splitlines()[0])
    assert s["context"].startswith("<|user|>\n") and s["context"].endswith("<|end|>\n<|assistant|>\n")
    assert s["continuations"] == ["1", "2", "3", "4", "5"]
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["chat_template"] is True
    assert res["provenance"]["chat_template"]["tail"] == "<|end|>\n<|assistant|>\n"
    assert invoke("check", out).exit_code == 0


def test_batched_engine_and_parallel_are_accepted_and_recorded(tmp_path, monkeypatch, run_fake):
    from abricot_local.backends.fake import FakeBackend

    sizes = []
    real = FakeBackend.score_many

    def score_many(self, requests):
        sizes.append(len(requests))
        return real(self, requests)

    monkeypatch.setattr(FakeBackend, "score_many", score_many)
    out = tmp_path / "b"
    r = run_fake(out, "--limit", 7, "--engine", "batched", "--parallel", 3)
    assert r.exit_code == 0, r.output
    assert sizes == [3, 3, 1]  # the runner hands the backend chunks of --parallel items
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["engine"] == "batched" and res["config"]["parallel"] == 3
    assert res["provenance"]["schedule"] | {"parallel": 3, "kv_unified": True} == res["provenance"]["schedule"]
    # the fake scores one by one, so its samples equal the default engine's, in input order
    run_fake(tmp_path / "p", "--limit", 7)
    assert samples_of(out) == samples_of(tmp_path / "p")
    assert "parallel" not in json.loads((tmp_path / "p" / "results.json").read_text())["config"]
    assert invoke("check", out).exit_code == 0


def samples_of(out):
    return [json.loads(line) for line in (out / "samples-discotex.jsonl").read_text().splitlines()]


def test_sample_draws_a_seeded_subset_in_release_order(tmp_path, run_fake):
    out = tmp_path / "s"
    r = run_fake(out, "--sample", 30, "--n-ctx", 4096)
    assert r.exit_code == 0, r.output
    rows = [json.loads(l) for l in (out / "samples-discotex.jsonl").read_text().splitlines()]
    assert len(rows) == 30
    assert {x["class"] for x in rows} == {0, 1} and {x["source"] for x in rows} == {"ted", "wiki"}
    order = [int(x["id"].rsplit("_", 1)[1]) + (10_000 if x["source"] == "wiki" else 0) for x in rows]
    assert order == sorted(order)
    assert json.loads((out / "results.json").read_text())["config"]["sample"] == 30
    run_fake(tmp_path / "again", "--sample", 30, "--n-ctx", 4096)
    assert (tmp_path / "again" / "samples-discotex.jsonl").read_bytes() == (out / "samples-discotex.jsonl").read_bytes()
    assert invoke("check", out).exit_code == 0
    bad = run_fake(tmp_path / "x", "--sample", 5, "--limit", 5)
    assert bad.exit_code != 0 and "cannot be combined" in bad.output
