"""An option no task of a run uses is refused, not recorded (tasks/uses.py), and a data error names the option as
each door writes it (tasks/data.py). API review findings:

1. ``--shot-seed`` on a run where no task draws shots (DISCOTEX's default 0 shots, ``--shots 0``, ABRICOT's
   calamita protocol) was accepted and recorded (``config.shot_seed 3``), so `compare` listed it as a setting that
   differs between two bit-identical runs. It follows the one rule of ``--shot-sampler`` and ``--protocol``: a task
   that declares it uses it only where it draws shots (the paper protocol's 3 shots: another --shot-seed draws other
   shots, docs/protocols.md); a run where none does refuses it, another names it in the 0-shot task's warnings.
2. ``data={"discotex": "/nonexist"}`` was told ``(given with data=discotex)``, a keyword the API refuses.

Fake backend, invented DISCOTEX rows, the invented ABRICOT fixture; nothing is scored."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import abricot_local as al
from abricot_local.cli import cli
from abricot_local.errors import MissingDataError, UsageError
from abricot_local.tasks import make_task, task_class
from abricot_local.tasks.options import TaskOptions
from abricot_local.tasks.uses import refuse_unused
from conftest import FIXTURE
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def refused(tasks, **given) -> str | None:
    """The refusal a run of ``tasks`` with ``given`` gets from the one rule, None when none."""
    try:
        refuse_unused([task_class(t) for t in tasks], TaskOptions(**given))
    except UsageError as err:
        return err.raw()
    return None


def test_a_shot_seed_on_a_0_shot_discotex_run_is_refused_in_each_doors_words(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    with pytest.raises(UsageError) as err:
        al.evaluate("fake", "discotex", sample=2, backend="fake", shot_seed=3, data_dir=str(data),
                    out=str(tmp_path / "o"))
    assert "shot_seed=3 is used by no task of this run (discotex draws no shots unless shots is given)" in str(err.value)
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", data, "--sample", 2,
               "--shot-seed", 3, "--out", tmp_path / "c")
    assert r.exit_code == 2 and "--shot-seed 3 is used by no task of this run (discotex draws no shots unless " \
                                "--shots is given): leave it out" in r.output, r.output
    assert not (tmp_path / "o").exists() and not (tmp_path / "c" / "results.json").exists()


def test_a_shot_seed_is_used_by_a_task_that_draws_shots_and_by_none_that_draws_none():
    assert refused(["discotex"], shots=2, shot_seed=3) is None
    assert refused(["abricot_abs"], shot_seed=7) is None  # the paper's 3 shots: drawn with it (made otherwise)
    assert refused(["abricot_abs"], shot_seed=7, protocol="paper,calamita") is None  # the paper's instance draws
    assert "abricot_abs draws no shots under protocol calamita" in refused(["abricot_abs"], shot_seed=7,
                                                                          protocol="calamita")
    assert "abricot_abs draws no shots at " in refused(["abricot_abs"], shot_seed=7, shots=0)
    assert refused(["abricot_abs", "discotex"], shot_seed=7) is None  # ABRICOT's paper shots use it


def test_a_0_shot_task_of_a_run_that_uses_it_names_it_and_runs_as_before():
    options = TaskOptions(data=(("abricot", str(FIXTURE)),), shot_seed=7, protocol="paper,calamita")
    paper, calamita, disco = (make_task(k, options) for k in ("abricot_abs", "abricot_abs@calamita", "discotex"))
    assert not any("shot_seed" in n for n in paper.option_notes)
    for task in (calamita, disco):
        assert any(f"does not apply to {task.name} ({task.name} draws no shots" in n for n in task.option_notes), \
            task.option_notes
    # built with it as given (no setting of a 0-shot task changes): a run recorded so rebuilds as it ran
    assert calamita.settings()["shot_seed"] == 7 and disco.shot_seed == 7


def test_a_run_recorded_with_a_shot_seed_and_no_shots_is_read_as_before():
    config = {"seed": 1234, "shots": 0, "shot_seed": 3, "prompt_variant": "card"}
    options = TaskOptions.from_config(config, owns=[{"seed": 1234, "shots": 0}])
    assert options.shot_seed == 3 and make_task("discotex", options).shot_seed == 3


@pytest.mark.parametrize("kind", ["missing", "a file", "empty"])
def test_a_data_folder_given_is_named_as_each_door_writes_the_option(tmp_path, kind):
    path = {"missing": tmp_path / "nonexist", "a file": tmp_path / "rows.parquet", "empty": tmp_path}[kind]
    if kind == "a file":
        path.write_bytes(b"PAR1")
    with pytest.raises(MissingDataError) as err:
        al.evaluate("fake", "discotex", sample=2, backend="fake", data={"discotex": str(path)},
                    out=str(tmp_path / "o"))
    said = str(err.value)
    assert f'(given with data={{"discotex": "{path}"}})' in said and "data=discotex" not in said, said
    r = invoke("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={path}",
               "--sample", 2, "--out", tmp_path / "c")
    assert r.exit_code == 2 and f"(given with --data discotex={path})" in r.output, r.output
