"""Three things said of what is paired or gathered (F14): compare's settings of two instances paired under other keys
(`--by-id`: a `--protocol paper` run's ``abricot_abs`` with a `--protocol calamita` run's ``abricot_abs@calamita``)
side by side under the key compared, the other key said once; `merge` of a folder holding one whole set of shards
beside whole runs lists them in shard order and names the merge; quantize's closing `run them:` line names the whole
ladder its models.toml lists (an earlier call's rungs too, the reference first). Fake backend, tiny GGUFs."""

from __future__ import annotations

import re
import shutil
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.compare import compare
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from conftest import FIXTURE
from invented_data import write_discotex

RECORDED_KEY = "recorded_key"  # TASK.recorded_key: the key a run recorded the instance compared as TASK under
FAKE = ("run", "fake", "--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_abs", "--data",
        f"abricot={FIXTURE}", "--limit", "6")  # test_compare_protocols' runs: made once per session


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_instances_paired_by_id_compare_their_settings_side_by_side(finished_run):
    paper = finished_run(*FAKE, "--protocol", "paper", "--seed", "7")
    calamita = finished_run(*FAKE, "--protocol", "calamita")
    c = compare([load_run(paper), load_run(calamita)], by_id=True)
    rows = {d.key: (d.value_a, d.value_b) for d in c.differs}
    assert not [k for k in rows if k.startswith("abricot_abs@calamita.")]  # under the key compared, not its own
    assert rows[f"abricot_abs.{RECORDED_KEY}"] == ("abricot_abs", "abricot_abs@calamita")  # the other key, once
    assert rows["abricot_abs.config.shots"] == (3, 0)
    assert rows["abricot_abs.config.prompt_variant"] == ("paper", "calamita")
    assert all(None not in v for k, v in rows.items() if k.startswith("abricot_abs."))  # both sides recorded
    text = invoke("compare", paper, calamita, "--by-id").output
    table = text[text.index("Recorded settings that differ"):text.index("Paired differences")]
    assert "(not recorded)" not in table and table.count("abricot_abs@calamita") == 1
    assert re.search(r"abricot_abs\.config\.shots\s+3\s+0", table), table
    same = compare([load_run(paper), load_run(paper)])  # one key each: no row says it
    assert not [d for d in same.differs if d.key.endswith(RECORDED_KEY)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_discotex(tmp_path_factory.mktemp("pairs-settings") / "data", 4)


def test_a_folder_of_one_runs_shards_beside_whole_runs_names_the_merge_in_shard_order(finished_run, data, tmp_path):
    base = ("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--sample", "6")
    held = tmp_path / "sh"
    for name, shard in (("p1", "1/3"), ("p3", "3/3"), ("shard-2-of-3", "2/3")):  # by name: 1/3, 3/3, 2/3
        shutil.copytree(finished_run(*base, "--shard", shard), held / name)
    shutil.copytree(finished_run(*base), held / "whole")
    r = invoke("merge", held, "--out", tmp_path / "m")
    text = " ".join(r.output.split())
    folders = " ".join(str(held / n) for n in ("p1", "shard-2-of-3", "p3"))
    assert r.exit_code == 2 and ("shard(s) 1/3, 2/3, 3/3 of a run of fake (p1, shard-2-of-3, p3)" in text
                                 and f"merge {folders}" in text), r.output
    assert invoke("merge", *folders.split(), "--out", tmp_path / "m").exit_code == 0  # the advice, followed
    shutil.rmtree(held / "p3")  # no whole set: none named
    text = " ".join(invoke("merge", held, "--out", tmp_path / "m2").output.split())
    assert "give the folders of the shards of one run" in text and "merge /" not in text


def test_the_run_line_names_the_whole_ladder_the_models_toml_lists(tmp_path):
    from abricot_local.models.quants import expand
    from abricot_local.models.registry import load_registry
    from tiny_llama import write_tiny

    src = invoke("quantize", write_tiny(tmp_path / "model-f16.gguf"), "--to", "Q8_0", "--out", tmp_path / "src")
    q8 = tmp_path / "src" / "model-q8_0.gguf"  # a quantized SOURCE: its ladder is requantized, F16 its reference
    assert src.exit_code == 0 and q8.is_file(), src.output
    out = tmp_path / "rungs"
    first = invoke("quantize", q8, "--to", "Q4_K_M,Q4_0", "--allow-requantize", "--out", out)
    assert "--quants F16,Q4_K_M,Q4_0 " in first.output, first.output
    more = invoke("quantize", q8, "--to", "Q5_0", "--allow-requantize", "--out", out)  # a rung added
    line = next(ln for ln in more.output.splitlines() if ln.startswith("run them: "))
    words = shlex.split(line.removeprefix("run them: "))
    quants = words[words.index("--quants") + 1]
    assert quants == "F16,Q4_K_M,Q4_0,Q5_0", line  # the ladder, not only this call's F16 and Q5_0
    registry = load_registry(words[words.index("--models") + 1])
    ran = expand([words[2]], quants, registry)  # the line runs as printed: every rung, the reference first
    assert [registry[a].quant for a in ran] == quants.split(",") and Path(registry[ran[0]].path).name.endswith("f16.gguf")
