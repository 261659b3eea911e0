"""Whether a task's data is, byte for byte, the release its published rows were made on (``DataSpec.release``:
the SHA-256 of each of its files). The one rule behind both things a run on other data gets: a warning (`run`
says it as it begins and records it in the task's ``warnings``; lm-eval's door logs it: :func:`notes`) and, in its
published verdict, a difference from how the rows were made, so no row is judged on it (``not comparable: made
otherwise: data FILE is not the release ...``: :func:`differences`, read from the data files a run records, by
analysis/baselines.py). A task that pins no release (no published rows, or none pinned) gets neither.
"""

from __future__ import annotations

from typing import Sequence

from abricot_local.errors import AbricotError


def differences(release: Sequence[str], files: Sequence) -> tuple[str, ...]:
    """Each of ``files`` (anything with ``path`` and ``sha256``: a task's data files, as a run records them) whose
    SHA-256 is none of ``release``'s, as ``data FILE is not the release (sha256 X..., release Y...)``; none where
    ``release`` is empty, or no file is recorded (a record that names none cannot say)."""
    if not release:
        return ()
    shown = ", ".join(f"{sha[:12]}..." for sha in release)
    return tuple(f"data {f.path} is not the release (sha256 {str(f.sha256)[:12]}..., release {shown})"
                 for f in files if f.sha256 not in release)


def notes(task, files: Sequence | None = None) -> tuple[str, ...]:
    """The warning of each data file of ``task`` (``files``: as recorded; None: its ``data_files()``, its data not
    here: none) that is not the release: :func:`differences`, what follows, and how to give the release."""
    release = task.data.release
    if not release:
        return ()
    if files is None:
        try:
            files = task.data_files()
        except AbricotError:
            return ()
    return tuple(f"{d}: the published rows were made on the release, so a published verdict on this data says not "
                 f"comparable (the release: {task.data.how})" for d in differences(release, files))
