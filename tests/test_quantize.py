"""quantize and its output folder, on tiny Llama GGUFs that llama.cpp's own quantizer writes in
milliseconds (tests/tiny_llama.py): a rung is kept only for the SOURCE it was made from, two
SOURCEs' ladders live side by side, a file of the user's is never overwritten, a folder that is not
quantize's is refused before anything is written, temporary files never outlive a call, a full disk
is said as such, the disk check counts the tensors that fall back, and the types llama.cpp cannot
write here are refused up front."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local import hashing
from abricot_local.cli import cli
from abricot_local.errors import NoSpaceError, UsageError
from abricot_local.gguf.file import headers
from abricot_local.models.quantize import make_ladder
from abricot_local.models.registry import load_registry
from tiny_llama import write_tiny


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


def _vocab(path: Path) -> tuple:
    """A GGUF's architecture and its number of tokens, as the gguf package reads them."""
    import gguf

    r = gguf.GGUFReader(path)
    return str(r.fields["general.architecture"].contents()), len(r.fields["tokenizer.ggml.tokens"].data)


def write_two(root: Path) -> tuple[Path, Path]:
    """Two models whose files are both named model-f16.gguf (in ``root``'s A and B): another vocabulary, other
    weights."""
    return (write_tiny(root / "A" / "model-f16.gguf", n_vocab=300),
            write_tiny(root / "B" / "model-f16.gguf", n_vocab=320, prefix="u", seed=1))


@pytest.fixture(scope="module")
def two_made(tmp_path_factory) -> tuple[Path, Path]:
    """write_two once for the module: only copied."""
    return write_two(tmp_path_factory.mktemp("two"))


@pytest.fixture
def two(two_made, tmp_path):
    """write_two's models for this test: copies of the module's (new files, as if written here), which it may
    change."""
    out = []
    for src in two_made:
        (tmp_path / src.parent.name).mkdir()
        out.append(Path(shutil.copyfile(src, tmp_path / src.parent.name / src.name)))
    return tuple(out)


def test_a_second_source_never_takes_the_first_ones_rungs(two, tmp_path):
    a, b = two
    out = tmp_path / "L"
    first = make_ladder(str(a), "Q8_0,Q4_0", out=str(out))
    before = load_registry(first.fragment)
    lines = []
    second = make_ladder(str(b), "Q8_0,Q4_0,F16", out=str(out), notify=lines.append)
    assert not any(r.kept for r in second.rungs) and second.base != first.base
    assert any("made from another file" in x for x in lines)
    reg = load_registry(second.fragment)
    assert {k: v.sha256 for k, v in before.items() if k in {first.alias("Q8_0"), first.alias("Q4_0")}}.items() <= \
        {k: v.sha256 for k, v in reg.items()}.items()  # the first ladder's entries are all still there
    sources = {first.base: a, second.base: b}
    for spec in reg.values():
        if spec.base in sources:  # every rung listed under a base is made from that base's SOURCE
            assert _vocab(out / spec.path) == _vocab(sources[spec.base]), spec.name
            assert spec.from_sha256 == hashing.sha256_file(sources[spec.base])
    again = make_ladder(str(a), "Q4_0,Q6_K", out=str(out))  # the first SOURCE again: its own rung kept
    assert again.base == first.base and [r.kept for r in again.rungs] == [True, False]
    from abricot_local.models.quants import expand

    assert expand([first.alias("Q8_0")], "Q8_0,Q4_0,Q6_K", load_registry(str(first.fragment))) == tuple(
        first.alias(q) for q in ("Q8_0", "Q4_0", "Q6_K"))  # one model's rungs: a ladder


def test_a_file_not_quantizes_at_a_rung_path_is_refused_not_overwritten(two, tmp_path):
    a, _ = two
    out = tmp_path / "L"
    out.mkdir()
    elsewhere = make_ladder(str(a), "Q8_0", out=str(tmp_path / "other")).rungs[0].path
    (out / "model-q8_0.gguf").write_bytes(elsewhere.read_bytes())  # whole, of that quant, but the user's copy
    with pytest.raises(UsageError, match="does not list it as a rung quantize made from this SOURCE"):
        make_ladder(str(a), "Q4_0,Q8_0", out=str(out))
    assert sorted(files(out)) == ["model-q8_0.gguf"]  # nothing written: not the Q4_0 either
    (out / "model-q8_0.gguf").unlink()
    (out / "model-q8_0.gguf").mkdir()
    r = invoke("quantize", a, "--to", "Q8_0", "--out", out)
    assert r.exit_code == 2 and "is a folder, where quantize would write a rung" in r.output, r.output
    (out / "model-q8_0.gguf").rmdir()
    ladder = make_ladder(str(a), "Q8_0", out=str(out))
    ladder.rungs[0].path.write_bytes(ladder.rungs[0].path.read_bytes()[:-1] + b"\x00")  # changed since
    with pytest.raises(UsageError, match="not the file quantize wrote"):
        make_ladder(str(a), "Q8_0", out=str(out))


def test_a_models_toml_not_quantizes_is_refused_before_any_rung(two, tmp_path):
    a, _ = two
    out = tmp_path / "L"
    out.mkdir()
    (out / "models.toml").write_text('[mine]\nsource = "local"\npath = "x.gguf"\n', encoding="utf-8")
    r = invoke("quantize", a, "--to", "Q8_0,Q4_0", "--out", out)
    assert r.exit_code == 2 and "was not written by quantize" in r.output, r.output
    assert sorted(files(out)) == ["models.toml"]
    ladder = make_ladder(str(a), "Q8_0", out=str(tmp_path / "M"))
    ladder.fragment.write_text(ladder.fragment.read_text() + "\n[broken\n", encoding="utf-8")  # its own, damaged
    with pytest.raises(UsageError, match="no longer valid TOML"):
        make_ladder(str(a), "Q4_0", out=str(tmp_path / "M"))
    assert not (tmp_path / "M" / "model-q4_0.gguf").exists()


@pytest.mark.parametrize("marker", ["results.json", ".checkpoint"])
def test_a_run_folder_is_refused(two, tmp_path, marker):
    a, _ = two
    run = tmp_path / "run"
    run.mkdir()
    (run / marker).mkdir() if marker.startswith(".") else (run / marker).write_text("{}")
    for out in (run, run / "rungs"):
        r = invoke("quantize", a, "--to", "Q8_0", "--out", out)
        assert r.exit_code == 2 and "a run's" in r.output and "Traceback" not in r.output, r.output
    assert sorted(os.listdir(run)) == [marker]


def test_an_output_that_is_a_file_is_one_line(two, tmp_path):
    a, _ = two
    f = tmp_path / "file"
    f.write_text("mine")
    for out, said in ((f, "is a file, not a folder"), (f / "sub", f"{f} is a file, not a folder")):
        r = invoke("quantize", a, "--to", "Q8_0", "--out", out)
        assert r.exit_code == 2 and said in r.output and "Traceback" not in r.output, r.output
    assert f.read_text() == "mine"


def test_stale_temporary_files_of_quantizes_own_are_removed(two, tmp_path):
    a, _ = two
    out = tmp_path / "L"
    out.mkdir()
    stale = [".model-q6_k.gguf.ab1cd2ef.tmp", ".models.toml.zz9yy8xx.tmp"]
    for name in stale:
        (out / name).write_bytes(b"\0" * 1000)  # what a killed quantize leaves
    (out / ".notes.tmp").write_text("the user's")
    lines = []
    make_ladder(str(a), "Q8_0", out=str(out), notify=lines.append)
    assert not any((out / n).exists() for n in stale) and (out / ".notes.tmp").read_text() == "the user's"
    assert any("temporary file(s)" in x and stale[0] in x for x in lines)
    assert [p.name for p in out.glob(".*.tmp")] == [".notes.tmp"] and not (out / ".quantize.lock").exists()


def test_the_quant_is_what_the_weights_are_not_what_the_header_says(tmp_path):
    liar = write_tiny(tmp_path / "model-q8_0.gguf", file_type=7)  # F16 matrices, header and name say Q8_0
    ladder = make_ladder(str(liar), "Q4_0", out=str(tmp_path / "L"))
    assert not ladder.requantized and ladder.source_quant == "F16" and ladder.base == "model"
    assert [r.made_from for r in ladder.rungs] == ["F16"]
    q8 = make_ladder(str(write_tiny(tmp_path / "m-f16.gguf")), "Q8_0", out=str(tmp_path / "Q")).rungs[0].path
    with pytest.raises(UsageError, match=r"already quantized \(Q8_0\)"):
        make_ladder(str(q8), "Q4_0", out=str(tmp_path / "R"))
    req = make_ladder(str(q8), "Q4_0", out=str(tmp_path / "R"), allow_requantize=True)
    assert [(r.quant, r.made_from) for r in req.rungs] == [("F16", "Q8_0"), ("Q4_0", "F16")]
    assert req.base == "m-q8_0-dequantized" and all("from-q8_0" not in req.alias(r.quant) for r in req.rungs)
    notes = {s.quant: s.notes for s in load_registry(req.fragment).values()}
    assert "Q8_0 function at 16 bits" in notes["F16"] and notes["Q4_0"].startswith("made from the F16 rung")


def test_types_that_need_an_importance_matrix_are_refused_up_front(two, tmp_path):
    a, _ = two
    for q in ("IQ2_XXS", "IQ1_S", "Q2_K_S"):
        r = invoke("quantize", a, "--to", f"Q8_0,{q}", "--out", tmp_path / q)
        assert r.exit_code == 2 and "importance matrix" in r.output and not (tmp_path / q).exists(), r.output


def test_the_refused_types_are_the_ones_llama_cpp_refuses(two, tmp_path):
    """What this build's quantizer says of each type quantize refuses, and of the ones it suggests instead."""
    from abricot_local.backends import quantizer
    from abricot_local.errors import ModelError

    from abricot_local.models.quant_types import NEEDS_IMATRIX

    quantize, (a, _) = quantizer(), two
    for q in (*NEEDS_IMATRIX, "IQ3_S", "IQ4_XS", "Q2_K", "Q3_K_S"):
        try:
            quantize(a, tmp_path / f"{q}.gguf", q, threads=1)
            refused = False
        except ModelError as err:
            assert "importance matrix" in str(err), (q, str(err))
            refused = True
        assert refused == (q in NEEDS_IMATRIX), q


def test_mxfp4_of_a_dense_model_is_refused_with_what_it_would_hold(two, tmp_path):
    a, _ = two
    r = invoke("quantize", a, "--to", "MXFP4", "--out", tmp_path / "L")
    assert r.exit_code == 2 and "no expert tensors" in r.output and "ask for Q8_0" in r.output, r.output
    assert not (tmp_path / "L").exists()
    from abricot_local.models.quant_types import refuse_experts_only

    moe = headers(write_tiny(tmp_path / "moe.gguf", experts=True))[0].tensors
    refuse_experts_only(("MXFP4",), moe, "moe")  # a mixture of experts: accepted


@pytest.mark.parametrize("shape", [(256, 512, 1), (96, 192, 2), (80, 160, 1)], ids=["256", "96-cols", "80-cols"])
def test_the_disk_estimate_counts_the_tensors_that_fall_back(tmp_path, shape):
    n_embd, n_ff, n_layer = shape
    src = write_tiny(tmp_path / "m-f16.gguf", n_embd=n_embd, n_ff=n_ff, n_layer=n_layer)
    from abricot_local.models.quant_types import estimate

    info = headers(src)[0]
    ladder = make_ladder(str(src), "F16,Q8_0,Q6_K,Q4_K_M,Q4_0,Q3_K_M,Q2_K", out=str(tmp_path / "L"))
    for r in ladder.rungs:
        assert r.size <= estimate(info.tensors, r.quant, info.data_offset) <= 2 * r.size, (r.quant, r.size)


def test_the_disk_check_refuses_what_does_not_fit_before_anything_is_written(tmp_path, monkeypatch):
    """Free space one byte short of what llama.cpp will write (96 columns: most matrices fall back from
    Q6_K to Q8_0, larger): refused before the first byte; with that byte more, written."""
    from abricot_local import memory

    src = write_tiny(tmp_path / "m-f16.gguf", n_embd=96, n_ff=192)
    size = make_ladder(str(src), "Q6_K", out=str(tmp_path / "elsewhere")).rungs[0].size
    monkeypatch.setattr(memory, "free_disk", lambda folder: (Path(folder), size - 1))
    with pytest.raises(NoSpaceError, match=r"not enough disk space: 1 rung\(s\) \(Q6_K\)"):
        make_ladder(str(src), "Q6_K", out=str(tmp_path / "L"))
    assert not (tmp_path / "L").exists()  # nothing written, and the folder this call made for it gone


_FULL = r"""
import resource, signal, sys
from pathlib import Path
from abricot_local import memory
from abricot_local.models.quantize import make_ladder
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
real = memory.free_disk
for out, mode in zip(sys.argv[2::2], sys.argv[3::2]):  # each (folder, mode) in turn, one line each
    calls = []
    if mode == "full":  # what the disk says once it is full, measured after llama.cpp's failure
        memory.free_disk = lambda folder: (real(folder)[0], 0 if calls.append(1) or len(calls) > 1 else 10**12)
    else:
        memory.free_disk = real
    try:
        make_ladder(sys.argv[1], "Q8_0", out=out)
        print("no error", flush=True)
    except Exception as err:
        print(type(err).__name__, str(err).replace("\n", " "), flush=True)
"""


MODES = ("full", "limit")


def early_children(tmp_path_factory) -> dict:
    """_FULL in a fresh process (one process, the two writes in turn) on write_two's first model, started by
    conftest once the tests are collected, beside the other tests (conftest.start_early)."""
    from conftest import Early, isolated_env

    root = tmp_path_factory.mktemp("full-disk")
    a, _ = write_two(root)
    return {"full": Early([sys.executable, "-c", _FULL, str(a), *(x for m in MODES for x in (str(root / m), m))],
                          cwd=root, env={**os.environ, **isolated_env(root)}, timeout=120)}


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_a_full_disk_is_said_and_leaves_no_partial_file(full_disk):
    tmp_path, modes = Path(full_disk.popen["cwd"]), MODES
    r = full_disk.result()
    said = r.stdout.splitlines()
    assert len(said) == len(modes), r
    for mode, line in zip(modes, said):
        if mode == "full":
            assert line.startswith("NoSpaceError the disk is full: writing model-q8_0.gguf stopped"), r
        else:  # another write failure: llama.cpp's own words, not a full disk
            assert line.startswith("ModelError") and "iostream error" in line, r
        assert not (tmp_path / mode).exists(), r  # no rung, no temporary file, no models.toml: the folder it made gone


def test_run_quants_refuses_a_ladder_of_two_models(two, tmp_path):
    a, b = two
    models = tmp_path / "models.toml"
    models.write_text(f'[m-q8]\nsource = "local"\npath = "{a}"\nquant = "Q8_0"\nbase = "M"\n\n'
                      f'[m-q4]\nsource = "local"\npath = "{b}"\nquant = "Q4_0"\nbase = "M"\n', encoding="utf-8")
    r = invoke("run", "m-q8", "--quants", "Q8_0,Q4_0", "--models", models, "--tasks", "discotex", "--dry-run")
    assert r.exit_code == 2 and "differ in vocabulary" in r.output and "300-token" in r.output, r.output
    sha = "ab" * 32
    models.write_text(f'[m-q8]\nsource = "local"\npath = "{a}"\nquant = "Q8_0"\nbase = "M"\nfrom_sha256 = "{sha}"\n\n'
                      f'[m-q4]\nsource = "local"\npath = "{a}"\nquant = "Q4_0"\nbase = "M"\nfrom_sha256 = "{"cd" * 32}"\n',
                      encoding="utf-8")
    r = invoke("run", "m-q8", "--quants", "Q8_0,Q4_0", "--models", models, "--tasks", "discotex", "--dry-run")
    assert r.exit_code == 2 and "made from different files" in r.output, r.output


def test_report_and_compare_refuse_a_ladder_of_two_models(tmp_path):
    from invented_data import write_discotex

    data = write_discotex(tmp_path / "d", 4)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("q8", "Q8_0"), ("q4", "Q4_K_M"))), encoding="utf-8")
    out = tmp_path / "ladder"
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--out", out)
    assert r.exit_code == 0, r.output
    table = invoke("report", out, "--models", models, "--table", "quant", "--format", "json")
    assert table.exit_code == 0 and json.loads(table.stdout)["quant_ladder"], table.output  # one model: a ladder
    results = out / "tiny-q4" / "results.json"
    doc = json.loads(results.read_text())
    doc["provenance"]["n_vocab"] = 49152  # the run of another model, listed under the same base
    results.write_text(json.dumps(doc))
    for args in (("report", out, "--table", "quant"), ("compare", out / "tiny-q8", out / "tiny-q4")):
        r = invoke(*args, "--models", models)
        assert r.exit_code == 2 and "differ in vocabulary size" in r.output and "49152" in r.output, r.output
