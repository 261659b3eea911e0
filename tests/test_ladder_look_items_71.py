"""A `run --quants --until-settled` ladder checks every item its looks may reach before it scores any, the reference's
run as each rung's (run/settle_sweep.py, execute.prepared's ``fits``), as a plain --until-settled run checks its bound
and as its dry run says ("a run checks every prompt before it scores any"). Before, the reference's run (a --sample n
run of the look's items) checked only those and scored them, then the rung (its plan every item to its bound) was
refused for an item outside the look. Fake backend at its default n_ctx (2048), in-process; invented DISCOTEX items,
one past the first look longer than the context window."""

from __future__ import annotations

from click.testing import CliRunner

from abricot_local.cli import cli
from invented_data import write_discotex

MODELS = ('[fq8]\nbackend = "fake"\nsource = "synthetic"\nbase = "fakebase"\nquant = "Q8_0"\n'
          '[fq4]\nbackend = "fake"\nsource = "synthetic"\nbase = "fakebase"\nquant = "Q4_K_M"\n')


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ladder_of(tmp_path, at: int = 30):
    """models.toml and a DISCOTEX folder whose item at nested position ``at`` (past the first look's 20) is longer
    than the fake backend's default context; that item's id."""
    from abricot_local.tasks import make_task
    from abricot_local.tasks.base import TaskOptions
    from abricot_local.tasks.selection import prepare

    data = write_discotex(tmp_path / "discotex", per_source=40)
    long = prepare([make_task("discotex", TaskOptions(data_dir=str(data)))], None)[0].nested()[at]
    for f in data.glob("*.tsv"):
        lines = f.read_text(encoding="utf-8").splitlines()
        f.write_text("\n".join(ln.replace("\t", "\t" + "parola " * 400, 1) if ln.startswith(long + "\t") else ln
                               for ln in lines) + "\n", encoding="utf-8")
    models = tmp_path / "models.toml"
    models.write_text(MODELS, encoding="utf-8")
    return models, data, long


def ladder(models, data, out, *more):
    return invoke("run", "fakebase", "--models", models, "--quants", "Q8_0,Q4_K_M", "--tasks", "discotex",
                  "--data-dir", data, "--until-settled", "--out", out, *more)


def test_the_reference_is_refused_up_front_for_an_item_a_later_look_reaches(tmp_path):
    """The item past look 1 that does not fit: the ladder refuses it at the reference, before any item is scored
    (no samples written, no rung begun), its plan line the look's 20 items and its error saying why an item not among
    them is checked; before, the reference scored look 1 and the rung was refused."""
    models, data, long = ladder_of(tmp_path)
    out = tmp_path / "lad"
    r = ladder(models, data, out)
    assert r.exit_code != 0
    said = r.output
    assert "run: fq8, quant Q8_0; tasks: discotex (20 items)" in said
    assert f"item {long}: the prompt is" in said and "the context window holds 2048" in said
    assert "not one of the 20 items of discotex scored now, but a later look may reach it" in said
    assert "discotex: 0/20" not in said and "fq4 against fq8" not in said
    assert not list(out.rglob("samples-*.jsonl")) and not (out / "fq4").exists()


def test_the_dry_run_names_the_item_the_run_refuses(tmp_path):
    """--dry-run of the same command names that item for each model and says a run checks every prompt before it
    scores any: the run does (the same item, before any is scored)."""
    models, data, long = ladder_of(tmp_path)
    dry = ladder(models, data, tmp_path / "lad", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.count(f"item {long}: the prompt is") == 2
    assert "a run checks every prompt before it scores any" in " ".join(dry.output.split())
    run = ladder(models, data, tmp_path / "lad")
    assert f"error: item {long}: the prompt is" in run.output and "discotex: 0/20" not in run.output


def test_an_item_no_look_reaches_is_not_checked(tmp_path, monkeypatch):
    """The same item past --max-items (no look reaches it): the ladder scores look 1, the reference's run and the
    rung's (each checks only the items its looks may reach). The sweep's closing comparison left out (not what this
    pins; it costs a second)."""
    from abricot_local.report import sweep

    monkeypatch.setattr(sweep, "compared", lambda *a, **k: "")
    models, data, long = ladder_of(tmp_path)
    r = ladder(models, data, tmp_path / "lad", "--max-items", 20)
    assert r.exit_code == 0, r.output
    assert long not in r.output and "fq4 against fq8" in r.output
    assert (tmp_path / "lad" / "fq8" / "samples-discotex.jsonl").is_file()
    assert (tmp_path / "lad" / "fq4" / "samples-discotex.jsonl").is_file()
