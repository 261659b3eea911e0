"""`tasks` (the registered tasks and their data) and `data pull`."""

from __future__ import annotations

import click

from abricot_local.cli.app import cli, echo
from abricot_local.cli.options import data_options


@cli.command()
@data_options
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def tasks(data: tuple[str, ...], data_dir: str | None, as_json: bool) -> None:
    """List the tasks (plugins included) and groups: items, metrics, published references, data."""
    from abricot_local.cli.options import flags
    from abricot_local.console.listings import json_text, tasks_text
    from abricot_local.run.request import task_options
    from abricot_local.tasks.catalog import task_catalog

    given = task_options({"data": data, "data_dir": data_dir})
    rows = task_catalog(given.data, given.data_dir)
    if as_json:  # its texts in this command's flags as it is built (json_text), never rendered over the JSON
        echo(json_text(rows, flags), rendered=True)
    else:
        echo(tasks_text(rows))


@cli.group()
def data() -> None:
    """Task data: download into the user cache."""


@data.command("pull")
@click.argument("task", required=False)
@click.option("--tests", is_flag=True,
              help="Every file the test suite reads (both releases, DisCoTEX's TED train file, llama.cpp's "
                   "vocabulary-only GGUFs), where the tests look: then the suite runs offline.")
def data_pull(task: str | None, tests: bool) -> None:
    """Download TASK's (or a group's) data into the user cache, verifying SHA-256 (`tasks` lists them)."""
    from abricot_local.errors import UsageError
    from abricot_local.run import look

    if bool(task) == tests:
        raise UsageError("data pull: give a TASK (`abricot-local tasks` lists them) or --tests, not both"
                         if tests else "data pull: give a TASK (`abricot-local tasks` lists them) or --tests")
    for path, sha in (look.pull_test_data() if tests else look.pull_data(task)):
        echo(f"{path}  sha256 {sha}")
