"""What the registered tasks are and whether their data is here (for `tasks` and `doctor`)."""

from __future__ import annotations

from abricot_local.errors import AbricotError


def task_catalog(data: tuple[tuple[str, str], ...] = (), data_dir: str | None = None) -> list[dict]:
    """One record per registered task; nothing is downloaded (item counts only where the
    data is here)."""
    from abricot_local.tasks import _registry, all_task_names, make_task
    from abricot_local.tasks.base import TaskOptions

    options = TaskOptions(data=data, data_dir=data_dir, allow_download=False)
    rows = []
    for name in all_task_names():
        rec = {"name": name, "plugin": _registry()[name].value, "group": None, "description": "",
               "metrics": [], "primary_metric": "", "chance": {}, "references": [], "items": None,
               "data_path": None, "data_note": "", "options": [], "prompt_variants": [], "choices": {}}
        try:
            task = make_task(name, options)
        except AbricotError as err:  # a plugin that does not load, is outdated or declares what does not hold
            rec["error"] = str(err)
            rows.append(rec)
            continue
        rec.update(group=task.group, description=task.description, metrics=list(task.metric_names),
                   primary_metric=task.primary_metric, chance=dict(task.chance), options=list(task.uses),
                   prompt_variants=list(task.prompt_variants),
                   choices={k: v for k, v in (("prompt_variant", list(task.prompt_variants)),
                                              ("protocol", [p.name for p in task.protocols])) if v},
                   references=[{"source": r.source, "model": r.model, "metric": r.metric, "value": r.value}
                               for r in task.references()])
        path, note = task.data_status()
        rec["data_path"], rec["data_note"] = path, ("" if path else f"{note}")
        if path:
            try:
                rec["items"] = len(task.items())
            except AbricotError as err:
                rec["data_note"] = f"unreadable: {err}"
        rows.append(rec)
    return rows
