"""The kernel path (issue 20 items 3-4, issue 22 item 6): what decides the arithmetic is
recorded, described and compared; `check` on another kernel path says so first, re-scores and
gives compare's verdict (exit 1 only for `different`, or with --exact); the default of
--extra-bufts is off, and its value recorded; doctor says native or portable, and what an RPC-only
build offloads to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.record import kernel_path
from abricot_local.backends import recorded_options
from abricot_local.backends.llama_cpp import build as llama_build
from abricot_local.backends.llama_cpp.kernels import features
from abricot_local.backends.llama_cpp.options import LlamaCppOptions
from abricot_local.cli import cli
from abricot_local.console import start_line
from abricot_local.console.listings import doctor_text
from abricot_local.record import Manifest, Provenance, RunConfig, resume_refusal
from abricot_local.errors import recorded_words, render
from abricot_local.record.schema import Device, Kernels
from invented_data import write_discotex

PORTABLE_INFO = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
NATIVE_INFO = PORTABLE_INFO + "BMI2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | "


def kernels(**kw) -> Kernels:
    base = dict(runtime="llama-cpp-python 0.3.36", build="portable", system_info=PORTABLE_INFO,
                cpu_features=features(PORTABLE_INFO), extra_bufts=False, cpu="AMD EPYC", threads=2,
                devices=(Device(name="CPU", description="AMD EPYC", type="cpu"),))
    return Kernels(**{**base, **kw})


H200 = Device(name="CUDA0", description="NVIDIA H200", type="gpu", compute_capability="9.0", driver="560.35.03")


# -- what is compared ----------------------------------------------------------------------------
def test_features_are_the_cpu_sections_flags_that_are_on():
    assert features("CPU : AVX = 1 | AVX2 = 1 | AVX512 = 0 | CUDA : ARCHS = 890 | USE_GRAPHS = 1 |") == \
        ("AVX", "AVX2")
    assert features(NATIVE_INFO)[-3:] == ("BMI2", "AVX512", "AVX512_VNNI")


def test_the_same_build_on_another_cpu_model_or_thread_count_is_the_same_kernel_path():
    here = kernels(cpu="Intel Xeon Gold 6338", threads=16,
                   devices=(Device(name="CPU", description="Intel Xeon Gold 6338", type="cpu"),))
    assert kernel_path.differences(kernels(), here) == ()


@pytest.mark.parametrize("change, says", [
    (dict(build="native", system_info=NATIVE_INFO, cpu_features=features(NATIVE_INFO)),
     "build: recorded portable build (SSE3 SSSE3 AVX AVX2 F16C FMA LLAMAFILE OPENMP), here native build (SSE3"),
    (dict(build="native"), "build: recorded portable build"),
    (dict(extra_bufts=True), "extra buffer types (repacked CPU weights): recorded off, here on"),
    (dict(runtime="llama-cpp-python 0.3.37"), "runtime: recorded llama-cpp-python 0.3.36, here llama-cpp-python 0.3.37"),
    (dict(devices=(Device(name="CPU", type="cpu"), H200)),
     "devices: recorded CPU only, here CUDA0 NVIDIA H200 (compute capability 9.0, driver 560.35.03)"),
])
def test_each_fact_that_decides_the_arithmetic_is_named(change, says):
    diff = kernel_path.differences(kernels(), kernels(**change))
    assert len(diff) == 1 and diff[0].startswith(says), diff


def test_another_gpu_driver_is_another_kernel_path():
    other = Device(name="CUDA0", description="NVIDIA H200", type="gpu", compute_capability="9.0", driver="570.1")
    a, b = kernels(devices=(H200,)), kernels(devices=(other,))
    assert kernel_path.differences(a, b) == ("devices: recorded CUDA0 NVIDIA H200 (compute capability 9.0, "
                                             "driver 560.35.03), here CUDA0 NVIDIA H200 (compute capability 9.0, "
                                             "driver 570.1)",)


def test_unknown_facts_are_not_compared():
    assert kernel_path.differences(kernels(build="unknown", extra_bufts=None), kernels(build="native")) == ()
    assert kernel_path.differences(None, kernels()) == ()


def test_a_run_without_a_recorded_kernel_path_has_none():
    prov = Provenance.from_dict({"backend": "llama.cpp", "llama_cpp_python": "0.3.36", "system_info": NATIVE_INFO,
                                 "threads": 8, "schedule": {"extra_bufts": True}})
    assert kernel_path.recorded(prov) is None and kernel_path.recorded(None) is None
    assert kernel_path.recorded(Provenance.from_dict({"backend": "fake"})) is None


def test_threads_are_named_and_count_only_where_a_decode_depended_on_them():
    assert kernel_path.thread_note(kernels(), kernels(), 5) == (None, False)
    note, moved = kernel_path.thread_note(kernels(threads=16), kernels(threads=2), 0)
    assert not moved and note == ("threads: recorded 16, here 2; no decode call of these items depends on the "
                                  "thread count")
    note, moved = kernel_path.thread_note(kernels(threads=16), kernels(threads=2), 3)
    assert moved and "3 decode call(s) of these items depend on the thread count" in note


def test_the_description_names_build_buffers_devices_cpu_and_runtime():
    text = kernel_path.describe(kernels(devices=(Device(name="CPU", type="cpu"), H200)))
    assert text == ("portable build (SSE3 SSSE3 AVX AVX2 F16C FMA LLAMAFILE OPENMP); plain CPU kernels (extra buffer "
                    "types off); devices: CUDA0 NVIDIA H200 (compute capability 9.0, driver 560.35.03); CPU AMD EPYC; "
                    "llama-cpp-python 0.3.36")


def test_the_start_line_names_the_kernel_path():
    class Plan:
        quant, backend, model_path, model_label, runs = "Q4_K_M", "llama.cpp", "/m/x.gguf", "x", ()

    text = start_line(Plan(), ("engine prefix", "threads 4"), kernels())
    assert text.splitlines()[0].endswith("; tasks: ; backend llama.cpp, engine prefix, threads 4")
    assert text.splitlines()[1] == f"kernels: {kernel_path.describe(kernels())}"
    assert "\n" not in start_line(Plan(), (), None)  # no kernel path known: no second line


# -- the build ---------------------------------------------------------------------------------
def test_the_build_kind_comes_from_ggml_config_cmake():
    text = 'set(GGML_AVX2 "ON")\nset(GGML_NATIVE "OFF")\nset(GGML_CPU_ALL_VARIANTS "OFF")\n'
    assert llama_build.kind(llama_build.parse_cmake(text)) == "portable"
    assert llama_build.kind(llama_build.parse_cmake(text.replace('NATIVE "OFF"', 'NATIVE "ON"'))) == "native"
    assert llama_build.kind(llama_build.parse_cmake(text.replace('VARIANTS "OFF"', 'VARIANTS "ON"'))) == "dispatch"
    assert llama_build.kind({}) == "unknown"


def test_the_installed_build_is_read_and_ci_installs_the_portable_one():
    import os

    kind = llama_build.build_kind()
    assert kind in ("portable", "native", "dispatch", "unknown")
    if os.environ.get("CI", "").lower() == "true":
        assert kind == "portable", ".ci/run installs llama-cpp-python with the portable CMAKE_ARGS"
        assert llama_build.switches()["GGML_AVX2"] == "ON" and llama_build.switches()["GGML_AVX512"] == "OFF"


def test_ci_and_the_readme_install_the_portable_build_with_the_same_switches():
    root = Path(__file__).resolve().parents[1]
    args = f'CMAKE_ARGS="{llama_build.PORTABLE_CMAKE_ARGS}"'
    assert args in (root / ".ci" / "run").read_text(encoding="utf-8")
    assert args in (root / "README.md").read_text(encoding="utf-8")
    assert "-DGGML_RPC=on" in llama_build.PORTABLE_CMAKE_ARGS


def test_doctor_says_what_an_rpc_only_build_offloads_to_and_every_reinstall_has_rpc():
    from abricot_local.backends.llama_cpp import doctor as llama_doctor
    from abricot_local.cli.options import flags
    from abricot_local.errors import render

    llama = {"importable": True, "system_info": PORTABLE_INFO, "gpu_offload": True, "gpu_backends": [],
             "rpc": True, "build": "portable", "cpu_features": ["AVX", "AVX2"]}
    own = {"llama_cpp": llama, "reinstall": dict(llama_build.REINSTALL), "reinstall_what": dict(llama_build.WHAT),
           "reinstall_rpc": llama_build.REINSTALL_RPC, "advice": []}
    facts = {"python": {"version": "3.11.7"}, "packages": {"llama-cpp-python": "0.3.36"},
             "memory": {"ram_total": 2**34, "ram_available": 2**33}, "nvidia": {"gpus": []}, "models": [],
             "backends": {"llama.cpp": {**own, "text": llama_doctor.text(own)}}, "tasks": []}
    text = render(doctor_text(facts), flags).replace(" \\\n        pip ", " pip ")  # (as the README: `\`)
    assert "GPU offload supported" not in text and "CPU only" not in text.split("GPU backends:")[0]
    assert "GPU backends: none in this build (offload only to --rpc servers' devices)" in text
    assert "llama.cpp build: portable (GGML_NATIVE=OFF)" in text
    assert "RPC (llama.cpp over the network; run --rpc, rpc-server): available" in text
    assert all("-DGGML_RPC=on" in cmd for cmd in llama_build.REINSTALL.values())
    assert all(cmd in text for cmd in llama_build.REINSTALL.values())
    llama.update(gpu_offload=False, build="native")
    text = "\n".join(llama_doctor.text(own))
    assert "GPU backends: none in this build (CPU only)" in text and "llama.cpp build: native (GGML_NATIVE=ON)" in text


# -- --extra-bufts: off by default, recorded whatever its value ---------------------------------
def test_extra_bufts_is_off_by_default_and_recorded():
    assert LlamaCppOptions().extra_bufts == "off"
    assert LlamaCppOptions().config()["extra_bufts"] == "off"
    assert LlamaCppOptions(extra_bufts="on").config()["extra_bufts"] == "on"
    assert LlamaCppOptions(extra_bufts="auto").config()["extra_bufts"] == "auto"
    assert recorded_options("llama.cpp", {"extra_bufts": "auto"}).extra_bufts == "auto"
    assert recorded_options("llama.cpp", {"n_ctx": 512}).extra_bufts == "off"  # no key: the default


def test_resuming_with_another_extra_bufts_names_both(tmp_path):
    old = Manifest(config=RunConfig.from_dict({"model": "m", "backend": "llama.cpp", "n_ctx": 512,
                                               "extra_bufts": "auto"}))
    new = Manifest(config=RunConfig.from_dict({"model": "m", "backend": "llama.cpp", "n_ctx": 512,
                                               "extra_bufts": "off"}))
    assert "--extra-bufts: recorded auto, given off" in render(resume_refusal(tmp_path, old, new), recorded_words)
    assert resume_refusal(tmp_path, old, old) is None


# -- check on another kernel path (the fake backend, its recorded kernel path edited) ---------------
def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def fake_run_folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("kp")
    data = write_discotex(base / "d", 10)  # 20 items
    r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--out", base / "run")
    assert r.exit_code == 0, r.output
    return base / "run", data


def edited(src: Path, dst: Path, *, kernels_change: dict | None = None, logprobs=None) -> Path:
    """A copy of a fake run with its recorded kernel path and/or its samples' log-probs changed."""
    import shutil

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    if kernels_change is not None:
        doc["provenance"]["kernels"].update(kernels_change)
    (dst / "results.json").write_text(json.dumps(doc))
    if logprobs is not None:
        path = dst / "samples-discotex.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for k, line in enumerate(lines):
            line["logprobs"] = logprobs(k, line)
            line["pred"] = max(range(len(line["logprobs"])), key=line["logprobs"].__getitem__)
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


def test_check_on_the_recorded_kernel_path_keeps_its_output(fake_run_folder):
    run, _ = fake_run_folder
    r = invoke("check", run)
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    assert out[0].startswith("kernel path: as recorded (synthetic build; CPU only; fake)")
    assert out[1:] == ["note: tolerance 0 (exact): the recorded kernel path and the prefix engine give bit-identical "
                       "numbers; give --atol to allow a difference",
                       "checked 20 items: 20 identical predictions, max |logprob difference| 0 (atol 0)",
                       "reproduced: the re-scored items match the run's record (not a verdict on a published value)"]


def test_check_of_a_run_that_recorded_no_kernel_path_says_so_and_demands_the_numbers(fake_run_folder, tmp_path):
    run = edited(fake_run_folder[0], tmp_path / "r")
    doc = json.loads((run / "results.json").read_text())
    del doc["provenance"]["kernels"]
    (run / "results.json").write_text(json.dumps(doc))
    r = invoke("check", run)
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == ("kernel path: not recorded by the run (here: synthetic "
                                                             "build; CPU only; fake)")


def test_check_on_another_kernel_path_says_so_first_and_passes_on_an_identical_verdict(fake_run_folder, tmp_path):
    run = edited(fake_run_folder[0], tmp_path / "r", kernels_change={"cpu_features": ["AVX512"]})
    r = invoke("check", run)
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("check: the kernel path differs from the recorded run's (build: recorded synthetic "
                               "build (AVX512), here synthetic build): re-scoring, then comparing")
    out = r.stdout.splitlines()
    assert out[:2] == ["kernel path: NOT the recorded one, so the numbers may differ (docs/numerics.md):",
                       "  build: recorded synthetic build (AVX512), here synthetic build"]
    verdict = next(line for line in out if line.startswith("verdict: "))
    assert verdict.endswith(" (re-scored here): identical (on these 20 common items, every log-prob bit-identical)")
    assert out[-1].startswith("reproduced on another kernel path: the re-scored items match the run's record; passed: "
                              "re-scored against its record, the verdict is identical, not different")
    doc = json.loads(invoke("check", run, "--json").stdout)
    assert doc["kernels"]["same"] is False and doc["verdict"]["kind"] == "identical" and doc["passed"]


def test_numbers_that_moved_within_noise_pass_on_another_kernel_path_but_not_with_exact(fake_run_folder, tmp_path):
    import numpy as np

    def nudge(k, line):  # every log-prob moved by 0.01-0.05 nats, the prediction kept
        lp = np.asarray(line["logprobs"], float)
        return list(lp + np.where(np.arange(len(lp)) == np.argmax(lp), 0.05, 0.01))

    run = edited(fake_run_folder[0], tmp_path / "r", kernels_change={"build": "native"}, logprobs=nudge)
    r = invoke("check", run)
    assert r.exit_code == 0, r.output
    assert "numerically close" not in r.stdout  # 0.05 nats > compare's tolerance
    assert "(re-scored here): cannot tell apart (" in r.stdout and "the verdict is cannot tell apart" in r.stdout
    assert "not reproduced bit for bit" in r.stdout
    r = invoke("check", run, "--exact")
    assert r.exit_code == 1 and r.stdout.splitlines()[-1].startswith("NOT reproduced (--exact demands")
    same_path = edited(fake_run_folder[0], tmp_path / "s", logprobs=nudge)  # the recorded kernel path
    r = invoke("check", same_path)
    assert r.exit_code == 1 and r.stdout.splitlines()[-1] == ("NOT reproduced: the run, re-scored, does not match its record "
                                                        "(above)") and "verdict:" not in r.stdout


def test_a_different_verdict_on_another_kernel_path_fails(fake_run_folder, tmp_path):
    def right(k, line):  # the recorded run answered every item right: accuracy 1.0 against about 0.2
        return [0.0 if c == line["gold"] else -9.0 for c in range(len(line["logprobs"]))]

    run = edited(fake_run_folder[0], tmp_path / "r", kernels_change={"build": "native"}, logprobs=right)
    r = invoke("check", run)
    assert r.exit_code == 1, r.output
    assert "(re-scored here): different (" in r.stdout
    assert r.stdout.splitlines()[-1] == "NOT reproduced: re-scored against its record, the verdict is different"


def test_merge_refuses_shards_scored_on_another_kernel_path(tmp_path):
    data = write_discotex(tmp_path / "d", 5)
    shards = []
    for k in (1, 2):
        out = tmp_path / f"s{k}"
        r = invoke("run", "fake", "--backend", "fake", "--data-dir", data, "--tasks", "discotex", "--shard", f"{k}/2",
                   "--out", out)
        assert r.exit_code == 0, r.output
        shards.append(out)
    doc = json.loads((shards[1] / "results.json").read_text())
    doc["provenance"]["kernels"]["cpu_features"] = ["AVX2"]
    (shards[1] / "results.json").write_text(json.dumps(doc))
    r = invoke("merge", *shards, "--out", tmp_path / "m")
    assert r.exit_code != 0 and "was scored on another kernel path than" in r.output
    assert "build: recorded synthetic build, here synthetic build (AVX2)" in r.output
