"""lm-eval output folders read as runs (analysis/lm_eval_input.py), and `compare` pairing a task
recorded under another key by what it scored (analysis/alignment.py).

The folders are written by real lm-eval (0.4.x, `--log_samples`) through this project's
`abricot-local` lm-eval model on DISCOTEX items of the real release (tests/lm_eval_tasks/
abricot_mc.yaml: the items' contexts, choices A-E, as `run` scores them): on the fake backend for
the fast tests, on Gemma 3 270M for the real one. Each is compared with an `abricot-local run` of
the same items: the pairing by context and continuations, the numbers, and what is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

# lm-eval reads its data through `datasets`, which reads these when first imported (its cache: conftest.py)
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from abricot_local.cli import cli  # noqa: E402
from abricot_local.errors import ResultsError  # noqa: E402
from conftest import isolated_env, ours_only, require_lm_eval as _lm_eval  # noqa: E402
from test_lm_eval_export import _invoke  # noqa: E402

TASKS = Path(__file__).resolve().parent / "lm_eval_tasks"
N = 3


def _write_items(folder: Path, discotex_dir: Path, n: int, variant: str = "card", name: str = "mc") -> list:
    """The first ``n`` DISCOTEX items (0 shots) as abricot_mc.yaml reads them: context, choices A-E, gold."""
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.discotex import LETTERS

    options = TaskOptions(data_dir=str(discotex_dir), allow_download=False, prompt_variant=variant)
    items = make_task("discotex", options).items()[:n]
    data = folder / "lm_eval_data"
    data.mkdir(parents=True, exist_ok=True)
    rows = [{"context": it.context, "choices": list(LETTERS), "gold": it.gold} for it in items]
    (data / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                        encoding="utf-8")
    return items


def _both(folder: Path, discotex_dir: Path, model: str, model_args: str, run_flags: tuple,
          ita_bench: bool = False) -> tuple[Path, Path]:
    """An lm-eval output of abricot_mc (DISCOTEX, the card's prompt; with ``ita_bench`` also
    abricot_mc_ita: ITA-Bench's) and an `abricot-local run` of the same items, in ``folder``."""
    tasks = folder / "tasks"
    tasks.mkdir()
    yaml = (TASKS / "abricot_mc.yaml").read_text(encoding="utf-8")
    (tasks / "abricot_mc.yaml").write_text(yaml, encoding="utf-8")
    _write_items(folder, discotex_dir, N)
    if ita_bench:
        (tasks / "abricot_mc_ita.yaml").write_text(yaml.replace("task: abricot_mc", "task: abricot_mc_ita").replace(
            "lm_eval_data/mc.jsonl", "lm_eval_data/mc_ita.jsonl"), encoding="utf-8")
        _write_items(folder, discotex_dir, N, "ita-bench", "mc_ita")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolated_env(folder).items():
            mp.setenv(key, value)
        mp.chdir(folder)  # the task YAML reads lm_eval_data/ relative to the working folder
        ours_only(mp)
        _invoke("lm-eval", model, "--include_path", tasks, "--tasks", "abricot_mc" + (",abricot_mc_ita" * ita_bench),
                "--model_args", model_args, "--output_path", "out", "--log_samples", "--batch_size", "1")
        _invoke("run", model, *run_flags, "--tasks", "discotex", "--data-dir", discotex_dir, "--limit", N,
                "--out", folder / "run")
    (results,) = (folder / "out").rglob("results_*.json")
    return results.parent, folder / "run"


@pytest.fixture(scope="module")
def fake_pair(discotex_dir, tmp_path_factory):
    _lm_eval()
    folder = tmp_path_factory.mktemp("lm_eval_input")
    return _both(folder, discotex_dir, "fake", "backend=fake,n_ctx=2048", ("--backend", "fake", "--n-ctx", "2048"),
                 ita_bench=True)


def test_an_lm_eval_folder_loads_as_a_run_with_the_tasks_items(fake_pair, discotex_dir):
    import abricot_local

    lm_dir, run_dir = fake_pair
    lm, run = abricot_local.load_run(lm_dir, data={"discotex": str(discotex_dir)}), abricot_local.load_run(run_dir)
    # abricot_mc's items are discotex's, abricot_mc_ita's its ITA-Bench variant's: matched by context
    assert lm.tasks == ("discotex", "discotex~ita-bench") and run.tasks == ("discotex",)
    a, b = lm.samples("discotex"), run.samples("discotex")
    assert list(a["id"]) == list(b["id"]) and list(a["gold"]) == list(b["gold"])
    assert a.filter(like="logprob_").values.tolist() == b.filter(like="logprob_").values.tolist()
    assert lm.metrics().query("task == 'discotex'")["value"].tolist() == run.metrics()["value"].tolist()
    assert lm.record.tasks["discotex"].config["lm_eval_task"] == "abricot_mc"
    assert lm.record.tasks["discotex~ita-bench"].config["prompt_variant"] == "ita-bench"
    assert lm.record.backend == "fake" and lm.record.provenance.extra["lm_eval_model"] == "abricot-local"
    # found beside the run, its tasks' data taken from the files the run recorded (no cache here)
    both = abricot_local.load_runs(lm_dir.parent.parent)
    assert sorted(r.path for r in both) == sorted([str(lm_dir), str(run_dir)])
    assert next(r for r in both if r.path == str(lm_dir)).samples().equals(lm.samples())
    # the results file itself reads the same
    (results,) = lm_dir.glob("results_*.json")
    assert abricot_local.load_run(results, data={"discotex": str(discotex_dir)}).samples().equals(lm.samples())


def test_compare_pairs_an_lm_eval_folder_with_a_run_item_by_item(fake_pair):
    lm_dir, run_dir = fake_pair
    doc = json.loads(_invoke("compare", lm_dir, run_dir, "--format", "json"))  # data: the run's recorded files
    (m,) = doc["matches"]
    assert (m["task"], m["n_common"], m["n_context_differs"]) == ("discotex", N, 0)
    (v,) = doc["verdicts"]
    assert v["kind"] == "identical"
    assert "task discotex~ita-bench is not in every run: not compared" in doc["notes"]
    text = _invoke("compare", lm_dir, run_dir)
    assert "discotex.config.lm_eval_task" in text and "abricot_mc" in text
    # found below a folder too, as `report` finds runs
    assert json.loads(_invoke("compare", lm_dir.parent, run_dir, "--format", "json"))["verdicts"][0]["kind"] == \
        "identical"


def test_report_reads_an_lm_eval_folder(fake_pair, tmp_path):
    lm_dir, run_dir = fake_pair
    out = tmp_path / "report.json"
    r = CliRunner().invoke(cli, ["report", str(lm_dir), str(run_dir), "--format", "json", "--verify", "-o", str(out)])
    assert r.exit_code == 0 and "verified: the metrics of 2 run(s)" in r.output, r.output
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert [Path(x["folder"]) for x in runs] == [lm_dir, run_dir]
    a, b = (x["tasks"]["discotex"] for x in runs)
    assert a == b and a["n"] == N  # the same numbers through either door


def _copy(lm_dir: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(lm_dir, dst)
    return dst


def test_any_models_output_and_the_earlier_layout_read_alike(fake_pair, discotex_dir, tmp_path):
    """The same folder as lm-eval's hf model would write it (no abricot-local provenance, dtype in
    model_args), with arguments and responses as lm-eval before 0.4.3 logged them (lists, numbers)."""
    from abricot_local.analysis.loading import load_run

    lm_dir, run_dir = fake_pair
    data = (("discotex", str(discotex_dir)),)
    want = load_run(lm_dir, data=data)
    edited = _copy(lm_dir, tmp_path)
    (results,) = edited.glob("results_*.json")
    doc = json.loads(results.read_text(encoding="utf-8"))
    doc["config"] = {"model": "hf", "model_args": "pretrained=google/gemma-3-270m,dtype=bfloat16", "batch_size": 8}
    doc["model_name"] = "google/gemma-3-270m"
    results.write_text(json.dumps(doc), encoding="utf-8")
    for samples in edited.glob("samples_*.jsonl"):
        rows = [json.loads(x) for x in samples.read_text(encoding="utf-8").splitlines()]
        for row in rows:
            row["arguments"] = [[a["arg_0"], a["arg_1"]] for a in row["arguments"].values()]
            row["resps"] = [[[float(r[0][0]), r[0][1] == "True"]] for r in row["resps"]]
            del row["filtered_resps"]
        samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got = load_run(edited, data=data)
    assert (got.backend, got.quant, got.base, got.name) == ("lm-eval hf", "BF16", "gemma-3-270m", "google/gemma-3-270m")
    assert [s.logprobs for s in got.samples_of("discotex")] == [s.logprobs for s in want.samples_of("discotex")]
    doc = json.loads(_invoke("compare", run_dir, edited, "--format", "json"))
    assert doc["verdicts"][0]["kind"] == "identical"
    assert {"key": "model_args.dtype", "value_b": "bfloat16"}.items() <= next(
        d for d in doc["settings_differ"] if d["key"] == "model_args.dtype").items()


def test_load_run_data_takes_evaluates_shapes(tmp_path):
    import abricot_local
    from abricot_local.errors import AbricotError

    with pytest.raises(AbricotError, match=r"load_run\(\): data must be \{task: path\}"):
        abricot_local.load_run(tmp_path, data=5)
    with pytest.raises(AbricotError, match="holds no results.json"):  # a list of pairs, as evaluate takes: taken
        abricot_local.load_run(tmp_path, data=[("discotex", "x")])


def _refusal(folder, **kw) -> str:
    from abricot_local.analysis.loading import load_run

    with pytest.raises(ResultsError) as err:
        load_run(folder, **kw)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_what_cannot_be_matched_is_refused_in_one_line(fake_pair, discotex_dir, tmp_path):
    lm_dir, run_dir = fake_pair
    data = (("discotex", str(discotex_dir)),)
    edited = _copy(lm_dir, tmp_path)
    (samples,) = edited.glob("samples_abricot_mc_2*.jsonl")
    lines = samples.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["arguments"]["gen_args_0"]["arg_0"] += " "  # one item's context no longer the task's
    for k in row["arguments"]:
        row["arguments"][k]["arg_0"] = row["arguments"]["gen_args_0"]["arg_0"]
    samples.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n", encoding="utf-8")
    why = _refusal(edited, data=data)
    assert "cannot read lm-eval task abricot_mc" in why and f"only {N - 1} of its {N} items" in why
    samples.unlink()  # no --log_samples
    assert "--log_samples" in _refusal(edited, data=data)
    (results,) = edited.glob("results_*.json")
    shutil.copy(results, edited / "results_2099-01-01T00-00-00.json")
    assert "give the one to read" in _refusal(edited, data=data)
    r = CliRunner().invoke(cli, ["report", str(lm_dir), str(run_dir), "--format", "lm-eval", "-o", str(tmp_path / "x")])
    assert r.exit_code != 0 and "is an lm-eval output already" in r.output and not (tmp_path / "x").exists()
    with pytest.raises(ResultsError, match="is an lm-eval output: check re-scores"):
        from abricot_local.run.check import check_run

        check_run(lm_dir)
    from abricot_local.run.kld import ladder_of

    for ref, run in ((lm_dir, run_dir), (run_dir, lm_dir)):  # kld reads a run as check does: refused alike
        with pytest.raises(ResultsError, match="is an lm-eval output: kld measures runs of abricot-local"):
            ladder_of(str(ref), [str(run)])


def test_items_of_no_task_are_refused(fake_pair, discotex_dir, tmp_path):
    lm_dir, _ = fake_pair
    edited = _copy(lm_dir, tmp_path)
    (samples,) = edited.glob("samples_abricot_mc_2*.jsonl")
    rows = [json.loads(x) for x in samples.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        for k in row["arguments"]:
            row["arguments"][k]["arg_0"] = "Una domanda che nessun compito pone:"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    why = _refusal(edited, data=(("discotex", str(discotex_dir)),))
    assert "no item of any task here has the scored context and continuations" in why


# -- issue 38: one prompt under two keys --------------------------------------------------------
def test_compare_pairs_a_prompt_variant_recorded_under_another_key(discotex_dir, tmp_path):
    flags = ("--backend", "fake", "--tasks", "discotex", "--data-dir", discotex_dir, "--limit", 2)
    _invoke("run", "fake", *flags, "--prompt-variant", "ita-bench", "--out", tmp_path / "one")
    _invoke("run", "fake", *flags, "--prompt-variant", "ita-bench,card", "--out", tmp_path / "two")
    assert set(json.loads((tmp_path / "two" / "results.json").read_text())["tasks"]) == {"discotex~ita-bench",
                                                                                         "discotex"}
    doc = json.loads(_invoke("compare", tmp_path / "one", tmp_path / "two", "--format", "json"))
    (m,) = doc["matches"]
    assert (m["task"], m["n_common"]) == ("discotex", 2)  # ita-bench with ita-bench, not with card
    assert doc["verdicts"][0]["kind"] == "identical"
    assert any("recorded it as discotex~ita-bench" in n for n in doc["notes"])
    assert "task discotex~card is not in every run: not compared" in doc["notes"]  # its key was taken: its variant
    # a key naming other prompts is not paired: the card run against the ita-bench one shares no item
    _invoke("run", "fake", *flags, "--out", tmp_path / "card")
    r = CliRunner().invoke(cli, ["compare", str(tmp_path / "one"), str(tmp_path / "card")])
    assert r.exit_code != 0 and "no common items" in r.output


def test_an_lm_eval_variant_pairs_with_a_run_keyed_otherwise(fake_pair, discotex_dir, tmp_path):
    """abricot_mc_ita is read as discotex~ita-bench (beside the card's discotex); a `--prompt-variant
    ita-bench` run keys the same prompts discotex: compare pairs them by what they scored."""
    lm_dir, _ = fake_pair
    _invoke("run", "fake", "--backend", "fake", "--n-ctx", 2048, "--tasks", "discotex", "--data-dir", discotex_dir,
            "--limit", N, "--prompt-variant", "ita-bench", "--out", tmp_path / "ita")
    doc = json.loads(_invoke("compare", lm_dir, tmp_path / "ita", "--format", "json"))
    (m,) = doc["matches"]
    assert (m["task"], m["n_common"]) == ("discotex~ita-bench", N) and doc["verdicts"][0]["kind"] == "identical"
    assert any("recorded it as discotex;" in n for n in doc["notes"])


# -- the real model -----------------------------------------------------------------------------
@pytest.mark.real
def test_real_lm_eval_folder_compares_bit_identical_with_a_run(gemma_path, discotex_dir, tmp_path):
    """Gemma 3 270M through real lm-eval and through `run`, the same DISCOTEX items: paired item by
    item, every log-likelihood bit-identical (the card's prompt has one blank line: one schedule)."""
    _lm_eval()
    lm_dir, run_dir = _both(tmp_path, discotex_dir, str(gemma_path), "n_ctx=1024,threads=1",
                            ("--n-ctx", "1024", "--threads", "1"))
    doc = json.loads(_invoke("compare", lm_dir, run_dir, "--format", "json"))
    assert doc["matches"][0]["n_common"] == N and doc["verdicts"][0]["kind"] == "identical"
    (ag,) = doc["agreement"]
    assert ag["max_abs_delta"] == 0.0 and ag["same_pred"] == 1.0


# -- issue 48 item 2: the shipped configs read back as `run`'s own task instances -------------------
@pytest.fixture(scope="module")
def shipped(abricot_file, discotex_dir, tmp_path_factory):
    """The four shipped lm-eval configs (abricot_local/lm_eval/tasks/) through real lm-eval on the fake
    backend, 2 items each, and `run` of the same items under each protocol and wording."""
    _lm_eval()
    folder = tmp_path_factory.mktemp("shipped")
    data = folder / "data"  # one folder holding both releases: lm-eval's metadata data_dir, for every task
    data.mkdir()
    for f in [abricot_file, *discotex_dir.iterdir()]:
        (data / f.name).symlink_to(f)
    fake = ("--backend", "fake", "--n-ctx", "4096")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in isolated_env(folder).items():
            mp.setenv(key, value)
        mp.chdir(folder)
        ours_only(mp)  # the shipped tasks come through abricot-local lm-eval's own --include_path
        _invoke("lm-eval", "fake", "--tasks", "abricot_paper,abricot_calamita,discotex_card,discotex_itabench",
                "--model_args", "backend=fake,n_ctx=4096", "--metadata", json.dumps({"data_dir": str(data)}),
                "--limit", 2, "--log_samples", "--output_path", "out", "--batch_size", 8)
        for name, flags in (("paper", ("--protocol", "paper")), ("calamita", ("--protocol", "calamita")),
                            ("discotex", ("--prompt-variant", "card,ita-bench"))):
            tasks = "discotex" if name == "discotex" else "abricot_abs,abricot_inc"
            _invoke("run", "fake", *fake, *flags, "--tasks", tasks, "--data-dir", data, "--limit", 2,
                    "--out", folder / name)
    return folder, data


def test_the_shipped_lm_eval_configs_read_back_as_runs_task_instances(shipped):
    """abricot_calamita reads as abricot_abs@calamita / abricot_inc@calamita (the leaderboard's protocol,
    held against its rows), abricot_paper as the paper's, DISCOTEX's two wordings as `run` keys them."""
    from abricot_local.analysis import baselines
    from abricot_local.analysis.loading import load_run

    folder, data = shipped
    lm = load_run(folder / "out" / "fake", data_dir=str(data))
    runs = [load_run(folder / name) for name in ("paper", "calamita", "discotex")]
    keys = [k for r in runs for k in r.tasks]
    assert lm.tasks == tuple(keys) == ("abricot_abs", "abricot_inc", "abricot_abs@calamita", "abricot_inc@calamita",
                                       "discotex", "discotex~ita-bench")
    tasks = {k: e for r in runs for k, e in r.record.tasks.items()}
    settings = ("protocol", "prompt_variant", "shots", "shot_sampler", "seed")
    for key in keys:
        run = next(r for r in runs if key in r.tasks)
        assert {s: lm.task(key).config.get(s) for s in settings} == {s: run.task(key).config.get(s) for s in settings}
        assert [(s.id, s.logprobs) for s in lm.samples_of(key)] == [(s.id, s.logprobs) for s in run.samples_of(key)]
    # the same published rows, each held against the same instance, comparable alike
    rows = baselines.all_references(("abricot_abs", "abricot_inc"))
    assert {r.protocol.name for r in rows} == {"paper", "calamita"}
    for ref in rows:
        a, b = baselines.check_run(ref, lm.record.tasks), baselines.check_run(ref, tasks)
        assert (a.key, a.comparable, a.value) == (b.key, b.comparable, b.value) and a.comparable, ref
