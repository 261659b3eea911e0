"""The fake backend's numbers are the same bits on every CPU (issue 39 item 1): integer logits, an
exact log-softmax (no libm, no SIMD), so a pinned fake-backend samples file holds on any machine.
Proved here by computing its rows with numpy's SIMD dispatch limited to the baseline."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

from abricot_local.core import exact_exp, exact_log, exact_log_softmax, finite_log_softmax

# SHA-256 of the float64 bytes of the rows below: pinned, since they must not depend on the CPU
ROWS_SHA256 = "4bf0c0f2326ea8c5ded85e08a9e149d7e4596d2fee9792196ac732e81e8714ee"
ROWS = """
from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
import hashlib
s = FakeBackend("fake", ScoringOptions()).session
h = hashlib.sha256()
for seq, text in enumerate([b"Il gatto", b"dorme sul divano.", bytes(range(32, 127))]):
    toks = [256, *text]
    for row in s.decode([(seq, p, t, True) for p, t in enumerate(toks)]):
        h.update(row.tobytes())
print(h.hexdigest())
"""


def _rows_child(env: dict[str, str]):
    from conftest import Early  # here: the module is also read where no conftest is

    return Early([sys.executable, "-c", ROWS], env={**os.environ, **env}, cwd=Path(__file__).resolve().parents[1])


def early_children(tmp_path_factory) -> dict:
    """ROWS in two fresh processes, SIMD dispatch as it is and limited to the baseline: started by conftest once
    the tests are collected, beside the other tests (conftest.start_early)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__

    return {"full": _rows_child({}), "limited": _rows_child({"NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__)})}


@pytest.fixture(scope="module")
def rows_digests(tmp_path_factory):
    from conftest import early_children_of

    children = early_children_of(__name__, early_children, tmp_path_factory)
    yield children
    for child in children.values():
        child.close()


def _rows_digest(child) -> str:
    out = child.result()
    out.check_returncode()
    return out.stdout.strip()


def test_exact_exp_and_log_are_correctly_rounded():
    assert exact_exp(1.0) == 2.718281828459045 and exact_exp(0.0) == 1.0
    assert exact_log(2.0) == 0.6931471805599453 and exact_log(1.0) == 0.0
    assert exact_exp(-800.0) == 0.0


def test_exact_log_softmax_is_a_distribution_and_agrees_with_numpy_within_an_ulp():
    values = [0.5, 3.0, -1.0, 2.0]
    got = exact_log_softmax(values)
    assert abs(math.fsum(exact_exp(v) for v in got) - 1.0) < 1e-15
    assert all(abs(a - b) < 1e-14 for a, b in zip(got, finite_log_softmax(values, label="x", position=0)))


def test_the_fake_rows_are_the_same_bits_with_numpy_simd_dispatch_limited(rows_digests):
    full = _rows_digest(rows_digests["full"])
    limited = _rows_digest(rows_digests["limited"])
    assert full == limited == ROWS_SHA256


def test_the_fake_rows_table_is_exact_log_softmax_bit_for_bit():
    """The fake session's table-driven log-softmax (backends.fake.log_softmax_of_ints) gives exactly the bits of
    core.exact_log_softmax over the same integer logits, edge values included."""
    import numpy as np

    from abricot_local.backends import fake

    rng = np.random.default_rng(7)
    rows = [rng.integers(-fake.SPREAD, fake.SPREAD, fake.N_VOCAB) for _ in range(40)]
    rows += [np.full(fake.N_VOCAB, -fake.SPREAD), np.array([fake.SPREAD - 1] + [-fake.SPREAD] * (fake.N_VOCAB - 1))]
    for ints in rows:
        want = np.array(exact_log_softmax(int(k) / fake.SCALE for k in ints))
        assert fake.log_softmax_of_ints(ints).tobytes() == want.tobytes()


def test_a_row_seen_again_is_the_same_bits_as_computed_afresh():
    """The session keeps each row's log-sum-exp by the row's digest (backends.fake._LSE): a row served from it is
    the row computed afresh from its own integer logits."""
    import numpy as np

    from abricot_local.backends import fake
    from abricot_local.backends.options import ScoringOptions

    fake._LSE.clear()
    text = b"il gatto dorme sul divano. " * 12  # 325 rows: a key weaker than the digest would collide
    entries = [(0, p, t, True) for p, t in enumerate([fake.BOS, *text])]
    first = fake.FakeSession(ScoringOptions(seed=5)).decode(entries)
    again = fake.FakeSession(ScoringOptions(seed=5)).decode(entries)
    assert len(fake._LSE) == len(entries)
    for pos, (a, b) in enumerate(zip(first, again)):
        cells = [t for _, _, t, _ in entries[:pos + 1]]
        digest = fake.hashlib.blake2b(b"5" + np.asarray(cells, dtype=np.int32).tobytes(), digest_size=8).digest()
        ints = np.random.default_rng(int.from_bytes(digest, "little")).integers(-fake.SPREAD, fake.SPREAD,
                                                                               fake.N_VOCAB)
        assert a.tobytes() == b.tobytes() == fake.log_softmax_of_ints(ints).tobytes()
