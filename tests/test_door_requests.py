"""Each door builds the same request (run/request.py's RunRequest) and the run schedules each item once
(issue 44, items 2 and 6): the command line's flags, the API's typed keywords and lm-eval's model_args
become equal requests, and through `run` and `evaluate` alike the backend makes one schedule per item."""

from __future__ import annotations

import collections
import dataclasses

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.backends.fake import FakeBackend
from abricot_local.cli import cli
from abricot_local.run import session
from conftest import FIXTURE

ITEMS = 5


@pytest.fixture
def seen(monkeypatch):
    """Every request a run is given (session.run), and the schedules the fake backend makes (by request text)."""
    got = {"requests": [], "schedules": collections.Counter()}
    run, make = session.run, FakeBackend.make_schedule

    def recording_run(request, hooks):
        got["requests"].append(request)
        return run(request, hooks)

    def counting(self, request):
        got["schedules"][request] += 1
        return make(self, request)

    monkeypatch.setattr(session, "run", recording_run)
    monkeypatch.setattr(FakeBackend, "make_schedule", counting)
    return got


def unplaced(request):
    return dataclasses.replace(request, stamp="", out=None)  # the time that names a default folder, the folder


def test_the_command_line_and_the_api_build_one_request_and_schedule_each_item_once(seen, tmp_path):
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data",
                                 f"abricot={FIXTURE}", "--n-ctx", "8192", "--shots", "1", "--seed", "7",
                                 "--sample", str(ITEMS), "--out", str(tmp_path / "cli")])
    assert r.exit_code == 0, r.output
    by_cli = dict(seen["schedules"])
    seen["schedules"].clear()
    al.evaluate("fake", "abricot_abs", backend="fake", data={"abricot": str(FIXTURE)}, n_ctx=8192, shots=1, seed=7,
                sample=ITEMS, out=tmp_path / "api", progress=False)
    by_api = dict(seen["schedules"])
    cli_request, api_request = seen["requests"]
    assert unplaced(cli_request) == unplaced(api_request)
    options = cli_request.given.checked()
    assert (options.n_ctx, options.seed, cli_request.task_options.shots, cli_request.sample) == (8192, 7, 1, ITEMS)
    for schedules in (by_cli, by_api):
        assert len(schedules) == ITEMS and set(schedules.values()) == {1}  # one schedule an item, each door
    assert by_cli.keys() == by_api.keys()  # the same items' requests


def test_lm_evals_model_args_build_the_command_lines_backend_request(seen, tmp_path):
    from abricot_local.lm_eval.requests import request_of

    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "abricot_abs", "--data",
                                 f"abricot={FIXTURE}", "--n-ctx", "8192", "--n-batch", "64", "--limit", "1",
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    (cli_request,) = seen["requests"]
    from_lm_eval = request_of({"model": "fake", "backend": "fake", "n_ctx": 8192, "n_batch": "64"})  # its text
    assert from_lm_eval.models == cli_request.models
    assert from_lm_eval.given.checked() == cli_request.given.checked()  # each value parsed by its field
    assert from_lm_eval.given.checked().n_batch == 64
