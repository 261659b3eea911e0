"""examples/notebook.ipynb executed with nbclient, on the cached Gemma 3 270M and SmolLM2-135M and the
first 2 DISCOTEX items (the notebook's ABRICOT_NOTEBOOK_* settings; a user's run draws 40): every cell
runs, the figure is drawn, and the notebook's Gemma run (the Python API) wrote the same samples lines,
byte for byte, as the `run` command of the shared gemma_run fixture wrote for those 2 of its 4 items."""

from __future__ import annotations

from pathlib import Path

import pytest

import abricot_local
from abricot_local.analysis import compare as cmp

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 2  # of gemma_run's 4 items: two real runs of 2 items, in a kernel, is what this test spends


@pytest.mark.real
def test_the_example_notebook_runs(gemma_path, smollm2_path, discotex_dir, gemma_run, tmp_path, monkeypatch):
    import nbclient
    import nbformat

    out = tmp_path / "out"
    settings = {"GEMMA": gemma_path, "SMOLLM2": smollm2_path, "DISCOTEX": discotex_dir, "OUT": out, "LIMIT": LIMIT,
                "THREADS": 2}  # gemma_run's command, on its first LIMIT items: --limit 4 --threads 2
    for key, value in settings.items():
        monkeypatch.setenv(f"ABRICOT_NOTEBOOK_{key}", str(value))
    nb = nbformat.read(ROOT / "examples" / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the figure was not drawn"
    assert any("(a dry run: nothing is scored" in str(o.get("data", {}).get("text/html", "")) for o in outputs), \
        "the plan's table was not shown"
    kinds = (cmp.IDENTICAL, cmp.CLOSE, cmp.CANNOT_TELL, cmp.DIFFERENT)
    assert any(k in str(o) for o in outputs for k in kinds), "no verdict shown"
    name = "samples-discotex.jsonl"
    lines = (gemma_run.out / name).read_bytes().splitlines(keepends=True)
    assert len(lines) == 4 and (out / "gemma" / name).read_bytes() == b"".join(lines[:LIMIT])
    assert (out / "smollm2" / "results.json").is_file()
    assert list((tmp_path / "out-lm-eval").glob("*/results_*.json"))  # beside the runs' folder, not in it
    assert sorted(Path(r.path).name for r in abricot_local.load_runs(out)) == ["gemma", "smollm2"]  # each once
