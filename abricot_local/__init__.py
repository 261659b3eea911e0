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
    """``load()`` with Ctrl-C held until it returns, then raised: the API's first import (numpy, scipy, this
    project's modules) is never cut. A KeyboardInterrupt inside an import leaves the submodules it finished in
    sys.modules under a parent Python took out, and every later call in that session fails on them (numpy: a
    RecursionError, "cannot load module more than once per process"). Only in the main thread, under a SIGINT
    handler set from Python (the default one: KeyboardInterrupt)."""
    import signal
    import threading

    before = signal.getsignal(signal.SIGINT)
    if before is None or threading.current_thread() is not threading.main_thread():
        return load()
    held = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        return load()
    finally:
        signal.signal(signal.SIGINT, before)
        if held and callable(before):
            before(signal.SIGINT, held[0])  # the default handler raises KeyboardInterrupt here, the import whole
        elif held and before == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


def __dir__():
    return sorted({*globals(), *__all__})
