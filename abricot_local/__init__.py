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
        from abricot_local import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
