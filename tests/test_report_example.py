"""docs/report-example.md's script (`python make_example.py runs`) runs against today's API: its
Python block executed as printed, each run cut to a few items by the test (the page's own runs
score every item; its tables are pasted from them)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import abricot_local
from abricot_local.run import execute

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "report-example.md"


def script() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) == 1, "the page holds one Python block: make_example.py"
    return blocks[0]


@pytest.mark.filterwarnings("ignore:caution. limit=3")  # the test's cut, not the page's
def test_the_pages_script_runs(tmp_path, monkeypatch, discotex_dir):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "discotex").symlink_to(discotex_dir)  # where the page's user keeps it
    (tmp_path / "tests" / "data").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "abricot_invented_fixture.csv").symlink_to(
        ROOT / "tests" / "data" / "abricot_invented_fixture.csv")
    evaluate, opened = abricot_local.evaluate, execute.open_backend
    monkeypatch.setattr(abricot_local, "evaluate", lambda *a, **k: evaluate(*a, limit=3, **k))
    monkeypatch.setattr(sys, "argv", ["make_example.py", "runs"])
    exec(compile(script(), "make_example.py", "exec"), {"__name__": "__main__"})

    assert execute.open_backend is opened, "the script puts the backend opener back"
    runs = tmp_path / "runs"
    q8, q4 = (json.loads((runs / f"llama-3.1-8b-{q}" / "results.json").read_text()) for q in ("q8", "q4"))
    assert set(q8["tasks"]) == set(q4["tasks"]) >= {"discotex", "abricot_abs", "abricot_inc"}
    assert q8["provenance"]["synthetic"] and q4["provenance"]["synthetic"]

    def logprobs(q):
        lines = (runs / f"llama-3.1-8b-{q}" / "samples-discotex.jsonl").read_text().splitlines()
        return [json.loads(line)["logprobs"] for line in lines]

    a, b = logprobs("q8"), logprobs("q4")
    assert len(a) == len(b) == 3 and a != b, "the Q4 run is the noisy fake, the Q8 the plain one"
