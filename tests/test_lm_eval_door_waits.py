"""lm-eval's calls into abricot-local are a library's door, as the Python API's (senior review 67, finding 5): each
runs inside backends.waiting(), so a signal llama.cpp does not return from is waited for and a first Ctrl-C never
ends a notebook's kernel; `abricot-local lm-eval` (run_cli, the command line) keeps the command line's rule."""

from __future__ import annotations

import pytest

from abricot_local.backends import fake as fake_backend
from abricot_local.backends.llama_cpp import interrupts
from abricot_local.backends.options import ScoringOptions
from conftest import require_lm_eval


class _Req:
    def __init__(self, *args):
        self.args = args


@pytest.fixture()
def lm(monkeypatch):
    require_lm_eval()
    from abricot_local.lm_eval import model, requests

    waits: list[int] = []

    def opened(_args):
        waits.append(interrupts._state["waits"])
        return requests.OpenedModel(Spy(), {}, "fake")

    class Spy(fake_backend.FakeBackend):
        def __init__(self):
            super().__init__("fake", ScoringOptions())

        def score(self, *a, **k):
            waits.append(interrupts._state["waits"])
            return super().score(*a, **k)

        def score_many(self, *a, **k):
            waits.append(interrupts._state["waits"])
            return super().score_many(*a, **k)

        def generate(self, *a, **k):
            waits.append(interrupts._state["waits"])
            return super().generate(*a, **k)

        def score_tokens(self, *a, **k):
            waits.append(interrupts._state["waits"])
            return super().score_tokens(*a, **k)

        def close(self):
            waits.append(interrupts._state["waits"])
            super().close()

    monkeypatch.setattr(requests, "open_model", opened)
    return model, waits


def test_each_lm_eval_call_waits_as_the_api_does(lm):
    model, waits = lm
    assert interrupts._state["waits"] == 0
    m = model.AbricotLM(model="fake")
    assert waits == [1]
    m.loglikelihood([_Req("Il gatto", " dorme")], disable_tqdm=True)
    m.loglikelihood_rolling([_Req("il gatto dorme")], disable_tqdm=True)
    m.generate_until([_Req("abc", {"until": ["\n"], "max_gen_toks": 2})], disable_tqdm=True)
    m.close()
    assert len(waits) >= 5 and set(waits) == {1}, waits  # every backend call inside waiting(), once
    assert interrupts._state["waits"] == 0  # left as it ends


def test_the_command_line_door_does_not_wait(lm, monkeypatch):
    model, waits = lm
    monkeypatch.setitem(model._door, "waits", False)  # as run_cli sets it while lm-eval runs
    model.AbricotLM(model="fake").close()
    assert waits == [0, 0]


def test_abricot_local_lm_eval_runs_lm_eval_as_a_command_line(lm, monkeypatch):
    model, _waits = lm
    import lm_eval._cli as cli

    during = []

    class Harness:  # lm-eval's CLI, played: it records the door's rule while it runs
        def parse_args(self):
            return type("Parsed", (), {"model_args": None})()

        def execute(self, _parsed):
            during.append(model._door["waits"])

    monkeypatch.setattr(cli, "HarnessCLI", Harness)
    model.run_cli("fake", ["--tasks", "x"])
    assert during == [False] and model._door["waits"] is True  # the command line's rule, then the library's again
