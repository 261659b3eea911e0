"""Three leftovers of a hobbyist's review (issue 68, F8): `kld` of runs of two different models is refused from their
records before any model file is opened, in the dry run and the run alike (quants of one model still pass); the
ladder's "which quant to keep" line says the next bound of a rung a --until-settled rule left open, not "no figure";
a quantize refused for lack of disk leaves no folder it made behind. A fake-backend pair of 2 invented DISCOTEX
items, rungs made by hand, a tiny GGUF: in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis.equivalence import UNDEFINED, UNSETTLED, Equivalence
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.analysis.sequential import Look
from abricot_local.analysis.settled import SettledVerdict
from abricot_local.cli import cli
from abricot_local.report import ladder as rows
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two quants of one fake model (base Tiny), one item each (--limit 1), made once."""
    root = tmp_path_factory.mktemp("kld_models")
    data = write_discotex(root / "d", 4)
    models = root / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("f16", "F16"), ("q8", "Q8_0"))), encoding="utf-8")
    out = root / "ladder"
    r = invoke("run", "tiny-f16", "--models", models, "--quants", "F16,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--limit", 1, "--out", out)
    assert r.exit_code == 0, r.output
    return out


def _model(folder: Path, **fields) -> None:
    """The run's record says its model is another (``n_vocab`` under provenance, the rest under model)."""
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    if "n_vocab" in fields:
        doc["provenance"]["n_vocab"] = fields.pop("n_vocab")
    doc["model"].update(fields)
    path.write_text(json.dumps(doc))


def _copy(pair, tmp_path) -> tuple[Path, Path]:
    out = tmp_path / "ladder"
    shutil.copytree(pair, out)
    return out / "tiny-f16", out / "tiny-q8"


def test_kld_of_two_models_is_refused_from_their_records_before_any_model_is_opened(pair, tmp_path, monkeypatch):
    """SmolLM2 (llama) against gemma (gemma3): the dry run planned a pass that "fits", the run loaded both and failed
    while scoring. Now both refuse at once, by one rule, naming each model's base and architecture."""
    from abricot_local.run import kld

    ref, other = _copy(pair, tmp_path)
    _model(ref, architecture="llama", base="smollm2-135m")
    _model(other, architecture="gemma3", base="gemma-3-270m", name="gemma-3-270m-q8_0", n_vocab=262144)

    def opened(*_a, **_k):
        raise AssertionError("a model was looked for")

    monkeypatch.setattr(kld, "_model", opened)
    for dry in (("--dry-run",), ()):
        r = invoke("kld", ref, other, "--limit", 1, *dry)
        assert r.exit_code == 2, r.output
        said = " ".join(r.output.split())
        assert "are not quants of one model: their models differ in architecture" in said, said
        assert "llama" in said and "gemma3" in said and "(base smollm2-135m)" in said and "base gemma-3-270m" in said
        assert "give a reference and runs of quants of its model" in said
    assert not list(ref.parent.rglob("kld.json"))
    _model(other, architecture="llama")  # the same architecture, another vocabulary: not one model's either
    r = invoke("kld", ref, other, "--dry-run")
    assert r.exit_code == 2 and "differ in vocabulary size" in r.output, r.output


def test_quants_of_one_model_still_pass_whatever_their_registry_base(pair, tmp_path):
    """What tells quants of one model is what their files share (architecture, vocabulary), not a name: two
    registries may give one model's quants other `base` names."""
    ref, other = _copy(pair, tmp_path)
    _model(ref, architecture="llama")
    _model(other, architecture="llama", base="another-name")
    r = invoke("kld", ref, other, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    assert [p["runs"] for p in json.loads(r.stdout)["passes"]] == [[str(other)]]


def _rule_rung(next_look: int | None, max_items: int | None, fixed_n_items: int | None = None) -> Rung:
    look = Look("q", 3, 40, 600, 0.9, 0.2, UNSETTLED, 0.0, (-0.3, 0.3), (-0.3, 0.3))
    fixed_n = Equivalence("Q2_K", "F16", "discotex", "accuracy", 0.2, 40, 0.0, (-0.3, 0.3),
                          UNSETTLED if fixed_n_items else UNDEFINED, items=fixed_n_items, total=600)
    return Rung("fakebase", "discotex", "q2_k", "Q2_K", "f16", None, None, n=40, verdict=fixed_n,
                settled=SettledVerdict(look, 3, "line", next_look, max_items))


def test_the_keep_line_says_the_rules_next_bound_of_a_rung_it_left_open():
    """`report` of a `run --quants --until-settled --margin 0.2` whose Q2_K stayed open at its last look (40 items):
    the run printed `--max-items 80 --resume`; the keep line said "no figure of the items that would settle it"."""
    ref = Rung("fakebase", "discotex", "f16", "F16", "", None, None, n=40)
    (c,) = choices([ref, _rule_rung(80, 80)])
    from abricot_local.cli.options import flags
    from abricot_local.errors import render

    line = render(rows.choice_text(c), flags)  # as `report` says it: the command line's words alone
    assert "no figure" not in line
    assert line.endswith("Q2_K (whether within 0.2: not settled over 40 items, the rule's verdict at look 3 of 3; the "
                         "rule's next look is at 80 items: the run grown by --resume --until-settled --max-items 80)"), line
    (j,) = [d["choice"] for d in rows.records([ref, _rule_rung(80, 80)]) if "choice" in d]
    assert [(s["next_look"], s["max_items"]) for s in j["cannot_tell_yet"]] == [(80, 80)]
    # a rule that has not stopped: its own next look; beside it compare's fixed-n figure, said to be one
    line = rows.choice_text(choices([ref, _rule_rung(60, None, fixed_n_items=101)])[0])
    assert line.endswith("the rule's next look is at 60 items; ~101 items would settle it at a fixed n)"), line
    # nothing known of what settles it: said so, as before
    assert rows.choice_text(choices([ref, _rule_rung(None, None)])[0]).endswith(
        "no figure of the items that would settle it)")


def test_a_quantize_refused_for_disk_removes_only_the_folders_it_made(tmp_path, monkeypatch):
    from abricot_local import memory
    from abricot_local.errors import NoSpaceError
    from abricot_local.models.quantize import make_ladder
    from tiny_llama import write_tiny

    src = write_tiny(tmp_path / "m-f16.gguf")
    monkeypatch.setattr(memory, "free_disk", lambda folder: (Path(folder), 0))
    with pytest.raises(NoSpaceError):
        make_ladder(str(src), "Q8_0", out=str(tmp_path / "new" / "deep"))
    assert not (tmp_path / "new").exists()  # both folders it made, left empty: gone
    kept = tmp_path / "there"
    kept.mkdir()
    (tmp_path / "made").mkdir()
    (tmp_path / "made" / "mine.txt").write_text("x")
    for out in (kept, tmp_path / "made" / "sub"):
        with pytest.raises(NoSpaceError):
            make_ladder(str(src), "Q8_0", out=str(out))
    assert kept.is_dir() and not list(kept.iterdir())  # a folder that was there stays
    assert [p.name for p in (tmp_path / "made").iterdir()] == ["mine.txt"]  # its own folder gone, the user's kept
