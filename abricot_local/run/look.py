"""What a user looks at without a run: how a tokenizer maps a task's answer labels to tokens
(`labels`, a vocabulary-only load), and task data pulled into the cache (`data pull`)."""

from __future__ import annotations

from pathlib import Path

from abricot_local.models import fetch
from abricot_local.models.given import Given
from abricot_local.models.locate import open_model
from abricot_local.tasks.selection import prepare
from abricot_local.tasks import make_task, task_names
from abricot_local.tasks.base import TaskOptions


def pull_data(task: str) -> list[tuple[Path, str]]:
    """Download a task's (or group's) data into the user cache; (path, sha256) of each file."""
    from abricot_local.tasks import pull_data as pull

    return [(Path(p), fetch.sha256_file(Path(p))) for p in pull(task)]


def pull_test_data() -> list[tuple[Path, str]]:
    """Download every file the test suite reads where it looks (`data pull --tests`); (path, sha256)."""
    from abricot_local.tasks.test_data import pull_test_data as pull

    return [(Path(p), fetch.sha256_file(Path(p))) for p in pull()]


def label_map(model: str, given: Given, task_name: str, task_options: TaskOptions,
              models_file: str | None = None, model_dirs: tuple[str, ...] = ()) -> dict:
    """How the first item's continuations map to token ids (vocab-only load)."""
    names = task_names(task_name)
    item = prepare([make_task(names[0], task_options)], 1)[0].items[0]
    opened = open_model(model, Given(given.backend, {**given.values, "vocab_only": True}),
                        models_file=models_file, model_dirs=model_dirs)
    be = opened.load(force=True)  # vocab only: no weights are loaded
    try:
        sch = be.schedule(item.request())
        rows = []
        for cont, seq, c in zip(item.continuations, sch.seqs, sch.ctx_lens):
            ids = list(seq[c:])
            rows.append({"continuation": cont, "ids": ids, "pieces": [be.piece(t) for t in ids]})
        return {"model": model, "task": names[0], "item": item.id, "n_context_tokens": min(sch.ctx_lens),
                "prefix_len": sch.prefix_len, "trunk_len": sch.trunk_len, "fast_path": sch.fast_path,
                "choices": rows}
    finally:
        be.close()
