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


class NonFiniteError(ModelError):
    """Logits or log-probabilities that are NaN or infinite: a damaged model or a broken build."""
