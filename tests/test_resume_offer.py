"""A folder a run without --resume cannot take offers --resume only where the same command with it would be
accepted (the resume's own rule, resume.refusal): a finished run of other options is "choose another --out" with
why --resume would not take it, never "(or --resume to reuse it)" that the resume then refuses; the same run (or one
a larger --sample grows) is still offered --resume. The run and its dry run say it alike. Fake backend, a few invented
DISCOTEX items, in-process."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

FAKE = ("run", "fake-model", "--backend", "fake", "--tasks", "discotex", "--n-ctx", "4096")


def invoke(*args, code: int = 0):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == code, r.output
    return r


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume_offer")
    data = write_discotex(tmp / "discotex", per_source=4)
    invoke(*FAKE, "--data-dir", data, "--sample", 4, "--out", tmp / "out")
    return tmp / "out", data


@pytest.mark.parametrize("dry", [(), ("--dry-run",)])
def test_a_finished_run_of_other_options_is_not_offered_resume(done, dry):
    out, data = done
    r = invoke(*FAKE, "--data-dir", data, "--sample", 4, "--seed", 7, "--out", out, *dry, code=2)
    assert "choose another --out" in r.output and "or --resume to reuse it" not in r.output, r.output
    assert "--resume would not take it: its config differs from the recorded run (--seed: recorded 1234, given 7)" \
        in r.output
    refused = invoke(*FAKE, "--data-dir", data, "--sample", 4, "--seed", 7, "--out", out, "--resume", code=2)
    assert "cannot resume" in refused.output  # what the advice no longer offers is what the resume refuses
    shrink = invoke(*FAKE, "--data-dir", data, "--sample", 3, "--out", out, *dry, code=2)
    assert "or --resume to reuse it" not in shrink.output and "does not shrink" in shrink.output, shrink.output


@pytest.mark.parametrize("sample", [4, 6])
def test_the_same_run_or_one_it_grows_is_still_offered_resume(done, sample):
    out, data = done
    r = invoke(*FAKE, "--data-dir", data, "--sample", sample, "--out", out, code=2)
    assert "choose another --out (or --resume to reuse it)" in r.output, r.output
