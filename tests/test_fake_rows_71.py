"""The fake session's rows, read from a history kept per sequence and an incremental digest, with the integer
logits memoized by digest (backends.fake._History, _INTS), are the bits of the old formula computed from scratch
(every cell 0..pos read again, hashed, a fresh generator drawn) under any order of decode, seq_rm, seq_cp and
clear; a missing cell still raises the KeyError it raised; a poisoned token's row is still NaN."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from abricot_local.backends import fake
from abricot_local.backends.engines import engine_class
from abricot_local.backends.options import ScoringOptions


class OldSession:
    """FakeSession's cells and rows as they were: every row from scratch."""

    def __init__(self, seed: int):
        self.seed, self.cells, self.poison = seed, {}, frozenset()

    def decode(self, entries):
        for seq, pos, tok, _ in entries:
            self.cells.setdefault(seq, {})[pos] = tok
        return [self._row(seq, pos) if want else None for seq, pos, _, want in entries]

    def _row(self, seq, pos):
        cells = self.cells[seq]
        history = np.fromiter(map(cells.__getitem__, range(pos + 1)), dtype=np.int32, count=pos + 1)
        digest = hashlib.blake2b(bytes(str(self.seed), "ascii") + history.tobytes(), digest_size=8).digest()
        if cells[pos] in self.poison:
            return np.full(fake.N_VOCAB, np.nan)
        ints = np.random.default_rng(int.from_bytes(digest, "little")).integers(-fake.SPREAD, fake.SPREAD,
                                                                               fake.N_VOCAB)
        return fake.log_softmax_of_ints(ints)

    def seq_rm(self, seq, p0=-1, p1=-1):
        cells = self.cells.get(seq, {})
        hi = float("inf") if p1 < 0 else p1
        for p in [p for p in cells if p >= max(p0, 0) and p < hi]:
            del cells[p]
        return True

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        hi = float("inf") if p1 < 0 else p1
        self.cells.setdefault(dst, {}).update(
            {p: t for p, t in self.cells.get(src, {}).items() if p >= max(p0, 0) and p < hi})

    def clear(self):
        self.cells.clear()


def _outcome(session, op, *args):
    """What a call gives: its rows' bytes (None where none is asked), or the exception's type and args."""
    try:
        got = getattr(session, op)(*args)
    except KeyError as e:
        return ("KeyError", e.args)
    if op != "decode":
        return got
    return [None if r is None else r.tobytes() for r in got]


def _random_ops(rng: random.Random, n: int):
    """Decode runs (new, rewritten, past a gap, several sequences in one call), removals, copies, clears."""
    ops = []
    for _ in range(n):
        k = rng.random()
        if k < 0.62:
            entries = []
            for _run in range(rng.choice((1, 1, 2))):
                seq, start = rng.randrange(4), rng.choice((0, rng.randrange(40)))
                entries += [(seq, start + j, rng.choice((256, 97, 98, 99)), rng.random() < 0.7)
                            for j in range(rng.randrange(1, 12))]
            ops.append(("decode", entries))
        elif k < 0.8:
            ops.append(("seq_rm", rng.randrange(4), rng.choice((-1, rng.randrange(30))),
                        rng.choice((-1, -1, rng.randrange(40)))))
        elif k < 0.97:
            ops.append(("seq_cp", rng.randrange(4), rng.randrange(4), rng.choice((-1, rng.randrange(30))),
                        rng.choice((-1, -1, rng.randrange(40)))))
        else:
            ops.append(("clear",))
    return ops


@pytest.mark.parametrize("seed", [0, 7])
def test_rows_under_random_decodes_removals_copies_and_clears_are_the_old_formulas_bits(seed):
    rng = random.Random(seed)
    ops = _random_ops(rng, 260)
    for memo_cleared in (True, False):  # the integer logits drawn afresh, then read from the memo
        if memo_cleared:
            fake._INTS.clear()
        old, new = OldSession(seed), fake.FakeSession(ScoringOptions(seed=seed))
        errors = rows = 0
        for op, *args in ops:
            want = _outcome(old, op, *args)
            assert _outcome(new, op, *args) == want, (op, args)
            assert new.cells == old.cells
            errors += isinstance(want, tuple)
            rows += sum(r is not None for r in want) if isinstance(want, list) else 0
        assert errors > 10 and rows > 300  # both paths seen, and plenty of rows


def test_a_missing_cell_raises_the_key_error_it_raised_and_the_row_is_right_once_filled():
    s = fake.FakeSession(ScoringOptions(seed=3))
    old = OldSession(3)
    text = [fake.BOS, *b"il gatto dorme"]
    for session in (s, old):
        session.decode([(0, p, t, True) for p, t in enumerate(text)])
        session.seq_rm(0, 4, 6)  # a gap at 4 and 5, inside the history read so far
    with pytest.raises(KeyError) as e:
        s.decode([(0, 9, 120, True)])
    assert e.value.args == (4,)
    with pytest.raises(KeyError) as e:
        s.decode([(2, 3, 120, True)])  # a sequence with nothing before position 3
    assert e.value.args == (0,)
    for session in (s, old):
        session.decode([(0, 9, 120, False)])
        session.decode([(0, p, text[p], False) for p in (4, 5)])
    entries = [(0, p, 33, True) for p in range(6, 9)] + [(0, 9, 120, True)]
    assert [r.tobytes() for r in s.decode(entries)] == [r.tobytes() for r in old.decode(entries)]


def test_a_poisoned_tokens_row_is_nan_and_the_next_row_is_as_ever():
    s, old = fake.FakeSession(ScoringOptions(seed=4)), OldSession(4)
    s.poison = old.poison = frozenset({98})
    entries = [(0, p, t, True) for p, t in enumerate([fake.BOS, 97, 98, 99, 98, 97])]
    rows, want = s.decode(entries), old.decode(entries)
    assert [bool(np.isnan(r).all()) for r in rows] == [False, False, True, False, True, False]
    assert [r.tobytes() for r in rows] == [r.tobytes() for r in want]


def test_the_logits_memo_stays_bounded_and_a_cleared_memo_gives_the_same_rows(monkeypatch):
    monkeypatch.setattr(fake, "_INTS_MAX", 16)
    fake._INTS.clear()
    entries = [(0, p, t, True) for p, t in enumerate([fake.BOS, *b"la citta dorme, fuori piove."])]
    first = fake.FakeSession(ScoringOptions(seed=9)).decode(entries)
    assert 0 < len(fake._INTS) <= 16
    again = fake.FakeSession(ScoringOptions(seed=9)).decode(entries)  # some rows from the memo, some drawn
    want = OldSession(9).decode(entries)
    assert [r.tobytes() for r in first] == [r.tobytes() for r in again] == [r.tobytes() for r in want]
    assert len(fake._INTS) <= 16
    fake._INTS.clear()


class ListRows:
    """A session whose rows are lists, not arrays (the engine takes any sequence of floats)."""

    def __init__(self, inner):
        self.inner = inner
        self.n_batch, self.normalized, self.nonfinite_advice = inner.n_batch, inner.normalized, ""

    def decode(self, entries):
        return [None if r is None else r.tolist() for r in self.inner.decode(entries)]

    def thread_dependent(self, entries):
        return False


def test_an_engines_rows_are_the_same_from_arrays_and_from_lists():
    opts = ScoringOptions(seed=2)
    arrays = engine_class("single")(fake.FakeSession(opts), opts)
    lists = engine_class("single")(ListRows(fake.FakeSession(opts)), opts)
    entries = [(0, p, t, p % 3 == 0) for p, t in enumerate([fake.BOS, *b"una frase corta"])]
    targets = {(0, p): (97, 256) for p in range(0, 16, 3)}
    a, b = arrays.decode_call(entries, "x", targets), lists.decode_call(entries, "x", targets)
    assert a == b and sum(r is not None for r in a) == 6
    assert [r.argmax for r in a if r is not None] == [int(np.argmax(r)) for r in OldSession(2).decode(entries) if r is not None]
