"""The committed reference runs (issue 20 item 5): tests/reference/ holds 40 DISCOTEX items scored
with the portable build and the default options on Gemma 3 270M and SmolLM2-135M; `check`
re-scores them here and must give the recorded log-probs bit for bit on a portable build of
the recorded llama-cpp-python, on any x86-64 CPU with AVX2, FMA and F16C (CI installs that
build: there it must pass). Another build (a native one, another version) is another kernel
path: the test then skips, saying the verdict `check` gave instead. To keep the suite short it
re-scores 8 of each run's 40 items (`check --sample 8`, drawn with the run's seed: the same
items every time: a check of a subset, as `check --sample` is);
`abricot-local check tests/reference/NAME` re-scores all 40."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from abricot_local.run.check import check_run
from abricot_local.record import read_run

REFERENCE = Path(__file__).resolve().parent / "reference"
CI = os.environ.get("CI", "").lower() == "true"
SAMPLE = 8  # re-scored items of the 40 (deterministic: drawn with the run's seed)


def test_the_references_are_small_portable_default_runs():
    for name in ("gemma-3-270m", "smollm2-135m"):
        record = read_run(REFERENCE / name)
        k = record.provenance.kernels
        assert (k.build, k.extra_bufts, k.runtime) == ("portable", False, "llama-cpp-python 0.3.36")
        assert {"AVX2", "FMA", "F16C"} <= set(k.cpu_features) and "AVX512" not in k.cpu_features
        assert record.config.sample == 40 and record.tasks["discotex"].n == 40
        assert record.config.extra["extra_bufts"] == "off" and record.config.extra["engine"] == "prefix"
        assert sum(f.stat().st_size for f in (REFERENCE / name).iterdir()) < 200_000


@pytest.mark.real
@pytest.mark.parametrize("name, model", [("gemma-3-270m", "gemma_path"), ("smollm2-135m", "smollm2_path")])
def test_check_gives_the_committed_reference_bit_for_bit(name, model, request, discotex_dir):
    path = request.getfixturevalue(model)
    rep = check_run(REFERENCE / name, model=str(path), data_dir=str(discotex_dir), atol=0.0, sample=SAMPLE)
    assert rep.checked == SAMPLE and not rep.missing
    assert not any("depend on the thread count" in d for d in rep.kernel_differences)
    if rep.kernel_differences and not CI:
        pytest.skip(f"this llama.cpp build is another kernel path than the reference's ({'; '.join(rep.kernel_differences)}): "
                    f"check gives max |delta log-prob| {rep.max_abs_diff:.3g}, {rep.identical_predictions}/{SAMPLE} same "
                    f"predictions, verdict {rep.verdict.kind if rep.verdict else '?'}; the bit-for-bit check needs the "
                    "portable build (README: Install)")
    assert rep.same_kernels, f"CI installs the portable build: {rep.kernel_differences}"
    assert rep.reproduced and rep.max_abs_diff == 0.0 and rep.identical_predictions == SAMPLE
