"""Progress on stderr: tqdm bars on a terminal, plain lines at a steady interval off one."""

from __future__ import annotations

import os
import sys

from abricot_local.cli.app import echo


def progress():
    """(callback(task, done, total), close()) for the current stderr."""
    from abricot_local.console import ProgressLine

    bars: dict = {}
    if not sys.stderr.isatty():
        lines = ProgressLine(float(os.environ.get("ABRICOT_PROGRESS_SECONDS", "30")))

        def plain(task: str, done: int, total: int) -> None:
            text = lines.update(task, done, total)
            if text:
                echo(text, err=True)

        return plain, lambda: None

    def bar(task: str, done: int, total: int) -> None:
        from tqdm import tqdm

        b = bars.get(task)
        if b is None:
            b = bars[task] = tqdm(total=total, desc=task, unit="item", file=sys.stderr, leave=True)
        b.n = done
        b.refresh()

    def close() -> None:
        for b in bars.values():
            b.close()
        bars.clear()

    return bar, close
