"""abricot-local: Italian benchmark tasks (ABRICOT, DISCOTEX) on local GGUF models via llama.cpp.

Importing this package never loads llama.cpp; only ``abricot_local.backends.llama_cpp.backend`` does.
"""

__version__ = "0.1.0"

# the Python API (abricot_local/api/, docs/python.md), loaded on first use: `import abricot_local`
# loads neither llama.cpp nor pandas
__all__ = ["evaluate", "plan", "load_run", "load_runs", "compare", "merge", "check", "Run", "Comparison", "Plan",
           "Check", "AbricotWarning", "SweepError", "AbricotError", "__version__"]


def __getattr__(name: str):
    if name == "AbricotError":
        from abricot_local.errors import AbricotError

        return AbricotError
    if name in __all__:
        return getattr(_whole(_api), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _api():
    from abricot_local import api

    return api


def _whole(load):
    """``load()`` with a first Ctrl-C held until it returns, then raised: the API's first import (numpy, scipy, this
    project's modules: a fraction of a second) is never cut by one Ctrl-C. A KeyboardInterrupt inside an import
    leaves the submodules it finished in sys.modules under a parent Python took out, and every later call in that
    session fails on them (numpy: a RecursionError, "cannot load module more than once per process"). A second
    Ctrl-C while the first is held is the user insisting: it is raised at once, through the handler there was
    before (KeyboardInterrupt), cutting the import, with that risk: the session's later calls may fail until the
    interpreter (a notebook's kernel) is restarted. Only in the main thread, under a SIGINT handler set from Python
    (the default one: KeyboardInterrupt); an ignored SIGINT stays ignored."""
    import signal
    import threading

    before = signal.getsignal(signal.SIGINT)
    if before in (None, signal.SIG_IGN) or threading.current_thread() is not threading.main_thread():
        return load()
    held = []

    def hold(signum, frame):
        if not held:
            held.append(frame)
            return
        held.clear()  # the second: raised now, not again once the load returns
        signal.signal(signal.SIGINT, before)
        _interrupt(before, frame)

    signal.signal(signal.SIGINT, hold)
    try:
        return load()
    finally:
        signal.signal(signal.SIGINT, before)
        if held:
            _interrupt(before, held[0])  # the default handler raises KeyboardInterrupt here, the import whole


def _interrupt(handler, frame) -> None:
    """SIGINT as ``handler`` (the one :func:`_whole` found) takes it: called (the default raises
    KeyboardInterrupt), or, for SIG_DFL, sent again (the process ends as SIGINT ends it)."""
    import signal

    if callable(handler):
        handler(signal.SIGINT, frame)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


def __dir__():
    return sorted({*globals(), *__all__})
