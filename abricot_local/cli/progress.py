"""Progress on stderr: tqdm bars on a terminal, plain lines at a steady interval off one."""

from __future__ import annotations

import os
import sys

from abricot_local.cli.app import echo


def progress():
    """(callback(task, done, total[, note]), close()) for the current stderr, made at the first progress (the
    console's modules load then: a run refused before it scores loads none of them)."""
    made: list = []

    def update(task: str, done: int, total: int, note: str = "") -> None:
        if not made:
            made.extend(_progress())
        made[0](task, done, total, note)

    def close() -> None:
        if made:
            made[1]()

    return update, close


def _progress():
    from abricot_local.console import ProgressLine, task_bars

    if not sys.stderr.isatty():
        lines = ProgressLine(float(os.environ.get("ABRICOT_PROGRESS_SECONDS", "30")))

        def plain(task: str, done: int, total: int, note: str = "") -> None:
            text = lines.update(task, done, total, note)
            if text:
                echo(text, err=True)

        return plain, lambda: None

    from tqdm import tqdm

    return task_bars(lambda **kw: tqdm(unit="item", file=sys.stderr, leave=True, **kw))
