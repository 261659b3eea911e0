"""The one order of precision of a quant ladder (gguf.file.by_precision), on one scale for the set: the quants'
names' sizes (gguf.file.NAME_BITS) where every name is sized, else the files' real bits per weight from their GGUF
headers' tensors (recorded by every run as ``model.bits_per_weight``) where every member has them; ties by the name
then the label: compare's reference, the report's ladder and a sweep's
reference are the same whatever order the runs are given in. Real tiny quants (llama.cpp's quantizer, tests/
tiny_llama.py) for the header's bits; the fake backend, in-process, for the runs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.cli import cli
from abricot_local.gguf.file import NAME_BITS, Precision, bits_per_weight, by_precision, highest_precision, quant_bits
from invented_data import write_discotex
from tiny_llama import write_tiny

FAKE = ("--backend", "fake", "--n-ctx", "4096")


def invoke(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def tiny_quants(tmp_path_factory) -> dict[str, Path]:
    """A tiny Llama (random F16 weights) and llama.cpp's Q8_0, Q4_K_M and Q4_0 of it."""
    from abricot_local.backends import quantizer

    tmp = tmp_path_factory.mktemp("order")
    src = write_tiny(tmp / "m-f16.gguf")
    quantize = quantizer()
    out = {"F16": src}
    for q in ("Q8_0", "Q4_K_M", "Q4_0"):
        out[q] = tmp / f"m-{q.lower()}.gguf"
        quantize(src, out[q], q, threads=1)
    return out


def test_a_files_bits_per_weight_are_its_tensors_bytes_over_their_elements(tiny_quants):
    """Against the gguf package's own reader and ggml's type sizes (another implementation of the header)."""
    import gguf

    for quant, path in tiny_quants.items():
        tensors = gguf.GGUFReader(str(path)).tensors
        n = sum(int(t.n_elements) for t in tensors)
        nbytes = sum(int(t.n_elements) // gguf.GGML_QUANT_SIZES[t.tensor_type][0] * gguf.GGML_QUANT_SIZES[t.tensor_type][1]
                     for t in tensors)
        assert bits_per_weight(path) == round(8 * nbytes / n, 4), quant
    bits = {q: bits_per_weight(p) for q, p in tiny_quants.items()}
    assert bits["F16"] > bits["Q8_0"] > bits["Q4_K_M"] > bits["Q4_0"] > 4.5, bits  # Q4_K_M's mix: Q6_K matrices


def test_the_order_is_the_same_whatever_the_order_given():
    names = ["Q4_0", "Q4_K_M", "Q4_1", "Q5_0", "Q5_K_M", "Q5_K_S", "Q8_0", "F16", "Q2_K", "Q6_K", "IQ4_XS"]
    want = [names[i] for i in by_precision(names)]
    assert want == ["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_0", "Q5_K_S", "Q4_1", "Q4_K_M", "Q4_0", "IQ4_XS", "Q2_K"]
    for perm in itertools.islice(itertools.permutations(names), 0, 40320, 997):
        assert [perm[i] for i in by_precision(perm)] == want
    assert quant_bits("q4_k_m") == NAME_BITS["Q4_K_M"] > quant_bits("Q4_0") and quant_bits("Q4_K") == quant_bits("Q4_K_M")
    assert quant_bits("Q4_X") == 4.0 and quant_bits("model") == -1.0
    # one scale for the set: the names' where every name is sized (a file's real bits never mixed in: gemma-3-270m's
    # Q4_K_M file has 7.36 bits per weight, its embeddings at higher precision, above the names' Q6_K 6.57)
    a, b = Precision("Q4_0", 6.2, ("a",)), Precision("Q4_K_M", 6.1, ("b",))
    assert highest_precision([b, a]) == 0 and highest_precision([a, b]) == 1
    assert highest_precision([Precision("Q4_K_M", 7.3581), Precision("Q6_K")]) == 1
    assert highest_precision([Precision("Q6_K"), Precision("Q4_K_M", 7.3581)]) == 0
    # names not sized: the files' real bits where every member has them, else the names' digits
    c, d = Precision("Q4_X", 5.0, ("z",)), Precision("Q4_Y", 5.5, ("y",))
    assert highest_precision([c, d]) == 1 and highest_precision([d, c]) == 0
    assert highest_precision([Precision("Q4_X", 5.0), Precision("Q5_Y")]) == 1  # one not known: the digits
    e, f = Precision("Q8_0", None, ("run-b", "/x/b")), Precision("Q8_0", None, ("run-a", "/x/a"))
    assert highest_precision([e, f]) == 1 and highest_precision([f, e]) == 0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Fake Q4_0 and Q4_K_M of one base (registry quants), 4 invented DISCOTEX items."""
    tmp = tmp_path_factory.mktemp("sweep")
    data = write_discotex(tmp / "discotex", per_source=4)
    models = tmp / "models.toml"
    models.write_text('[fake-q40]\nbackend = "fake"\nbase = "fb"\nquant = "Q4_0"\n\n'
                      '[fake-q4km]\nbackend = "fake"\nbase = "fb"\nquant = "Q4_K_M"\n', encoding="utf-8")
    out = tmp / "ladder"
    invoke("run", "fake-q40", "--quants", "Q4_0,Q4_K_M", "--models", models, *FAKE, "--tasks", "discotex",
           "--data-dir", data, "--sample", 4, "--out", out)
    return models, out / "fake-q40", out / "fake-q4km"


def _references(folders, models) -> set[tuple[str, str]]:
    """(run, its reference) of compare's equivalence verdicts, by model name."""
    doc = json.loads(invoke("compare", *folders, "--models", models, "--format", "json").output)
    return {(e["other"].split("/")[-1], e["reference"].split("/")[-1]) for e in doc["equivalence"]}


def _ladder(folders, models) -> list[tuple[str, str | None]]:
    """The report's ladder, (quant, its reference) from the top; and its pairwise table (the HTML page's
    "reference (higher precision)") agrees on the reference."""
    from abricot_local.models.registry import load_registry
    from abricot_local.report import tables

    rep = tables.build([str(f) for f in folders], registry=load_registry(models))
    doc = json.loads(tables.render(rep, "json", table="quant"))
    ladder = [(r["quant"], r["reference"]) for r in doc["quant_ladder"]]
    assert [(q["ref_quant"], q["other_quant"]) for q in doc["quant_comparison"]] == [(ladder[0][0], ladder[1][0])]
    return ladder


def test_compare_and_the_ladder_take_the_name_rule_whatever_the_order(sweep):
    """Runs without recorded bits (the fake backend has no file): Q4_K_M (4.9 by its name) over Q4_0 (4.64)."""
    models, q40, q4km = sweep
    for folders in ((q40, q4km), (q4km, q40)):
        assert {ref for _, ref in _references(folders, models)} == {"fake-q4km"}
        ladder = _ladder(folders, models)
        assert [q for q, _ in ladder] == ["Q4_K_M", "Q4_0"] and ladder[0][1] is None and ladder[1][1], ladder


def _with_bits(src: Path, dst: Path, bits: float) -> Path:
    import shutil

    shutil.copytree(src, dst)
    doc = json.loads((dst / "results.json").read_text())
    doc["model"]["bits_per_weight"] = bits
    (dst / "results.json").write_text(json.dumps(doc))
    return dst


def test_recorded_bits_per_weight_do_not_mix_into_the_names_scale(sweep, tmp_path):
    """A Q4_0 file recorded with more bits per weight than the Q4_K_M one: the names are sized, so the names' scale
    orders them, as a sweep ordered them before any file was here: Q4_K_M the reference, in either order."""
    models, q40, q4km = sweep
    a, b = _with_bits(q40, tmp_path / "fake-q40", 6.25), _with_bits(q4km, tmp_path / "fake-q4km", 5.5)
    from abricot_local.record import read_run

    assert read_run(a).model.bits_per_weight == 6.25
    for folders in ((a, b), (b, a)):
        ladder = _ladder(folders, models)
        assert [q for q, _ in ladder] == ["Q4_K_M", "Q4_0"], ladder
        assert {ref for _, ref in _references(folders, models)} == {"fake-q4km"}


def test_a_sweeps_reference_reads_the_files_here(tiny_quants, tmp_path):
    """models.quants.reference: the one scale, whatever the order and whatever is here: the names' (Q4_1 not here,
    5.11 by its name, over the Q4_K_M file here, whatever that file's own bits)."""
    from abricot_local.models.quants import reference
    from abricot_local.models.registry import load_registry

    toml = tmp_path / "models.toml"
    toml.write_text("".join(f'["m-{q.lower()}"]\nsource = "local"\npath = "{p}"\nquant = "{q}"\nbase = "m"\n\n'
                            for q, p in tiny_quants.items() if q != "F16")
                    + '["m-q4_1"]\nsource = "local"\npath = "not-here.gguf"\nquant = "Q4_1"\nbase = "m"\n',
                    encoding="utf-8")
    registry = load_registry(toml)
    assert reference(["m-q4_0", "m-q4_k_m"], registry) == reference(["m-q4_k_m", "m-q4_0"], registry) == "m-q4_k_m"
    assert bits_per_weight(tiny_quants["Q4_K_M"]) > NAME_BITS["Q4_1"]  # its own bits would have put it first
    assert reference(["m-q4_1", "m-q4_k_m"], registry) == reference(["m-q4_k_m", "m-q4_1"], registry) == "m-q4_1"


def test_a_run_records_its_files_bits_per_weight(tiny_quants):
    """models.ref.ModelRef.record(): ``bits_per_weight`` from the file's header (absent without a file)."""
    from abricot_local.models.ref import ModelRef

    path = tiny_quants["Q4_K_M"]
    rec = ModelRef("m", "path", "llama.cpp", "m", path=path).record()
    assert rec.bits_per_weight == bits_per_weight(path)
    assert ModelRef("f", "synthetic", "fake", "f").record().bits_per_weight is None
