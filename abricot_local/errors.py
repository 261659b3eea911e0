"""Errors a user can act on. The CLI prints ``str(err)`` and exits with ``err.exit_code``."""

from __future__ import annotations


class AbricotError(Exception):
    """Base class: every expected failure (bad input, missing file, offline...)."""

    exit_code = 2


class UsageError(AbricotError):
    """An option or argument that cannot work as given."""


class ModelError(AbricotError):
    """A model file that is missing, unreadable, not GGUF or does not load."""


class UnknownModelError(ModelError):
    """An alias that is neither in the registry nor a path to a .gguf file."""


class DataError(AbricotError):
    """A data file or folder that is missing, unreadable or malformed."""


class TaskError(AbricotError):
    """An unknown task name or a task that cannot be built as asked."""


class ContextOverflowError(AbricotError):
    """A prompt that does not fit in the context window."""


class DownloadError(AbricotError):
    """A download that failed, was refused, or is impossible offline."""


class IntegrityError(DownloadError):
    """A file whose size or SHA-256 differs from the expected one."""


class ResultsError(AbricotError):
    """An output folder that cannot be written, resumed or checked."""


class NoSpaceError(ResultsError):
    """A write refused because the disk (or the user's quota) is full: "no space left on device writing FILE"."""


class NonFiniteError(ModelError):
    """Logits or log-probabilities that are NaN or infinite: a damaged model or a broken build."""


class MissingDataError(DataError):
    """Task data that is not here, in at most three short lines: what is missing (and where it
    was looked for), the one command that gets it, the offline alternative."""

    def __init__(self, what: str, get: str | None, offline: str, *, task: str = "", where: str = "",
                 reason: str = ""):
        self.what, self.get, self.offline = what, get, offline
        self.task, self.where, self.reason = task, where, reason  # for joining several into one
        super().__init__(what)

    def advice(self) -> str:
        """The last two lines as one: "get it: CMD; offline: HOW"."""
        return "; ".join(([f"get it: {self.get}"] if self.get else []) + [f"offline: {self.offline}"])

    def one_line(self) -> str:
        return f"{self.what}; {self.advice()}"

    def __str__(self) -> str:
        return "\n".join([self.what, *([f"  get it:  {self.get}"] if self.get else []), f"  offline: {self.offline}"])
