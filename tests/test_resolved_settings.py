"""Settings left to "auto" are recorded as llama.cpp resolved them (issue 10, item 12), and
the context-overflow message says what was asked and what llama.cpp allocated (item 8).
The log parsing is checked on llama.cpp's own strings, then on the real Gemma 3 270M."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from click.testing import CliRunner

from abricot_local.backends.llama_cpp import log as llama_log
from conftest import FIXTURE
from invented_data import write_discotex


def test_flash_attn_parsing_on_llama_cpp_strings():
    asked = "llama_context: flash_attn            = auto\n"
    assert llama_log.flash_attn([asked, "resolve_fused_ops: Flash Attention enabled\n"], "auto") == "on"
    assert llama_log.flash_attn([asked, "resolve_fused_ops: Flash Attention not supported, set to disabled\n"],
                                "auto") == "off"
    assert llama_log.flash_attn([asked, "llama_context: Flash Attention was auto, set to enabled\n"], "auto") == "on"
    assert llama_log.flash_attn(["llama_context: flash_attn is not compatible with Grok - forcing off\n"], "on") == "off"
    assert llama_log.flash_attn(["llama_context: enabling flash_attn since it is required for quantized V cache\n"],
                                "auto") == "on"
    assert llama_log.flash_attn([asked], "auto") == "unknown"
    assert llama_log.flash_attn([], "off") == "off"
    # fused-op lines that are not about flash attention do not count
    assert llama_log.flash_attn([asked, "resolve_fused_ops: fused DeepSeek V4 HC pre enabled\n"], "auto") == "unknown"
    assert llama_log.offloaded_layers(["load_tensors: offloaded 19/19 layers to GPU\n"]) == (19, 19)
    assert llama_log.offloaded_layers(["nothing here\n"]) is None
    # llama.cpp counts layers as offloaded on any build that could; the buffers say where they went
    cpu = ["load_tensors: offloaded 19/19 layers to GPU\n", "load_tensors:   CPU_Mapped model buffer size =   235.16 MiB\n"]
    assert llama_log.model_buffers(cpu) == {"CPU_Mapped": 235.16} and llama_log.layers_on_gpu(cpu) == "0/19"
    gpu = ["load_tensors: offloaded 19/19 layers to GPU\n", "load_tensors:        CUDA0 model buffer size =   235.16 MiB\n",
           "load_tensors:   CPU_Mapped model buffer size =    40.00 MiB\n"]
    assert llama_log.layers_on_gpu(gpu) == "19/19" and llama_log.layers_on_gpu([]) == "?"
    assert llama_log.notable(cpu[1])
    assert llama_log.notable("llama_context: flash_attn            = auto\n")
    assert not llama_log.notable("create_tensor: loading tensor blk.17.ffn_up.input_scale\n")


def _provenance(path, **options):
    from abricot_local.backends.llama_cpp.backend import LlamaCppBackend, LlamaCppOptions

    be = LlamaCppBackend(path, LlamaCppOptions(n_ctx=512, **options))
    try:
        return be.provenance().to_dict()
    finally:
        be.close()


@pytest.mark.real
def test_auto_settings_are_recorded_as_resolved(gemma_path):
    prov = _provenance(gemma_path)
    sched = prov["schedule"]
    assert sched["flash_attn"] == "auto"
    assert sched["flash_attn_resolved"] in ("on", "off"), sched
    assert prov["threads"] == (os.cpu_count() or 1)  # threads None: all cores, as llama.cpp reports
    assert isinstance(sched["n_gpu_layers"], int) and sched["n_gpu_layers"] >= 0  # -1 resolved
    assert re.fullmatch(r"\d+/\d+", sched["layers_offloaded"]), sched
    assert sched["model_buffers"] and all(v > 0 for v in sched["model_buffers"].values())
    if all(k.upper().startswith("CPU") for k in sched["model_buffers"]):  # no GPU device here
        assert sched["layers_offloaded"].startswith("0/")
    assert isinstance(sched["extra_bufts"], bool)  # auto resolved
    assert sched["n_ctx_allocated"] >= 512
    # an explicit choice is what llama.cpp logs too; threads as given
    off = _provenance(gemma_path, flash_attn="off", threads=1)
    assert off["schedule"]["flash_attn_resolved"] == "off" and off["threads"] == 1


@pytest.mark.real
def test_parallel_left_to_default_is_recorded(gemma_path):
    sched = _provenance(gemma_path, engine="batched")["schedule"]
    assert sched["parallel"] == 2 and sched["n_seq_max"] == 3  # n_ctx 512 / 256


@pytest.mark.real
def test_overflow_says_what_was_asked_and_allocated(gemma_path, tmp_path):
    from abricot_local.cli import cli

    data = write_discotex(tmp_path / "d", 4, words=12)
    r = CliRunner().invoke(cli, ["run", str(gemma_path), "--tasks", "discotex", "--data-dir", str(data),
                                 "--n-ctx", "64", "--limit", "1", "--out", str(tmp_path / "o")])
    assert r.exit_code != 0
    line = r.output.strip().splitlines()[-1]
    m = re.search(r"the prompt is (\d+) tokens but the context window holds (\d+) "
                  r"\(--n-ctx 64 asked, llama\.cpp allocated (\d+)\)", line)
    assert m and m.group(2) == m.group(3) and int(m.group(3)) > 64, line
    assert "Traceback" not in r.output and not (tmp_path / "o" / "results.json").exists()


@pytest.mark.real
def test_results_json_records_flash_attn_resolved(gemma_path, tmp_path):
    from abricot_local.cli import cli

    data = write_discotex(tmp_path / "d", 4)
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, ["run", str(gemma_path), "--tasks", "discotex", "--data-dir", str(data),
                                 "--limit", "2", "--n-ctx", "512", "--out", str(out)])
    assert r.exit_code == 0, r.output
    sched = json.loads((out / "results.json").read_text())["provenance"]["schedule"]
    assert sched["flash_attn_resolved"] in ("on", "off")
    assert f"flash-attn {sched['flash_attn_resolved']}" in r.output  # the start line says it too



# -- compare and the labels judge a setting by what it resolved to (F17) ------------------------------------------
# a run's config keeps each option as asked, its provenance.schedule what the backend resolved it to
# (record.settings.RESOLVED): fake runs' results.json given both, as a llama.cpp run's record holds them

# the fake run other tests make once per session (test_compare_lmeval_keys, test_hostile_text): read only
FAKE_RUN = ("run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192",
            "--limit", "4")


def _ran(made, into, asked: dict, ran: dict):
    """A copy of the fake run ``made`` that asked ``asked`` (its config) and ran ``ran`` (its schedule)."""
    from abricot_local.analysis.loading import load_run

    doc = json.loads((made / "results.json").read_text())
    doc["config"].update(asked)
    doc["provenance"]["schedule"].update(ran)
    shutil.copytree(made, into)
    (into / "results.json").write_text(json.dumps(doc))
    return load_run(into)


ON = {"flash_attn": "auto", "flash_attn_resolved": "on", "n_gpu_layers": 0, "extra_bufts": False}


def test_asked_otherwise_but_resolved_alike_is_no_difference(finished_run, tmp_path):
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.runs import labelled
    from abricot_local.cli import cli

    made = finished_run(*FAKE_RUN)
    a = _ran(made, tmp_path / "auto", {"flash_attn": "auto", "n_gpu_layers": -1, "extra_bufts": "auto"}, ON)
    b = _ran(made, tmp_path / "on", {"flash_attn": "on", "n_gpu_layers": 0, "extra_bufts": "off"},
             {**ON, "flash_attn": "on"})
    assert not compare([a, b]).differs  # nor the schedule's asked flash_attn, nor config's -1 beside 0
    assert [r.label for r in labelled([a, b])] == ["fake (auto)", "fake (on)"]  # the folder, never flash_attn=
    text = CliRunner().invoke(cli, ["compare", str(a.path), str(b.path)]).output
    table = text[text.index("Recorded settings that differ"):text.index("Paired differences")]
    assert "(none)" in table and "flash_attn" not in text and "n_gpu_layers" not in text, text


def test_asked_alike_but_resolved_otherwise_differs(finished_run, tmp_path):
    from abricot_local.analysis.compare import compare
    from abricot_local.analysis.runs import labelled

    made = finished_run(*FAKE_RUN)
    asked = {"flash_attn": "auto", "n_gpu_layers": -1}
    a = _ran(made, tmp_path / "a", asked, ON)
    b = _ran(made, tmp_path / "b", asked, {**ON, "flash_attn_resolved": "off", "n_gpu_layers": 999})
    rows = {d.key: (d.value_a, d.value_b) for d in compare([a, b]).differs}
    assert rows == {"flash_attn": ("on", "off"), "n_gpu_layers": (0, 999)}, rows  # once each, as they ran
    assert [r.label for r in labelled([a, b])] == ["fake (flash_attn=on)", "fake (flash_attn=off)"]
