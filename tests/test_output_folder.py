"""The output folder is the run's own (issue 38 items 1, 3, 5, 8, 9; issue 39 items 5, 8): links and
foreign files are refused and left as they are, a signal while finalizing leaves nothing a resume
does not complete, names stay inside their folder, the resume command is quoted, nested runs are
refused or listed, and a resume's plan line counts what is left (fake backend, real DISCOTEX data)."""

import ast
import json
import os
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.run import folder as results
from abricot_local.names import path_part
from conftest import Early, fail_after, isolated_env


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--limit", "10"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (links as their target's text), by relative path."""
    out = {}
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(here) / name
            if p.is_symlink():
                out[str(p.relative_to(folder))] = f"-> {os.readlink(p)}".encode()
            elif p.is_file():
                out[str(p.relative_to(folder))] = p.read_bytes()
    return out


@pytest.fixture
def victim(tmp_path):
    """A folder of a user's files a link in the output folder points at."""
    v = tmp_path / "victim"
    v.mkdir()
    (v / "thesis.txt").write_text("years of work\n")
    (v / "samples-discotex.jsonl").write_text("")
    return v


@pytest.fixture
def interrupted(tmp_path, monkeypatch, base):
    """A run folder interrupted after 4 of its 10 items."""
    out = tmp_path / "o"
    fail_after(monkeypatch, 4, KeyboardInterrupt)
    assert invoke(*base, "--out", out).exit_code == 130
    monkeypatch.undo()
    assert (out / ".checkpoint" / "run.json").is_file()
    return out


def refused(r, *words):
    assert r.exit_code not in (0, 130), r.output
    assert "Traceback" not in r.output
    line = " ".join(r.output.split())  # a long error is folded over lines
    for w in words:
        assert w in line, line


# -- issue 38 item 1: links and files the run did not make ----------------------------------------
@pytest.mark.parametrize("resume", [False, True])
def test_a_checkpoint_link_to_another_folder_is_refused_and_its_files_kept(tmp_path, base, victim, interrupted,
                                                                          resume):
    before = tree(victim)
    if resume:  # an interrupted run whose checkpoint became a link
        os.rename(interrupted / ".checkpoint", tmp_path / "moved")
        (interrupted / ".checkpoint").symlink_to(victim)
        out = interrupted
    else:
        out = tmp_path / "new"
        out.mkdir()
        (out / ".checkpoint").symlink_to(victim)
    r = invoke(*base, "--out", out, *(["--resume"] if resume else []))
    refused(r, ".checkpoint", "link")
    assert tree(victim) == before
    assert (out / ".checkpoint").is_symlink()


@pytest.mark.parametrize("resume", [False, True])
def test_a_lock_link_is_refused_and_its_target_untouched(tmp_path, base, interrupted, resume):
    target = tmp_path / "precious.txt"
    target.write_text("do not truncate\n")
    out = interrupted if resume else tmp_path / "new"
    out.mkdir(exist_ok=True)
    (out / ".lock").unlink(missing_ok=True)
    (out / ".lock").symlink_to(target)
    r = invoke(*base, "--out", out, *(["--resume"] if resume else []))
    refused(r, ".lock", "link")
    assert target.read_text() == "do not truncate\n"


def test_a_checkpoint_samples_link_is_refused_and_its_target_untouched(tmp_path, base, interrupted):
    target = tmp_path / "log.jsonl"
    target.write_text("")  # a log of the user's, empty for now
    ck = interrupted / ".checkpoint" / "samples-discotex.jsonl"
    ck.unlink()
    ck.symlink_to(target)
    r = invoke(*base, "--out", interrupted, "--resume")
    refused(r, "samples-discotex.jsonl", "link")
    assert target.read_text() == ""


def test_a_checkpoint_folder_the_run_did_not_make_is_refused_and_kept(tmp_path, base):
    out = tmp_path / "o"
    (out / ".checkpoint").mkdir(parents=True)
    mine = out / ".checkpoint" / "samples-discotex.jsonl"
    mine.write_text('{"id": "task_1_ted_test_1"}\n')
    for extra in ([], ["--resume"]):
        r = invoke(*base, "--out", out, *extra)
        refused(r, str(out), "not a run folder", ".checkpoint/")
        assert mine.read_text() == '{"id": "task_1_ted_test_1"}\n'
    assert sorted(os.listdir(out)) == [".checkpoint"]  # no .lock, no state file left


def test_a_folder_that_is_not_a_run_is_refused_naming_what_it_holds(tmp_path, base):
    out = tmp_path / "o"
    out.mkdir()
    (out / "samples-discotex.jsonl").write_text("my own notes\n")
    (out / "figures").mkdir()
    r = invoke(*base, "--out", out)
    refused(r, "not a run folder", "figures/", "samples-discotex.jsonl")
    assert (out / "samples-discotex.jsonl").read_text() == "my own notes\n"
    assert sorted(os.listdir(out)) == ["figures", "samples-discotex.jsonl"]


def test_an_empty_folder_and_a_killed_runs_lock_are_taken(tmp_path, base):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke(*base, "--out", empty).exit_code == 0
    killed = tmp_path / "killed"  # killed while its model loaded: a .lock holding its pid, nothing else
    killed.mkdir()
    (killed / ".lock").write_text("12345")
    r = invoke(*base, "--out", killed)
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(killed)) == ["results.json", "samples-discotex.jsonl"]


def test_finalizing_deletes_only_the_checkpoint_files_the_run_made(tmp_path, base, interrupted):
    note = interrupted / ".checkpoint" / "notes.txt"
    note.write_text("mine\n")
    r = invoke(*base, "--out", interrupted, "--resume")
    assert r.exit_code == 0, r.output
    assert note.read_text() == "mine\n"
    assert sorted(os.listdir(interrupted / ".checkpoint")) == ["notes.txt"]
    assert (interrupted / "results.json").is_file() and not (interrupted / "INTERRUPTED").exists()


# -- issue 38 item 8: a signal while finalizing ---------------------------------------------------
STEPS = ("replace", "unlink", "rmdir", "fsync", "fchmod", "mkdir", "close", "rename")


def interrupt_finalize_at(monkeypatch, k):
    """Raise KeyboardInterrupt at the k-th file-system call finalize makes (os.replace, unlink...)."""
    state = {"n": 0, "on": False, "hit": False}

    def wrap(name):
        real = getattr(os, name)

        def call(*a, **kw):
            if state["on"]:
                state["n"] += 1
                if state["n"] == k:
                    state["on"], state["hit"] = False, True
                    raise KeyboardInterrupt
            return real(*a, **kw)
        return call

    for name in STEPS:
        monkeypatch.setattr(os, name, wrap(name))
    real_finalize = results.OutputDir.finalize

    def finalize(self, *a, **kw):
        state["on"] = True
        try:
            return real_finalize(self, *a, **kw)
        finally:
            state["on"] = False
    monkeypatch.setattr(results.OutputDir, "finalize", finalize)
    return state


def test_a_signal_at_each_step_of_finalizing_completes_or_resumes_without_stale_files(tmp_path, monkeypatch, base,
                                                                                     finished_run):
    ref = finished_run(*base)  # read only
    want = sorted(os.listdir(ref))
    outcomes = set()
    for k in range(1, 200):
        out = tmp_path / f"k{k}"
        state = interrupt_finalize_at(monkeypatch, k)
        r = invoke(*base, "--out", out)
        monkeypatch.undo()
        if not state["hit"]:
            assert r.exit_code == 0
            break
        assert "Traceback" not in r.output
        if r.exit_code == 0:  # results.json was written: the tidy-up was completed, the run is finished
            outcomes.add("completed")
        else:
            assert r.exit_code == 130, r.output
            outcomes.add("resumed")
            r = invoke(*base, "--out", out, "--resume")
            assert r.exit_code == 0, r.output
        assert sorted(os.listdir(out)) == want, k
        assert (out / "samples-discotex.jsonl").read_bytes() == (ref / "samples-discotex.jsonl").read_bytes()
        got, exp = (json.loads((d / "results.json").read_text()) for d in (out, ref))
        assert got["tasks"]["discotex"]["metrics"] == exp["tasks"]["discotex"]["metrics"]
    else:
        pytest.fail("finalize never ran to its end")
    assert k > 5 and outcomes == {"completed", "resumed"}


def test_a_resume_tidies_a_finished_run_a_kill_left_untidy(tmp_path, base, interrupted):
    r = invoke(*base, "--out", interrupted, "--resume")
    assert r.exit_code == 0
    (interrupted / "INTERRUPTED").write_text("interrupted: then\n")  # as SIGKILL mid-tidy-up leaves it
    (interrupted / ".checkpoint").mkdir()
    (interrupted / ".checkpoint" / "run.json").write_text("{}")
    (interrupted / ".results.json.x1y2.tmp").write_text("{")
    listed = invoke("runs", interrupted)
    assert "complete" in listed.output
    r = invoke(*base, "--out", interrupted, "--resume")
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(interrupted)) == ["results.json", "samples-discotex.jsonl"]


# -- issue 38 item 5: names as path parts ---------------------------------------------------------
@pytest.mark.parametrize("name,part", [("..", "x"), (".", "x"), ("...", "x"), ("", "x"), ("a/../b", "a_.._b"),
                                       ("..\\..", "_"), (".hidden", "hidden"), ("tab\there", "tab_here"),
                                       ("gemma-3-270m", "gemma-3-270m"), ("SmolLM2.Q4_1", "SmolLM2.Q4_1"),
                                       ("discotex~ita-bench", "discotex~ita-bench"), ("my run", "my run")])
def test_path_part(name, part):
    assert path_part(name, "x") == part


@pytest.mark.parametrize("model", ["..", "/"])
def test_a_model_named_dot_dot_writes_inside_results_and_its_lm_eval_export_inside_o(tmp_path, monkeypatch,
                                                                                        discotex_dir, model):
    """The fake backend takes any name as its model's label, as llama.cpp's labels a file `...gguf` `..`."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    r = invoke("run", model, "--backend", "fake", "--data-dir", discotex_dir, "--limit", "4")
    assert r.exit_code == 0, r.output
    runs = [p.parent for p in tmp_path.rglob("results.json")]
    assert len(runs) == 1 and runs[0].parent.parent == tmp_path / "work" / "results", runs
    assert json.loads((runs[0] / "results.json").read_text())["model"]["name"] == model
    assert sorted(os.listdir(tmp_path)) == ["work"]
    inner = tmp_path / "export" / "inner"
    r = invoke("report", runs[0], "--format", "lm-eval", "-o", inner)
    assert r.exit_code == 0, r.output
    written = [p for p in (tmp_path / "export").rglob("*") if p.is_file()]
    assert written and all(inner in p.parents for p in written), written


# -- issue 38 item 3: the resume command, quoted --------------------------------------------------
@pytest.mark.parametrize("folder", ["runs/my run", "$(touch pwned)"])
def test_the_printed_resume_command_is_shell_quoted(tmp_path, monkeypatch, base, folder):
    monkeypatch.chdir(tmp_path)
    fail_after(monkeypatch, 3, KeyboardInterrupt)
    monkeypatch.setattr("sys.argv", ["abricot-local", *base, "--out", folder])
    r = invoke(*base, "--out", folder)
    assert r.exit_code == 130
    line = next(ln for ln in r.output.splitlines() if ln.startswith("resume with: "))
    argv = shlex.split(line.removeprefix("resume with: "))
    assert argv == ["abricot-local", *base, "--out", str(tmp_path / folder), "--tasks", "discotex", "--resume"]
    assert shlex.quote(str(tmp_path / folder)) in line  # absolute, the tasks it resolved named
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    r = invoke(*argv[1:])
    assert r.exit_code == 0, r.output
    assert (tmp_path / folder / "results.json").is_file() and not (tmp_path / "pwned").exists()


def test_the_apis_resume_hint_is_a_python_literal(tmp_path, monkeypatch, discotex_dir):
    import abricot_local as al
    from abricot_local.run.session import Interrupted

    folder = str(tmp_path / "it's $(touch x) \"run\"")
    fail_after(monkeypatch, 2, KeyboardInterrupt)
    with pytest.raises(Interrupted) as err:
        al.evaluate("fake", "discotex", backend="fake", data_dir=str(discotex_dir), sample=5, out=folder,
                    progress=False)
    hint = err.value.message.split("resume with: ")[1].strip()
    call = ast.parse(hint.replace("...", "model"), mode="eval").body
    assert {k.arg: ast.literal_eval(k.value) for k in call.keywords} == {"out": folder, "resume": True}


# -- issue 38 item 9, issue 39 item 5: a run inside a run -----------------------------------------
def test_a_run_inside_another_run_is_refused_naming_it(tmp_path, base):
    outer = tmp_path / "gemma"
    assert invoke(*base, "--out", outer).exit_code == 0
    r = invoke(*base, "--out", outer / "s40")
    refused(r, "inside the run folder", str(outer))
    assert sorted(os.listdir(outer)) == ["results.json", "samples-discotex.jsonl"]


def test_a_folder_holding_a_run_is_refused_naming_that_run(tmp_path, base):
    parent = tmp_path / "gemma"
    assert invoke(*base, "--out", parent / "s40").exit_code == 0
    r = invoke(*base, "--out", parent)
    refused(r, "not a run folder", "s40/ (a run)")


def test_runs_and_report_list_a_nested_run(tmp_path, base):
    outer = tmp_path / "gemma"
    assert invoke(*base, "--out", outer).exit_code == 0
    assert invoke(*base, "--out", tmp_path / "inner", "--limit", "6").exit_code == 0
    os.rename(tmp_path / "inner", outer / "s6")  # as an earlier version let `run --out` make it
    listed = invoke("runs", tmp_path)
    assert listed.exit_code == 0
    assert str(outer) in listed.output and str(outer / "s6") in listed.output, listed.output
    report = invoke("report", tmp_path, "--format", "json")
    assert report.exit_code == 0, report.output
    folders = {r["folder"] for r in json.loads(report.output)["runs"]}
    assert folders == {str(outer), str(outer / "s6")}


# -- issue 39 item 8: a resume's plan line --------------------------------------------------------
def test_a_resumes_plan_line_counts_the_items_left(tmp_path, base, interrupted):
    r = invoke(*base, "--out", interrupted, "--resume")
    assert r.exit_code == 0, r.output
    plan = [ln for ln in r.output.splitlines() if ln.startswith("plan: ") and "discotex" in ln]
    assert plan and "6 items left (4 saved)" in plan[0], r.output


def test_a_signal_after_the_run_is_written_says_it_is_complete(tmp_path, monkeypatch, base):
    from abricot_local.backends.fake import FakeBackend

    out = tmp_path / "o"
    real = FakeBackend.close

    def close(self):
        real(self)
        if (out / "results.json").exists():
            raise KeyboardInterrupt  # Ctrl-C while the model is closed, after results.json
    monkeypatch.setattr(FakeBackend, "close", close)
    r = invoke(*base, "--out", out)
    assert r.exit_code == 0  # the run complete: nothing lost (a scheduler's job not failed)
    assert f"the run in {out} is complete" in " ".join(r.output.split()) and "resume with" not in r.output
    assert sorted(os.listdir(out)) == ["results.json", "samples-discotex.jsonl"]


@pytest.mark.real
def test_a_real_gguf_named_dot_dot_gguf_writes_inside_results(tmp_path, monkeypatch, gemma_path, discotex_dir):
    """llama.cpp's label of a file `...gguf` is `..`: the run still lands in results/<safe>/<time>/."""
    model = tmp_path / "...gguf"
    model.symlink_to(gemma_path)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    r = invoke("run", model, "--tasks", "discotex", "--data-dir", discotex_dir, "--limit", "2", "--threads", "2")
    assert r.exit_code == 0, r.output
    (run,) = [p.parent for p in tmp_path.rglob("results.json")]
    assert run.parent == tmp_path / "work" / "results" / "model", run
    assert json.loads((run / "results.json").read_text())["model"]["name"] == ".."


def _pasted(command: str) -> list[str]:
    """The words a POSIX shell reads in ``command``, pasted (a backslash-newline continues the line)."""
    return shlex.split(command.replace("\\\n", ""))


def test_the_dry_runs_command_line_is_shell_quoted(monkeypatch, base):
    args = [*base, "--out", "runs/my run", "--dry-run"]
    monkeypatch.setattr("sys.argv", ["abricot-local", *args])
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    command = r.output.split("plan of: ", 1)[1].split("\n(a dry run", 1)[0]  # folded at 120 columns
    assert _pasted(command) == ["abricot-local", *args]


def test_a_long_command_line_is_folded_between_arguments_only(monkeypatch, base, tmp_path):
    """Folded at 120 columns at any space, a quoted argument was cut in two (`'runs/my\\n  run'`): the line
    a user pasted ran something else. Now it is folded between arguments, each line continued with a
    backslash, and bash reads back the very words given."""
    import subprocess

    args = [*base, "--out", str(tmp_path / "a folder with spaces" / ("my run " * 12).strip()), "--dry-run"]
    monkeypatch.setattr("sys.argv", ["abricot-local", *args])
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    command = r.output.split("plan of: ", 1)[1].split("\n(a dry run", 1)[0]
    lines = command.split("\n")
    assert len(lines) > 1 and all(ln.endswith(" \\") for ln in lines[:-1]), command
    assert all("my run" in ln for ln in lines if len(ln) > 120 - len("plan of: ")), command  # only the long one
    shell = subprocess.run(["bash", "-c", "f() { printf '%s\\0' \"$@\"; }; f " + command], capture_output=True,
                           text=True, timeout=30)
    assert shell.stdout.split("\0")[:-1] == ["abricot-local", *args], shell


@pytest.fixture(scope="module", autouse=True)
def at_once(tmp_path_factory, discotex_dir):
    """Three `run`s of ``base`` into one new folder, each its own process, started together as the module starts
    (conftest.Early: they run beside the module's in-process tests); their test reads them."""
    import sys

    root = tmp_path_factory.mktemp("at-once")
    args = ["run", "fake", "--backend", "fake", "--data-dir", str(discotex_dir), "--limit", "10"]  # base's
    env = {**os.environ, **isolated_env(root)}
    procs = [Early([sys.executable, "-m", "abricot_local", *args, "--out", str(root / "o")], timeout=120, cwd=root,
                   env=env) for _ in range(3)]
    for p in procs:
        p.start()
    yield root / "o", procs
    for p in procs:
        p.close()


def test_runs_started_at_once_into_one_new_folder_leave_one_run(at_once):
    """Whatever the interleaving, one run writes the folder and the others are refused in one line
    (in use, or already finished): a run starting there is never taken for files of the user's."""
    out, procs = at_once
    done = [(r.returncode, r.stderr) for r in (p.result() for p in procs)]
    assert sorted(rc for rc, _ in done) == [0, 2, 2], done
    for rc, err in done:
        assert "Traceback" not in err and "not a run folder" not in err, err
    assert sorted(os.listdir(out)) == ["results.json", "samples-discotex.jsonl"]
