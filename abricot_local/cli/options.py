"""Options several commands share: the task options and the backend options, and turning
their values into the library's option objects."""

from __future__ import annotations

import click

from abricot_local.backends import BACKENDS, DEFAULT_BACKEND
from abricot_local.backends.engines import ENGINES
from abricot_local.core import DEFAULT_ENGINE, DEFAULT_N_BATCH, DEFAULT_N_CTX, DEFAULT_SEED
from abricot_local.errors import UsageError


def data_pairs(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for v in values:
        task, sep, path = v.partition("=")
        if not sep or not task or not path:
            raise UsageError(f"--data expects TASK=PATH, got {v!r}")
        pairs.append((task.strip().lower(), path))
    return tuple(pairs)


def _apply(f, opts):
    for o in reversed(opts):
        f = o(f)
    return f


def models_file_option(f):
    return click.option("--models", "models_file", type=click.Path(),
                        help="Extra models.toml extending the registry.")(f)


def model_dir_option(f):
    return click.option("--model-dir", "model_dirs", multiple=True, type=click.Path(), metavar="DIR",
                        help="A folder of GGUF files: MODEL may then be a file name found there (repeatable).")(f)


def data_options(f):
    return _apply(f, [
        click.option("--data", "data", multiple=True, metavar="TASK=PATH", help="Data file or folder for one task."),
        click.option("--data-dir", type=click.Path(), help="Folder holding the tasks' data files."),
    ])


def task_options(f):
    return _apply(f, [
        click.option("--tasks", "-t", default=None, help="Comma-separated tasks or groups (default: every task "
                     "whose data is here or can be fetched; `abricot-local tasks` lists them)."),
        data_options,
        click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True,
                     help="Seed for item construction, shots and bootstrap."),
        click.option("--shots", type=int, default=None, help="Few-shot examples (task default when omitted)."),
        click.option("--prompt-variant", type=click.Choice(["paper", "calamita"]), default="paper", show_default=True),
        click.option("--chat-template", is_flag=True, help="Render prompts with the model's chat template."),
    ])


def backend_options(f):
    return _apply(f, [
        click.option("--backend", default=DEFAULT_BACKEND, show_default=True,
                     help=f"Inference backend: {', '.join(BACKENDS)}."),
        click.option("--n-ctx", type=int, default=None,
                     help=f"Context window in tokens (default: the registry entry's n_ctx, else {DEFAULT_N_CTX})."),
        click.option("--n-batch", type=int, default=DEFAULT_N_BATCH, show_default=True, help="Tokens per decode call."),
        click.option("--threads", type=int, default=None, help="CPU threads (default: all cores)."),
        click.option("--n-gpu-layers", type=int, default=-1, show_default=True, help="-1: all layers if the build can offload."),
        click.option("--main-gpu", type=int, default=0, show_default=True),
        click.option("--tensor-split", default="", help="Comma-separated proportions across GPUs."),
        click.option("--flash-attn", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True),
        click.option("--extra-bufts", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
                     help="llama.cpp's repacked CPU weights (auto: off on AMX builds, where they crash). "
                     "off: the plain kernels an RPC server's CPU uses."),
        click.option("--rpc", default="", metavar="HOST:PORT[,HOST:PORT]",
                     help="llama.cpp RPC servers (abricot-local rpc-server) whose devices take layers."),
        click.option("--engine", type=click.Choice(list(ENGINES)), default=DEFAULT_ENGINE, show_default=True,
                     help=f"Evaluation engine. {', '.join(n for n, e in ENGINES.items() if e.exact)}: identical "
                     f"numbers. {', '.join(n for n, e in ENGINES.items() if not e.exact)} (for GPUs): several "
                     "items per decode; agrees only within a measured tolerance."),
        click.option("--parallel", type=int, default=None, help="batched: most items per decode "
                     "(default n_ctx/256, 1-16; each group also fits in --n-ctx). 1 = prefix's numbers."),
        models_file_option,
        model_dir_option,
        click.option("--verbose", is_flag=True, help="Show llama.cpp's own log."),
    ])


BACKEND_KEYS = ("n_batch", "threads", "n_gpu_layers", "main_gpu", "flash_attn", "extra_bufts", "engine", "parallel",
                "verbose")


def backend_opts(kw: dict, *, vocab_only: bool = False):
    """The chosen backend's own options from the CLI values (one it lacks is an error)."""
    from abricot_local.backends import backend_options as make

    try:
        split = tuple(float(x) for x in kw["tensor_split"].split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--tensor-split expects numbers like 3,1; got {kw['tensor_split']!r}") from None
    values = {k: kw[k] for k in BACKEND_KEYS}
    values |= {"n_ctx": kw["n_ctx"] or DEFAULT_N_CTX, "tensor_split": split, "vocab_only": vocab_only,
               "seed": kw["seed"], "rpc": rpc_servers(kw.get("rpc"))}
    return make(kw["backend"], values)


def rpc_servers(spec: str | None) -> tuple[str, ...]:
    if not spec:
        return ()
    from abricot_local.backends import rpc

    rpc.require()  # a build without RPC: one line with the reinstall command
    return rpc.parse_endpoints(spec)


def task_opts(kw: dict):
    from abricot_local.tasks.base import TaskOptions

    return TaskOptions(
        data=data_pairs(kw["data"]), data_dir=kw["data_dir"], seed=kw["seed"], shots=kw["shots"],
        prompt_variant=kw["prompt_variant"], chat_template=kw["chat_template"],
    )
