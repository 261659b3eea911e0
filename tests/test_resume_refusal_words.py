"""A refused resume in its door's words (record/io.py resume_refusal): Python's `sample`, `tasks`, the command
line's `--sample`, `--tasks`; a task's data and version labelled; a larger sample, which grows a run, not listed
as a difference (fake backend, the invented ABRICOT fixture)."""

import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local import record as rec
from abricot_local.cli import cli
from abricot_local.errors import ResultsError, recorded_words, render
from abricot_local.record.io import resume_refusal
from conftest import FIXTURE

FAKE = ("--backend", "fake", "--n-ctx", 8192, "--data", f"abricot={FIXTURE}")
API = {"backend": "fake", "n_ctx": 8192, "data": {"abricot": str(FIXTURE)}, "progress": False}


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def sample5(finished_run, tmp_path):
    """A finished `--sample 5 --tasks abricot` run (both ABRICOT tasks), made on the command line once for the session
    (conftest.finished_run): this test's copy."""
    return finished_run("run", "fake", *FAKE, "--tasks", "abricot", "--sample", 5, into=tmp_path / "s5")


def test_the_command_line_names_flags_and_not_the_larger_sample(sample5):
    before = {p.name: p.read_bytes() for p in sample5.iterdir() if p.is_file()}
    r = invoke("run", "fake", *FAKE, "--tasks", "abricot_inc", "--protocol", "calamita", "--sample", 8,
               "--out", sample5, "--resume")
    assert r.exit_code == 2, r.output
    text = " ".join(r.stderr.split())  # unfolded
    assert (f"cannot resume {sample5}: its config differs from the recorded run (--tasks: recorded "
            "abricot_abs,abricot_inc, given abricot_inc@calamita; --protocol: recorded none, given calamita); "
            "the same options are needed "
            "(changing only --sample 5 to --sample 8 would have grown it)") in text, text
    assert "--sample: recorded" not in text  # a larger sample is no difference
    assert "abricot_abs: recorded" not in text and "sha256" not in text  # tasks run on one side: named by --tasks
    assert {p.name: p.read_bytes() for p in sample5.iterdir() if p.is_file()} == before  # nothing written


def test_python_names_keywords(sample5):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ResultsError) as err:
            al.evaluate("fake", "abricot_inc", protocol="calamita", sample=8, out=sample5, resume=True, **API)
    text = str(err.value)
    assert "(tasks: recorded abricot_abs,abricot_inc, given abricot_inc@calamita; protocol: recorded none, " \
           "given calamita)" in text, text
    assert text.endswith("(changing only sample=5 to sample=8 would have grown it)"), text
    assert "--" not in text  # no flag of the command line


def test_other_differences_beside_a_larger_sample_are_named(sample5):
    """A larger sample and another seed: the seed is what refuses it, in each door's words."""
    r = invoke("run", "fake", *FAKE, "--tasks", "abricot", "--sample", 8, "--seed", 7, "--out", sample5, "--resume")
    text = " ".join(r.stderr.split())
    assert r.exit_code == 2 and "its config differs from the recorded run (--seed: recorded 1234, given 7)" in text
    assert "(changing only --sample 5 to --sample 8 would have grown it)" in text, text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ResultsError, match=r"\(seed: recorded 1234, given 7\).*changing only sample=5 to "
                                               r"sample=8 would have grown it"):
            al.evaluate("fake", "abricot", sample=8, seed=7, out=sample5, resume=True, **API)
    # the same run grown: no refusal (and a smaller sample with another seed lists the sample, a difference)
    m = rec.read_run(sample5).manifest
    assert resume_refusal("OUT", m, replace(m, config=replace(m.config, sample=8))) is None
    smaller = replace(m, config=replace(m.config, sample=3, seed=7))
    text = str(ResultsError(resume_refusal("OUT", m, smaller)))
    assert "sample: recorded 5, given 3" in text and "seed: recorded 1234, given 7" in text
    assert "would have grown" not in text


def test_a_tasks_data_and_version_are_labelled(sample5):
    m = rec.read_run(sample5).manifest
    sha, version = m.data_sha256["abricot_abs"][0], m.task_versions["abricot_abs"]
    other = replace(m, data_sha256={**m.data_sha256, "abricot_abs": ("cd" * 32,)},
                    task_versions={**m.task_versions, "abricot_abs": version + "9"})
    text = str(ResultsError(resume_refusal("OUT", m, other)))
    assert text.startswith("cannot resume OUT: its data and task versions differ from the recorded run (")
    assert f"data sha256 of abricot_abs: recorded {sha[:12]}..., given cdcdcdcdcdcd..." in text, text
    assert f"task version of abricot_abs: recorded {version}, given {version}9" in text, text
    assert "abricot_inc" not in text  # only what differs
    # in the record's words (errors.recorded_words): the command line's flags
    worded = render(rec.resume_refusal("OUT", m, replace(m, config=replace(m.config, sample=3, seed=7))), recorded_words)
    assert "(--sample: recorded 5, given 3; --seed: recorded 1234, given 7)" in worded, worded
