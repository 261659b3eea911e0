"""What `--resume --margin M` does not judge again: a run --until-settled (its looks were read at its margin), samples
changed by hand (they no longer give the recorded metrics), a run with no published row; and merge asks shards without
a published row for no common margin. Fake backend, in-process."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.cli import cli

FAKE = ("--backend", "fake", "--n-ctx", "8192", "--tasks", "abricot_abs")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def run(model, models, data, out, *more):
    return invoke("run", model, "--models", models, "--data", f"abricot={data}", *FAKE, *more, "--out", out)


def test_what_resume_with_another_margin_does_not_judge_again(tmp_path, claims, abricot_file):
    settled = tmp_path / "settled"
    assert run("fake-as-llama", claims, abricot_file, settled, "--until-settled", "--max-items", 40).exit_code == 0
    before = (settled / "results.json").read_bytes()
    r = run("fake-as-llama", claims, abricot_file, settled, "--until-settled", "--max-items", 40, "--resume",
            "--margin", 0.3)
    assert r.exit_code == 2 and "its looks were read at the margin it ran with" in r.output, r.output
    assert (settled / "results.json").read_bytes() == before

    edited = tmp_path / "edited"
    assert run("fake-as-llama", claims, abricot_file, edited, "--sample", 30).exit_code == 0
    before = (edited / "results.json").read_bytes()
    lines = (edited / "samples-abricot_abs.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["logprobs"] = first["logprobs"][::-1]  # another answer, the line still well formed
    first["pred"] = len(first["logprobs"]) - 1 - first["pred"]
    (edited / "samples-abricot_abs.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    r = run("fake-as-llama", claims, abricot_file, edited, "--sample", 30, "--resume", "--margin", 0.3)
    assert r.exit_code != 0 and "no longer give its recorded" in r.output, r.output
    assert (edited / "results.json").read_bytes() == before

    plain = tmp_path / "plain"  # no registry entry: no published row, no verdict
    assert run("fake", claims, abricot_file, plain, "--sample", 30).exit_code == 0
    before = (plain / "results.json").read_bytes()
    r = run("fake", claims, abricot_file, plain, "--sample", 30, "--resume", "--margin", 0.3)
    assert r.exit_code == 0 and "judged again" not in r.output and (plain / "results.json").read_bytes() == before

    for k, more in ((1, ("--margin", 0.1)), (2, ())):  # shards with no published row merge whatever their margin
        assert run("fake", claims, abricot_file, tmp_path / f"s{k}", "--sample", 30, "--shard", f"{k}/2",
                   *more).exit_code == 0
    r = invoke("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m")
    assert r.exit_code == 0, r.output


def test_a_sweep_resumed_with_another_margin_judges_each_finished_run_again(tmp_path, claims, abricot_file):
    with claims.open("a", encoding="utf-8") as fh:
        fh.write('[fake-as-llama-too]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b"\n')
    sweep = ("run", "fake-as-llama", "fake-as-llama-too", "--models", claims, "--data", f"abricot={abricot_file}",
             *FAKE, "--sample", 30, "--out", tmp_path / "sweep")
    assert invoke(*sweep).exit_code == 0
    r = invoke(*sweep, "--resume", "--margin", 1.5)
    assert r.exit_code == 0 and r.output.count("judged again at --margin 1.5") == 2, r.output
    for model in ("fake-as-llama", "fake-as-llama-too"):
        assert json.loads((tmp_path / "sweep" / model / "results.json").read_text())["published"]["margin"] == 1.5
    r = invoke(*sweep, "--resume")  # no --margin: each finished run left as it is
    assert r.exit_code == 0 and r.output.count("holds this run, complete: nothing to score") == 2, r.output
