"""compare's "settings that differ" (issue 39 item 8): one row per setting, the two runs' values side
by side within 120 columns, even for two SHA-256s; a long value keeps the part where it differs."""

from __future__ import annotations

import pandas as pd

from abricot_local.report.comparison import _value, side_by_side


def test_two_sha256s_stay_side_by_side_one_row_per_setting():
    a, b = "3c" * 32, "9f" * 32
    rows = pd.DataFrame([("model_sha256", a, b), ("n_batch", "512", "64"), ("engine", "prefix", "batched")],
                        columns=["setting", "a", "b"])
    text = side_by_side(rows)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120 and lines[0].split() == ["setting", "a", "b"]
    first = next(k for k, ln in enumerate(lines) if ln.startswith("model_sha256"))
    # both values on the setting's own rows, left and right: the a column's text, then the b column's
    import re

    (k0, k1), (a0, a1), (b0, _) = [m.span() for m in re.finditer("-+", lines[1])]  # the columns, from the rule
    left = "".join(ln[a0:a1].strip() for ln in lines[first:first + 2])
    right = "".join(ln[b0:].strip() for ln in lines[first:first + 2])
    assert (left, right) == (a, b)
    assert [ln.split()[:3] for ln in lines if ln.startswith(("n_batch", "engine"))] == [["n_batch", "512", "64"],
                                                                                      ["engine", "prefix", "batched"]]


def test_a_long_value_keeps_where_it_differs():
    common = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
    a, b = common + "LLAMAFILE = 1 | OPENMP = 1 |", common + "AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 |"
    assert "AVX512 = 1" in _value(b, a) and "LLAMAFILE = 1" in _value(a, b)
    assert _value(a, b).startswith("...") and _value("short", "other") == "short"


def test_a_long_setting_name_breaks_after_a_dot_never_inside_a_word():
    """A recorded setting's dotted name longer than the setting column (a llama.cpp buffer's) folds after a
    ``.``: read back whole, each line a run of whole parts (the 40-column cut once left ``CPU_Ma`` / ``pped``)."""
    name = "provenance.schedule.model_buffers.CPU_Mapped"
    rows = pd.DataFrame([(name, "235.16", "92.1"), ("quant", "Q4_K_M", "Q4_1")], columns=["setting", "a", "b"])
    lines = side_by_side(rows).splitlines()
    width = len(lines[1].split()[0])  # the setting column, from the rule
    assert width < len(name)
    first = next(k for k, ln in enumerate(lines) if ln.startswith("provenance."))
    parts = [ln[:width].strip() for ln in lines[first:first + 2]]
    assert parts == ["provenance.schedule.model_buffers.", "CPU_Mapped"]
    assert lines[first][width:].split() == ["235.16", "92.1"]


def test_an_option_as_given_is_compared_as_each_task_resolved_it(finished_run, discotex_dir):
    """A run-wide option left to each task's default records null; the same value given records it: both
    scored the same prompts, and each task records what it resolved, so no setting differs. Another variant
    differs on the task that resolved it, not on the run-wide line."""
    from abricot_local.analysis.differing import differing_settings
    from abricot_local.analysis.loading import load_run

    base = ("run", "x", "--backend", "fake", "--n-ctx", "8192", "--data-dir", str(discotex_dir), "--tasks",
            "discotex", "--sample", "6")
    default, card, ita = (load_run(finished_run(*base, *more)) for more in
                          ((), ("--prompt-variant", "card"), ("--prompt-variant", "ita-bench")))
    assert default.record.config_dict()["prompt_variant"] is None and card.record.config_dict()["prompt_variant"]
    assert differing_settings(default, card) == ()
    keys = {d.key: (d.value_a, d.value_b) for d in differing_settings(default, ita)}
    assert keys.get("discotex.config.prompt_variant") == ("card", "ita-bench") and "prompt_variant" not in keys
