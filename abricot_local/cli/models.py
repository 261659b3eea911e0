"""`models`, `pull`, `doctor`, `labels`: the registry and the models on this machine, downloads,
this machine, a tokenizer's labels."""

from __future__ import annotations

import click

from abricot_local.cli.app import cli, echo, say
from abricot_local.cli.options import backend_subset, model_dir_option, models_file_option, task_settings


@cli.command()
@click.option("--local", "local", is_flag=True, help="List every GGUF on this machine (Ollama, LM Studio, the "
              "Hugging Face cache, llama.cpp's cache, --model-dir) and the registry alias each one is.")
@click.option("--paths", is_flag=True, help="Each model on this machine and its file's path (the embedded model's: "
              "where it is assembled on first use), for a models.toml `path` or a TOML entry; with --local, every GGUF.")
@models_file_option
@model_dir_option
def models(local: bool, paths: bool, models_file: str | None, model_dirs: tuple[str, ...]) -> None:
    """List the registry's models (size, licence, gated, the file when it is on this machine),
    or with --local the models other tools keep here; --paths: their files' paths."""
    from abricot_local.console.listings import gib, local_models_table, models_table, paths_table
    from abricot_local.models.registry import load_registry
    from abricot_local.models.sources import gated_text, source_of
    from abricot_local.models.pypi import missing_placed
    from abricot_local.report.safe import visible

    registry = load_registry(models_file)
    from abricot_local.models.local import local_models

    if paths:
        rows = local_models(registry, model_dirs, hash_new=False)
        echo(paths_table([r for r in rows if local or r.alias]))
        for alias, spec, placed in missing_placed(registry):  # a file `run` takes from where it is not yet
            echo(f"{visible(alias)} ({visible(source_of(spec).origin(spec))}: not here; `run` takes its GGUF file put "
                 f"at this path)\n  {visible(str(placed))} (missing)")
        return
    if local:
        from abricot_local.models import stores

        rows = local_models(registry, model_dirs, progress=say)
        echo(local_models_table(rows))
        for why in stores.refused():  # a store plugin whose models are not listed: why
            echo(f"plugin entry not run: {why}")
        return
    here: dict[str, str] = {}  # alias -> where its file comes from: the same set as `models --local`
    for r in local_models(registry, model_dirs, hash_new=False):
        if r.alias and not r.problem:
            here.setdefault(r.alias, r.source + (" (assembled on first use)" if r.note else ""))
    rows = []
    for alias, spec in sorted(registry.items()):
        where = here.get(alias, "-") if source_of(spec).has_file else "(synthetic: no file)"
        rows.append((alias, spec.params or "", spec.quant or "", gib(spec.approx_bytes), spec.license or "",
                     gated_text(spec), where, spec.reproduces or ""))
    echo(models_table(rows))


@cli.command()
@click.argument("alias")
@models_file_option
def pull(alias: str, models_file: str | None) -> None:
    """Download a registry model into the Hugging Face cache and verify it."""
    from abricot_local.models.locate import resolve_model_ref

    ref = resolve_model_ref(alias, models_file=models_file, notify=say)
    echo(f"{ref.alias or alias}: {ref.path}  sha256 {ref.sha256}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print every fact as JSON.")
@models_file_option
def doctor(as_json: bool, models_file: str | None) -> None:
    """What this machine and each backend can do (its build: CPU features, GPU offload; memory),
    and whether each task's data is here."""
    from abricot_local.cli.options import flags
    from abricot_local.console.listings import doctor_text, json_text
    from abricot_local.models import doctor as doc, stores
    from abricot_local.models.registry import load_registry
    from abricot_local.tasks import refused
    from abricot_local.tasks.catalog import task_catalog

    facts = doc.gather(load_registry(models_file))
    facts["tasks"] = [{k: r.get(k) for k in ("name", "group", "items", "data_path", "data_note", "error")}
                      for r in task_catalog()]
    # a shipped task's name or store's prefix taken, a name two plugins register, a store plugin that cannot be used
    facts["plugins_not_run"] = [*refused(), *stores.refused()]
    if as_json:  # its texts in this command's flags as it is built (json_text), never rendered over the JSON
        echo(json_text(facts, flags), rendered=True)
    else:
        echo(doctor_text(facts))


@cli.command()
@click.argument("model")
@click.option("--task", "task_name", default=None, help="Task whose first item is shown (default: the first registered).")
@click.option("--tasks", "-t", "tasks_given", default=None, hidden=True)  # `run`'s flag: refused, naming --task
@task_settings
@backend_subset("n_ctx", "verbose")  # a vocabulary-only load: the context's size (a long item refused) and the log
def labels(model: str, task_name: str | None, tasks_given: str | None, **kw) -> None:
    """Show how MODEL's tokenizer maps the first item's answer labels to tokens (a vocabulary-only load: only
    --n-ctx and --verbose of the backend's options)."""
    from abricot_local.console.listings import labels_text
    from abricot_local.errors import UsageError
    from abricot_local.run import look
    from abricot_local.run.request import request_of

    if tasks_given is not None:
        raise UsageError(f"labels shows one task's first item: give it as --task {tasks_given}, not --tasks")
    r = request_of(model, kw, backend=kw["backend"], models_file=kw["models_file"], model_dirs=kw["model_dirs"])
    if not task_name:
        from abricot_local.tasks.selection import select_tasks

        task_name = select_tasks(None, r.task_options)[0][0].name
    info = look.label_map(model, r.given, task_name, r.task_options, r.models_file, r.model_dirs)
    echo(labels_text(info))
