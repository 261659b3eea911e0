"""`doctor` keeps each backend's facts under its name (a plugin's hook no longer overwrites another's
reinstall commands), its text shows every backend's facts and advice in the backend's own words (the shared
text names no backend), and `doctor --json` writes the options a message names as `tasks --json` does."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from abricot_local import backends
from abricot_local.backends import Registered
from abricot_local.backends.llama_cpp import build as llama_build
from abricot_local.backends.llama_cpp import doctor as llama_doctor
from abricot_local.cli import cli
from abricot_local.cli.options import flags
from abricot_local.console.listings import doctor_text, json_text
from abricot_local.errors import keywords, opt, render
from abricot_local.models import doctor

FAKE = "abricot_local.backends.options:ScoringOptions"


def hook_a(gpus):
    return {"reinstall": {"cpu": "pip install a-runtime"}, "advice": ["a: update the runtime"],
            "text": ["a-runtime 1.0", "reinstall: pip install a-runtime"]}


def hook_b(gpus):
    return {"reinstall": {"cpu": "pip install rc-uniform"}, "version": {"b": "2.0"}, "advice": ["b: nothing to install"]}


def hook_broken(gpus):
    raise RuntimeError("probe exploded")


def hook_odd(gpus):
    return ["not", "a", "dict"]


@pytest.fixture
def toy_backends(monkeypatch):
    """Only toy backends registered, each with a doctor hook of this module (no runtime is probed)."""
    registered = backends.BACKENDS
    for name in list(registered):
        monkeypatch.delitem(registered, name)
    for name, hook in (("a", "hook_a"), ("b", "hook_b"), ("broken", "hook_broken"), ("odd", "hook_odd"), ("nohook", "")):
        monkeypatch.setitem(registered, name, Registered("abricot_local.backends.fake:FakeBackend", FAKE,
                                                         reads_model_file=False,
                                                         doctor=f"test_doctor_plugins:{hook}" if hook else ""))


def test_each_backends_facts_stay_under_its_name(toy_backends):
    facts = doctor.backend_facts({"gpus": []})
    assert list(facts) == ["a", "b", "broken", "odd"]  # a backend without a hook has none
    assert facts["a"]["reinstall"] == {"cpu": "pip install a-runtime"}  # b's reinstall replaces nothing of a's
    assert facts["b"]["reinstall"] == {"cpu": "pip install rc-uniform"}
    assert facts["broken"]["error"] == ("its doctor hook test_doctor_plugins:hook_broken failed: RuntimeError: "
                                        "probe exploded")
    assert facts["odd"]["error"].endswith("TypeError: it returned list, not a dict")


def test_the_text_shows_every_backend_in_its_own_words_and_names_none_itself(toy_backends):
    facts = {"python": {"version": "3.11.7"}, "packages": {"abricot-local": "0.1.0"}, "memory": {}, "nvidia": {},
             "backends": doctor.backend_facts({"gpus": []}), "tasks": [], "plugins_not_run": [],
             "backends_not_usable": ["backend plugin 'c' (c:R) failed to load"]}
    lines = doctor_text(facts).splitlines()
    assert lines[0] == "python 3.11.7  abricot-local 0.1.0"
    at = lines.index("backend a:")
    assert lines[at + 1:at + 3] == ["  a-runtime 1.0", "  reinstall: pip install a-runtime"]  # its own lines
    at = lines.index("backend b:")  # no text of its own: each fact, a mapping's keys a line each
    assert lines[at + 1:at + 5] == ["  reinstall:", '    cpu: "pip install rc-uniform"', "  version:", '    b: "2.0"']
    assert "  its doctor hook test_doctor_plugins:hook_broken failed: RuntimeError: probe exploded" in lines
    assert lines[-3:] == ["backend not usable: backend plugin 'c' (c:R) failed to load",
                          "advice (a): a: update the runtime", "advice (b): b: nothing to install"]
    assert "llama" not in "\n".join(lines).lower()  # nothing of llama.cpp where it is not registered


def test_llama_cpps_own_lines_name_its_build_rpc_and_every_reinstall_command():
    llama = {"importable": True, "version": "0.3.36", "system_info": "CPU : AVX = 1 |", "gpu_offload": True,
             "gpu_backends": [], "rpc": False, "build": "portable", "cpu_features": ["AVX", "AVX2"]}
    facts = {"llama_cpp": llama, "reinstall": dict(llama_build.REINSTALL), "reinstall_what": dict(llama_build.WHAT),
             "reinstall_rpc": llama_build.REINSTALL_RPC}
    text = render("\n".join(llama_doctor.text(facts)), flags).replace(" \\\n      pip ", " pip ")  # (as the README)
    assert text.startswith("llama-cpp-python 0.3.36; system info: CPU : AVX = 1 |\nllama.cpp build: portable (GGML_")
    assert "GPU backends: none in this build (offload only to --rpc servers' devices)" in text
    assert f"RPC (llama.cpp over the network; run --rpc, rpc-server): not in this build; reinstall with: " \
           f"{llama_build.REINSTALL_RPC}" in text
    assert all(f"{what}):\n    {llama_build.REINSTALL[kind]}" in text for kind, what in llama_build.WHAT.items())
    assert llama_doctor.text({**facts, "llama_cpp": {"importable": False, "error": "ImportError: x"}})[0] == (
        "llama-cpp-python does not load: ImportError: x")


def test_doctor_json_writes_the_options_a_message_names_as_tasks_json_does(toy_backends):
    doctor_json = CliRunner().invoke(cli, ["doctor", "--json"])
    tasks_json = CliRunner().invoke(cli, ["tasks", "--json"])
    assert doctor_json.exit_code == tasks_json.exit_code == 0, doctor_json.output + tasks_json.output
    for out in (doctor_json.stdout, tasks_json.stdout):  # no private-use marker, raw or escaped
        assert "\\ue00" not in out and not any(0xE000 <= ord(c) <= 0xF8FF for c in out)
    facts, rows = json.loads(doctor_json.stdout), json.loads(tasks_json.stdout)
    notes = {t["name"]: t["data_note"] for t in facts["tasks"]}
    assert notes and notes == {r["name"]: r["data_note"] for r in rows}
    assert any("--data abricot=FILE" in (n or "") for n in notes.values()), notes
    assert facts["backends"]["b"]["reinstall"] == {"cpu": "pip install rc-uniform"}


def test_json_text_renders_every_string_through_the_namer_and_keeps_the_rest():
    value = {"note": f"offline: {opt('data', ('abricot', 'FILE'))}", "n": 3, "rows": [(opt("shots", 3), None)]}
    assert json.loads(json_text(value, keywords)) == {"note": 'offline: data={"abricot": FILE}', "n": 3,
                                                      "rows": [["shots=3", None]]}
