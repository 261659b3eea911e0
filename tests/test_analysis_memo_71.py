"""What the analysis side keeps from one question to the next, and the work it no longer does, without changing a
number: the exact paired interval asks only the differences outside its bounds (a tail bounded below its line by
the largest term left unsummed), its sums taken with the masks as 1.0 and 0.0; a finished run's samples file read
again with the same bytes is not parsed again (record/samples.py), a changed one is; JSON's nesting counted only
where the text could nest too deep; a list of plain values read at once (record/codec.py); the scored texts' keys
and Tango's interval memoized (analysis/items.py, analysis/stats.py)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from abricot_local import jsonfiles
from abricot_local.analysis import items, paired_exact, stats
from abricot_local.analysis.paired_exact import exact_paired_set_ci, restricted_paired_set_ci
from abricot_local.errors import ResultsError
from abricot_local.record import samples
from abricot_local.record.codec import Invalid, reader
from abricot_local.record.samples import Sample, read_samples


def _exact_in_full(b: int, c: int, n: int, total: int, level: float) -> tuple[float, float]:
    """The exact interval as it was built: every D summed, each tail a product with the boolean mask."""
    tail = (1.0 - level) / 2.0
    grid_b, grid_c = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
    inside = grid_b + grid_c <= n
    ob, oc = grid_b[inside], grid_c[inside]
    seen = int(np.flatnonzero((ob == b) & (oc == c))[0])
    counts = np.arange(total + 1)
    log_comb = paired_exact._log_comb
    log_b, log_c = log_comb(counts, ob), log_comb(counts, oc)
    log_r = log_comb(counts, n - ob - oc) - log_comb(np.array([total]), np.array([n]))[0, 0]
    held = []
    for d in range(-total, total + 1):
        first, last = max(0, d), (total + d) // 2
        if last < first:
            continue
        z = paired_exact._tango_z(ob, oc, n, d / total)
        r_first, r_last = total - 2 * first + d, total - 2 * last + d
        p = np.exp(log_b[first:last + 1] + log_c[first - d:last - d + 1]
                   + log_r[r_first:r_last - 1 if r_last else None:-2])
        if (p @ (z >= z[seen])).max() > tail and (p @ (z <= z[seen])).max() > tail:
            held.append(d)
    return (min(held) / total, max(held) / total)


def test_the_exact_interval_is_the_one_summing_every_difference_gives():
    cells = [(b, c, 3, 7, level) for b in range(4) for c in range(4 - b) for level in (0.8, 0.9, 0.99375)]
    cells += [(b, c, 6, 16, 0.9) for b in range(7) for c in range(7 - b)]
    cells += [(0, 0, 24, 25, 0.9), (12, 12, 24, 25, 0.9), (24, 0, 24, 25, 0.95), (3, 5, 24, 25, 0.8),
              (0, 12, 12, 31, 0.9), (5, 1, 12, 31, 0.99375), (2, 2, 12, 31, 0.9)]
    for cell in cells:
        assert exact_paired_set_ci(*cell) == _exact_in_full(*cell)


def test_the_exact_interval_asks_no_difference_between_its_bounds(monkeypatch):
    asked = []
    tango_z = paired_exact._tango_z
    monkeypatch.setattr(paired_exact, "_tango_z", lambda ob, oc, n, delta: asked.append(delta) or
                        tango_z(ob, oc, n, delta))
    lo, hi = exact_paired_set_ci(12, 3, 30, 40, 0.95)
    assert (lo, hi) == (0.15, 0.4)  # pinned: the interval as it was
    assert asked and not [d for d in asked if lo < d < hi]


@pytest.mark.parametrize("cell, pinned", [
    ((3, 1, 40, 127, 0.9), (-0.031496062992125984, 0.13385826771653545)),
    ((0, 9, 30, 40, 0.9), (-0.375, -0.225)),
    ((2, 1, 40, 1600, 0.9), (-0.065, 0.12125)),
    ((5, 5, 20, 300, 0.9), (-0.27666666666666667, 0.27666666666666667)),
    ((40, 8, 1500, 1600, 0.9), (0.019375, 0.023125))])
def test_the_intervals_are_the_ones_pinned_before(cell, pinned):
    ci = exact_paired_set_ci(*cell) if cell[3] <= paired_exact.MAX_TOTAL else restricted_paired_set_ci(*cell)
    assert ci == pinned  # floats compared exactly


def test_a_product_with_the_mask_as_floats_is_the_product_with_the_mask():
    rng = np.random.default_rng(71)
    for rows, cols in [(1, 1), (3, 7), (40, 1891), (198, 4004)]:
        p = np.exp(rng.normal(-8.0, 4.0, size=(rows, cols)))
        p[rng.random((rows, cols)) < 0.2] = 0.0
        mask = rng.random(cols) < 0.5
        assert np.array_equal(p @ paired_exact._ones(mask), p @ mask)


def test_each_falling_factorial_is_the_difference_it_was():
    rng = np.random.default_rng(7)
    fact = np.concatenate([np.full(21, np.inf), np.cumsum(rng.random(400))])
    at = rng.integers(21, 421, size=(30, 1))
    k = rng.integers(0, 21, size=500)
    assert paired_exact._less(fact, at, k).tobytes() == (fact[at] - fact[at - k]).tobytes()


def _line(k: int, **more) -> dict:
    return {"id": f"q{k}", "context": f"c{k}", "choices": ["a", "b"], "continuations": [" a", " b"],
            "continuation_tokens": [[1, 2], [3]], "logprobs": [-2.5 - k, -0.5], "gold": 1, "pred": 1, **more}


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_file_read_again_with_the_same_bytes_gives_its_samples_unparsed(tmp_path, monkeypatch):
    path = tmp_path / "samples-t.jsonl"
    _write(path, [_line(k, note={"x": [k]}) for k in range(3)])
    first = read_samples(path)
    parsed = []
    monkeypatch.setattr(samples, "parse_samples", lambda *a, **k: parsed.append(a) or [])
    again = read_samples(path)
    assert not parsed and again == first and again is not first and all(x is y for x, y in zip(again, first))
    again.append(None)  # the list is the caller's own
    assert len(read_samples(path)) == 3
    assert read_samples(path, required=False) == [] and parsed  # a checkpoint is read every time


def test_a_file_changed_in_place_is_read_anew_whatever_its_size_and_time(tmp_path):
    path = tmp_path / "samples-t.jsonl"
    _write(path, [_line(k) for k in range(3)])
    stamp = os.stat(path).st_mtime_ns
    assert read_samples(path)[0].logprobs == (-2.5, -0.5)
    text = path.read_text().replace('"pred": 1', '"pred": 0', 1).replace('"gold": 1', '"gold": 0', 1)
    path.write_text(text.replace("[-2.5, -0.5]", "[-0.5, -2.5]", 1))  # the same size, the same time
    os.utime(path, ns=(stamp, stamp))
    assert read_samples(path)[0].logprobs == (-0.5, -2.5)
    path.write_text(text)  # pred 0 is not the highest log-prob: refused, each time it is read
    for _ in range(2):
        with pytest.raises(ResultsError, match="line 1 is malformed"):
            read_samples(path)


def test_the_fields_a_task_reads_are_held_whatever_was_read_before(tmp_path):
    path = tmp_path / "samples-t.jsonl"
    _write(path, [_line(k) for k in range(2)])
    assert len(read_samples(path, task="t")) == 2
    with pytest.raises(ResultsError, match="lack its field 'class'"):
        read_samples(path, task="t", fields={"class": str})


def test_the_count_of_a_finished_file_is_kept_by_its_bytes(tmp_path):
    path = tmp_path / "samples-t.jsonl"
    _write(path, [_line(k) for k in range(4)])
    assert samples._finished_count(path) == 4 == len(read_samples(path))
    _write(path, [_line(k) for k in range(3)])
    assert samples._finished_count(path) == 3
    path.write_text(path.read_text()[:-9])  # a torn last line
    with pytest.raises(ResultsError, match="cut short"):
        samples._finished_count(path)


def test_the_memo_holds_at_most_its_files(tmp_path, monkeypatch):
    monkeypatch.setattr(samples, "MEMO_FILES", 2)
    for k in range(4):
        _write(tmp_path / f"samples-{k}.jsonl", [_line(k)])
        read_samples(tmp_path / f"samples-{k}.jsonl")
    assert len(samples._parsed) <= 2


def test_json_nesting_is_counted_only_where_the_text_could_nest_too_deep(monkeypatch):
    deep = "[" * (jsonfiles.MAX_DEPTH + 1) + "]" * (jsonfiles.MAX_DEPTH + 1)
    with pytest.raises(jsonfiles.BadJSON, match="deeper than"):
        jsonfiles.loads(deep)
    assert jsonfiles.loads(deep[1:-1]) == json.loads(deep[1:-1])
    brackets = json.dumps(["[" * 70, {"a": "{" * 70}])  # more [ and { than MAX_DEPTH, in strings: nested counted
    assert jsonfiles.loads(brackets) == json.loads(brackets)
    with pytest.raises(jsonfiles.BadJSON, match="41 digits"):
        jsonfiles.loads(b'{"n": ' + b"9" * 41 + b"}")
    with pytest.raises(jsonfiles.BadJSON, match="Unexpected UTF-8 BOM"):
        jsonfiles.loads("\ufeff{}")
    monkeypatch.setattr(jsonfiles, "depth", lambda value: pytest.fail("the nesting was counted"))
    assert jsonfiles.loads(json.dumps(_line(1))) == _line(1)


def test_a_sample_writes_the_line_it_was_read_from():
    for line in (_line(1), _line(2, note={"x": [1, [2]]}, label="b", tags=["t", 3, None, 1.5, True]),
                 _line(3, continuation_tokens=None, choices=[])):
        written = Sample.from_dict(line).to_dict()
        assert written == line and json.dumps(written) == json.dumps(line)  # the same keys, in the same order


def test_a_list_of_plain_values_reads_as_its_items_did_and_a_bad_one_is_named():
    assert reader(tuple[float, ...])([1, -2.5], "x") == (1, -2.5)
    assert reader(tuple[tuple[int, ...], ...])([[1, 2], []], "x") == ((1, 2), ())
    cases = [(tuple[float, ...], [1.0, True], "x[1] is a boolean (true), not a number"),
             (tuple[tuple[int, ...], ...], [[1], [2, "3"]], "x[1][1] is a string ('3'), not an integer"),
             (tuple[int, int], [1, 2.0], "x[1] is a number (2.0), not an integer"),
             (dict[str, tuple[str, ...]], {"a": ["b"], "c": [None]}, "x.c[0] is null, not a string")]
    for tp, value, said in cases:
        with pytest.raises(Invalid) as err:
            reader(tp)(value, "x")
        assert str(err.value) == said
    line = _line(1, continuation_tokens=[[1], [2, 2.5]])
    with pytest.raises(Invalid, match=r"^continuation_tokens\[1\]\[1\] is a number \(2.5\), not an integer$"):
        Sample.from_dict(line)


def test_a_scored_key_is_the_digest_of_its_texts_asked_once():
    assert items.scored_key("ctx", [" A", " B"]) == items._digest("ctx", (" A", " B"))
    before = items._known.cache_info().hits
    for _ in range(3):
        assert items.scored_key("ctx", (" A", " B")) == items.scored_key("ctx", [" A", " B"])
    assert items._known.cache_info().hits >= before + 5
    assert items.scored_key(None) == items._digest(None, ()) == items.scored_key("None", None)
    assert items.scored_key(1, (True,)) == items._digest(1, (True,)) != items.scored_key(1, (1,))


def test_tangos_interval_memoized_is_the_one_computed_afresh():
    fresh = stats.paired_score_ci.__wrapped__
    for b, c, n in [(0, 0, 1), (3, 1, 40), (40, 0, 40), (7, 9, 200)]:
        for level, factor in [(0.95, 1.0), (0.9, 1.0), (0.9, stats.fpc(n, 2 * n))]:
            assert stats.paired_score_ci(b, c, n, level=level, factor=factor) == fresh(b, c, n, level=level,
                                                                                        factor=factor)
    assert math.isnan(stats.paired_score_ci(1, 0, 0)[0])
    as_numpy = stats.paired_score_ci(np.int64(3), np.int64(1), 40)  # typed: never another caller's types
    assert [type(v) for v in as_numpy] == [type(v) for v in fresh(np.int64(3), np.int64(1), 40)]
