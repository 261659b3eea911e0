"""`run --dry-run --resume` says what the `--resume` then does: a run of other options in --out is the resume's own
refusal (run.resume.refusal), a folder that does not exist the resume's "nothing to resume", an existing folder that
holds nothing of a run (empty, or the lock of a shard killed before it showed its state) a run that starts there (the
resume starts it too, where it refused it); a --until-settled grow counts the items the resume keeps; the plan lines a
real --resume prints (dry_run.of_run) count saved lines by the dry run's rule. `runs` lists a lock-only folder as
stopped. Fake backend, real DISCOTEX data, in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from conftest import fail_after

SAMPLES = "samples-discotex.jsonl"


@pytest.fixture
def base(discotex_dir):
    return ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(discotex_dir),
            "--n-ctx", "4096"]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def dry(base, out: Path, *more):
    """The dry run of a --resume: its result, and its one task's items to score and items saved (its row's items,
    "k saved in --out, left out"); None when it failed."""
    r = invoke(*base, *more, "--out", out, "--resume", "--dry-run")
    return r, counted(r.stdout) if r.exit_code == 0 else None


def counted(text: str) -> dict:
    (items,) = re.findall(r"^fake\S*\s+\w+\s+(\d+)\s", text, re.MULTILINE)
    saved = re.findall(r"(\d+) saved in --out, left out", text)
    return {"items": int(items), "saved": int(saved[0]) if saved else 0}


def scored_now(out: Path, task: str = "discotex") -> int:
    return json.loads((out / "results.json").read_text())["tasks"][task]["scored_now"]


def error_of(r) -> str:
    return next(line for line in r.output.splitlines() if line.startswith("error:"))


@pytest.mark.parametrize("other", [["--shard", "1/3"], ["--seed", "9"], ["--shots", "2"]],
                         ids=["shard", "seed", "shots"])
def test_the_dry_run_says_the_resumes_refusal_of_other_options(tmp_path, base, other):
    out = tmp_path / "o"
    assert invoke(*base, "--sample", 6, "--out", out).exit_code == 0
    r, _ = dry(base, out, "--sample", 8, *other)
    real = invoke(*base, "--sample", 8, *other, "--out", out, "--resume")
    assert real.exit_code == r.exit_code == 2
    assert "cannot resume" in error_of(real) and error_of(r) == error_of(real)
    r, task = dry(base, out, "--sample", 8)  # the sample alone grows it: no refusal, 6 kept
    assert (task["items"], task["saved"]) == (2, 6)
    assert invoke(*base, "--sample", 8, "--out", out, "--resume").exit_code == 0 and scored_now(out) == 2


def test_a_folder_that_does_not_exist_is_nothing_to_resume_in_both(tmp_path, base):
    out = tmp_path / "typo"
    r, _ = dry(base, out, "--sample", 3)
    real = invoke(*base, "--sample", 3, "--out", out, "--resume")
    assert real.exit_code == r.exit_code == 2 and error_of(r) == error_of(real)
    assert "does not exist" in error_of(r) and "without --resume" in error_of(r) and not out.exists()
    assert "check the folder given as --out, or start the run there" in " ".join(r.output.split())


@pytest.mark.parametrize("left", ["nothing", "lock"])
def test_a_folder_holding_nothing_of_a_run_is_resumed_from_its_first_item(tmp_path, base, left):
    """A shard killed (kill -9) before it wrote RUNNING leaves its folder empty or with its .lock alone: the Slurm
    recipe's --resume on requeue starts the run there; the dry run says so and plans every item."""
    out = tmp_path / "gk"
    out.mkdir()
    if left == "lock":
        (out / ".lock").write_text("999999")
        listed = invoke("runs", out)
        assert listed.exit_code == 0 and "stopped, 0 items" in listed.output and "--resume" in listed.output
    r, task = dry(base, out, "--sample", 3)
    said = f"nothing saved in {out}: the run starts there"
    assert r.exit_code == 0 and said in r.stderr and (task["items"], task["saved"]) == (3, 0)
    real = invoke(*base, "--sample", 3, "--out", out, "--resume")
    assert real.exit_code == 0, real.output
    assert said in real.stderr and scored_now(out) == task["items"]


def test_the_plan_lines_of_a_real_resume_count_what_it_keeps(tmp_path, monkeypatch, base):
    """A saved line its item does not give (an edited gold) is scored again: the dry run and the resume's own first
    lines (dry_run.of_run) both say it is not saved, and the resume scores it."""
    out = tmp_path / "o"
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        assert invoke(*base, "--limit", 6, "--out", out).exit_code == 130
    path = out / ".checkpoint" / SAMPLES
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    row = json.loads(lines[1])
    row["gold"] = (row["gold"] + 1) % len(row["choices"])
    lines[1] = json.dumps(row, ensure_ascii=False) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    _, task = dry(base, out, "--limit", 6)
    real = invoke(*base, "--limit", 6, "--out", out, "--resume")
    assert real.exit_code == 0, real.output
    (said,) = re.findall(r"plan: fake discotex: (\d+) items left \((\d+) saved\)", real.stderr)
    assert (task["items"], task["saved"]) == tuple(map(int, said)) == (3, 3) and scored_now(out) == 3


def settle(out, claims, abricot_file, *more):
    return invoke("run", "fake-as-llama", "--models", claims, "--tasks", "abricot_abs", "--data",
                  f"abricot={abricot_file}", "--backend", "fake", "--n-ctx", "4096", "--margin", "0.3",
                  "--until-settled", "--looks", "5,10", *more, "--out", out)


def test_an_until_settled_grow_is_counted_as_the_resume_keeps_it(tmp_path, claims, abricot_file):
    out = tmp_path / "o"
    assert settle(out, claims, abricot_file, "--max-items", 15).exit_code == 0
    held = json.loads((out / "results.json").read_text())["tasks"]["abricot_abs"]["n"]
    r = settle(out, claims, abricot_file, "--max-items", 30, "--resume", "--dry-run")
    assert r.exit_code == 0, r.output
    task = counted(r.stdout)
    assert (task["items"], task["saved"]) == (30 - held, held)
    real = settle(out, claims, abricot_file, "--max-items", 30, "--resume")
    assert real.exit_code == 0, real.output
    assert f"at most {30 - held} items left ({held} saved)" in real.stderr
    assert scored_now(out, "abricot_abs") <= task["items"]
