"""A run records which plugin made each task (`tasks.<name>.plugin`: its entry point, its distribution's name and
version), and a reader without that plugin says which one to install; `report` of such a run does not title the
published values it prints as absent. The plugin is a distribution made in tmp_path (dist-info and module) put on
sys.path and registered in-process beside the shipped tasks; the fake backend scores it."""

from __future__ import annotations

import json
import shutil
import textwrap
from importlib.metadata import EntryPoint, entry_points

import pytest
from click.testing import CliRunner

from abricot_local import tasks
from abricot_local.analysis.runs import require_tasks
from abricot_local.analysis.loading import load_run
from abricot_local.cli import cli
from abricot_local.errors import TaskError
from abricot_local.record import read_run, to_json
from abricot_local.record.schema import TaskPlugin

PACKAGE, VERSION, MODULE = "prov-toy-plugin", "0.3.1", "prov_toy_plugin"
TASK = """
    from abricot_local.tasks.base import DataSpec, Reference
    from test_runner import ToyTask  # test_runner's toy plugin task, renamed and given a published row


    class ProvTask(ToyTask):
        name = "provtoy"
        data = DataSpec(key="provtoy", kind="file", files=("provtoy*.txt",), how="give --data provtoy=FILE")

        def references(self):
            return (Reference("Prov paper", "prov-model", self.name, "accuracy", 0.5),)
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """``register(in_process=False)``: the plugin's task registered beside the shipped ones (its entry point
    read from the distribution's metadata, or made in-process: no distribution); ``forget()``: gone again.
    Returns (register, forget, data file)."""
    shipped = dict(tasks._registry())  # read (and cached) before the plugin is on sys.path: no other test sees it
    site = tmp_path / "site"
    info = site / f"{MODULE}-{VERSION}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{tasks.GROUP}]\nprovtoy = {MODULE}:ProvTask\n", encoding="utf-8")
    (site / f"{MODULE}.py").write_text(textwrap.dedent(TASK), encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    data = tmp_path / "provtoy.txt"
    data.write_text("a bb ccc dddd ee f ggg hh", encoding="utf-8")

    def use(eps):
        monkeypatch.setattr(tasks, "_registry", lambda: eps)
        tasks.groups.cache_clear()

    def register(in_process: bool = False):
        ep = (EntryPoint(name="provtoy", value=f"{MODULE}:ProvTask", group=tasks.GROUP) if in_process else
              next(e for e in entry_points(group=tasks.GROUP) if e.name == "provtoy"))
        use({**shipped, "provtoy": ep})

    yield register, lambda: use(shipped), data
    tasks.groups.cache_clear()


def _run(tmp_path, data, *extra, model: str = "fake") -> tuple:
    out = tmp_path / "run"
    r = CliRunner().invoke(cli, ["run", model, "--backend", "fake", "--tasks", "provtoy", "--data",
                                 f"provtoy={data}", "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_a_plugin_task_records_its_plugin_and_a_reader_without_it_names_it(tmp_path, plugin):
    register, forget, data = plugin
    register()
    out, doc = _run(tmp_path, data)
    ep = next(e for e in entry_points(group=tasks.GROUP) if e.name == "provtoy")
    assert doc["tasks"]["provtoy"]["plugin"] == {"entry_point": ep.value, "package": ep.dist.metadata["Name"],
                                                 "version": ep.dist.version}
    record = read_run(out)
    assert record.tasks["provtoy"].plugin == TaskPlugin(entry_point=f"{MODULE}:ProvTask", package=PACKAGE,
                                                        version=VERSION)
    assert json.loads(to_json(record)) == doc  # the typed field reads and writes back as written

    forget()  # a reader without the plugin
    named = f"recorded by plugin {PACKAGE} {VERSION} ({MODULE}:ProvTask): install it to read this run"
    r = CliRunner().invoke(cli, ["check", str(out)])
    assert r.exit_code == 2 and "unknown task 'provtoy'" in r.output and named in r.output, r.output
    assert f"pip install '{PACKAGE}=={VERSION}'" in r.output
    with pytest.raises(TaskError, match=f"unknown task 'provtoy' in {out}: recorded by plugin {PACKAGE}"):
        load_run(out).task("provtoy").instance()  # compare's, report --verify's reading of a task
    twin = shutil.copytree(out, tmp_path / "twin")
    for args in (["compare", str(out), str(twin)], ["report", str(out), "--verify"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code != 0 and named in r.output, (args, r.output)


def test_a_shipped_task_records_no_plugin_and_an_older_run_is_read_as_written(tmp_path, plugin):
    register, forget, data = plugin
    register()
    out, doc = _run(tmp_path, data)
    from abricot_local.run.record import task_plugin

    assert task_plugin("provtoy") is not None
    assert all(task_plugin(name) is None for name in tasks.all_task_names() if name != "provtoy")  # shipped

    older = dict(doc, tasks={k: {f: v for f, v in e.items() if f != "plugin"} for k, e in doc["tasks"].items()})
    (out / "results.json").write_text(json.dumps(older), encoding="utf-8")  # a run written before `plugin`
    record = read_run(out)
    assert record.tasks["provtoy"].plugin is None and json.loads(to_json(record)) == older
    require_tasks(record, out)  # registered here: nothing to say
    forget()
    with pytest.raises(TaskError, match="the run records no plugin for it") as err:
        require_tasks(record, out)
    assert f"written by abricot-local {doc['provenance']['abricot_local']}" in str(err.value)


def test_an_in_process_entry_point_records_itself_alone(tmp_path, plugin):
    register, forget, data = plugin
    register(in_process=True)
    out, doc = _run(tmp_path, data)
    assert doc["tasks"]["provtoy"]["plugin"] == {"entry_point": f"{MODULE}:ProvTask", "package": None, "version": None}
    forget()
    with pytest.raises(TaskError, match="an entry point of no installed package: register that class"):
        require_tasks(read_run(out), out)


def test_report_without_the_plugin_titles_the_recorded_published_values_as_recorded(tmp_path, plugin):
    register, forget, data = plugin
    register()
    models = tmp_path / "models.toml"
    models.write_text('[prov-fake]\nbackend = "fake"\nreproduces = "Prov paper: prov-model"\n', encoding="utf-8")
    out, doc = _run(tmp_path, data, "--models", str(models), model="prov-fake")
    assert [c["task"] for c in doc["published"]["checks"]] == ["provtoy"]
    with_it = CliRunner().invoke(cli, ["report", str(out)]).output
    assert with_it.splitlines()[0] == "Runs and published results (value [95% CI])"
    forget()
    text = CliRunner().invoke(cli, ["report", str(out)]).output
    head = text.splitlines()[0]
    assert "no published results" not in head and "provtoy" in head and "recorded" in head, head
    assert "Did the run reproduce the published value?" in text and "published 0.50" in text
