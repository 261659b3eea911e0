"""lm-evaluation-harness's model ``abricot-local``: any lm-eval task on a GGUF through the
abricot-local engines. The only module importing lm-eval (nothing imports it but the
``lm-eval`` command and lm-eval itself).

Three ways in::

    abricot-local lm-eval gemma-3-270m --tasks hellaswag_it --limit 100      # the command
    lm-eval run --model abricot-local --model_args model=gemma-3-270m ...     # lm-eval's CLI (*)
    import abricot_local.lm_eval.model                                        # Python: registers the name
    lm_eval.simple_evaluate(model="abricot-local", model_args="model=gemma-3-270m,n_ctx=4096", tasks=[...])

(*) lm-eval releases that discover model plugins through the ``lm_eval.models``
entry-point group (declared in pyproject.toml) find it with no import; older ones
(0.4.13 included) need the import, which ``abricot-local lm-eval`` does.

``model_args``: ``model`` (any name `run` takes: a registry alias, a .gguf path, ``ollama:``,
``lmstudio:``, ``hf:``...), every option of the backend's own ``Options`` (``n_ctx``,
``threads``, ``engine``, ``rpc``, ``extra_bufts``...: ``lm_eval_requests.backend_arg_keys()`` lists them; a list is written with ';', as in
``rpc=HOST:PORT;HOST:PORT``, since lm-eval splits model_args on commas), ``backend``,
``models`` (an extra models.toml), ``model_dir`` and ``force`` (skip the memory check). They
make a run's request, whose plan opens the model as `run` opens it (requests.open_model). The request rules are
in requests.py; the provenance (model SHA-256, llama.cpp build, schedule, rules) goes
into lm-eval's results under ``config.abricot_local``.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Sequence

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from abricot_local.lm_eval import requests as lm_eval_requests
from abricot_local.errors import AbricotError, UsageError
from abricot_local.option_fields import lm_eval_option

MODEL_NAME = "abricot-local"


def lm_eval_windows(tokens: list[int], prefix_token: int, max_seq_len: int):
    """lm-eval's own rolling windows (as its Hugging Face model makes them), made disjoint."""
    return map(make_disjoint_window, get_rolling_token_windows(
        token_list=tokens, prefix_token=prefix_token, max_seq_len=max_seq_len, context_len=1))


def _bar(desc: str, disable: bool):
    """A tqdm progress callback (done, total), created on first use."""
    state: dict = {}

    def update(done: int, total: int) -> None:
        if disable:
            return
        from tqdm import tqdm

        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = tqdm(total=total, desc=f"abricot-local {desc}", unit="req")
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return update


def refuse_unknown(args: dict) -> None:
    """A model_args key abricot-local does not take, refused with the close ones (as the API's unknown keyword:
    ``thread`` -> "Did you mean: threads?") and every key it takes."""
    from abricot_local.names import did_you_mean

    taken = (*lm_eval_requests.FRONT_KEYS, *lm_eval_requests.backend_arg_keys())
    unknown = sorted(set(args) - {"model", *taken, *lm_eval_requests.IGNORED_KEYS})
    if unknown:
        hints = "".join(did_you_mean(k, taken) for k in unknown)
        raise UsageError(f"unknown model_args {', '.join(unknown)}.{hints} abricot-local takes {', '.join(taken)}")


def labels(requests) -> list[str | None]:
    """Each of lm-eval's requests named as lm-eval knows its document, in an error (lm_eval_requests.doc_label: its task
    and doc_id, after the item of abricot-local's it is): once per document."""
    named: dict = {}
    for r in requests:
        key = (getattr(r, "task_name", None), getattr(r, "doc_id", None))
        if key not in named:
            named[key] = lm_eval_requests.doc_label(*key, getattr(r, "doc", None))
    return [named[(getattr(r, "task_name", None), getattr(r, "doc_id", None))] for r in requests]


_door = {"waits": True}  # False while `abricot-local lm-eval` runs lm-eval (run_cli): the command line's rule


def door(method):
    """One of lm-eval's calls into abricot-local: a library's door, as the Python API's (api.arguments.entry): a
    signal that llama.cpp does not return from within 3 s (a GPU backend, a silent RPC server) is waited for and
    raised once it returns, only a second one ending the process (backends.waiting), never ending a notebook's
    kernel at a first Ctrl-C; under `abricot-local lm-eval` (the command line) the process ends then, as `run`'s."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        from contextlib import nullcontext

        from abricot_local.backends import waiting

        with waiting() if _door["waits"] else nullcontext():
            return method(*args, **kwargs)

    return call


@register_model(MODEL_NAME)
class AbricotLM(LM):
    """lm-eval's ``LM`` over an abricot-local backend (llama.cpp by default)."""

    @door
    def __init__(self, model: str | None = None, **kwargs) -> None:
        super().__init__()
        self.batch_size_given = kwargs.get("batch_size")  # recorded by lm-eval; no number depends on it
        refuse_unknown(kwargs)
        self.opened = lm_eval_requests.open_model({"model": model, **kwargs})
        self.backend = self.opened.backend
        self._special = False  # prompts rendered by the chat template hold special-token markup

    # -- the three request types -----------------------------------------------------------
    @door
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [(str(r.args[0]), str(r.args[1])) for r in requests]
        out = lm_eval_requests.loglikelihood(self.backend, pairs, special=self._special, labels=labels(requests),
                                    progress=_bar("loglikelihood", disable_tqdm))
        for pair, res in zip(pairs, out):
            self.cache_hook.add_partial("loglikelihood", pair, res)
        return out

    @door
    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        texts = [str(r.args[0]) for r in requests]
        out = lm_eval_requests.loglikelihood_rolling(self.backend, texts, lm_eval_windows, special=self._special,
                                            labels=labels(requests),
                                            progress=_bar("loglikelihood_rolling", disable_tqdm))
        for text, res in zip(texts, out):
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), res)
        return out

    @door
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        args = [(str(r.args[0]), dict(r.args[1] or {})) for r in requests]
        gens = lm_eval_requests.generate(self.backend, args, special=self._special, labels=labels(requests),
                                progress=_bar("generate_until", disable_tqdm))
        for (ctx, kw), g in zip(args, gens):
            self.cache_hook.add_partial("generate_until", (ctx, kw), g.text)
        return [g.text for g in gens]

    # -- chat templates (--apply_chat_template) --------------------------------------------
    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        self._special = True
        return self.backend.render_chat(chat_history, add_generation_prompt)

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        if not chat_template:
            return ""
        if isinstance(chat_template, str):
            raise UsageError("abricot-local renders the GGUF's own chat template: give no template name, "
                             f"{lm_eval_option('apply_chat_template', python=True)}")
        return self.backend.render_chat([{"role": "user", "content": "{message}"}])

    @property
    def tokenizer_name(self) -> str:
        return self.opened.provenance["model"]["sha256"] or self.opened.label

    # -- what lm-eval records --------------------------------------------------------------
    def get_model_info(self) -> dict:
        """Merged by lm-eval into its results' ``config``, asked after scoring: the provenance as `run` records it,
        its thread-dependent decode calls counted (requests.OpenedModel.provenance)."""
        return {"abricot_local": self.opened.provenance}

    @door
    def close(self) -> None:
        self.backend.close()


SHIPPED_TASKS = "abricot_paper, abricot_calamita, discotex_card, discotex_itabench"


def _given(args: Sequence[str], *names: str) -> bool:
    return any(a in names or a.startswith(tuple(f"{n}=" for n in names)) for a in args)


def same_model(model: str, args: dict | None) -> None:
    """The MODEL of ``abricot-local lm-eval MODEL`` and a ``model`` in ``--model_args`` (lm-eval merges them,
    the later one winning): refused unless they name the same model (the same text, or the same file)."""
    import os

    given = (args or {}).get("model")
    if given is None or str(given) == model:
        return
    try:
        if os.path.samefile(str(given), model):
            return
    except (OSError, ValueError):
        pass
    raise UsageError(f"two models: {model} (MODEL) and {given} (--model_args model={given}); abricot-local lm-eval "
                     "evaluates one: give it as MODEL, and the other model_args without model=")


def run_cli(model: str, args: Sequence[str]) -> None:
    """``lm-eval run --model abricot-local --model_args model=MODEL [args...]`` in this process
    (so the model is registered), with abricot-local's own tasks on the include path (unless
    ``--include_path`` is given: lm-eval takes one); the other ``args`` go to lm-eval unchanged, read
    by lm-eval's own parser (as lm-eval's ``cli_evaluate``: 0.4.10 on) before it runs: a ``model`` in
    ``--model_args`` other than MODEL is refused (:func:`same_model`). No task, or one lm-eval does not
    know, is one line, not lm-eval's traceback."""
    if _given(args, "--model", "-M"):
        raise UsageError("abricot-local lm-eval sets --model itself; give backend options with --model_args")
    if not _given(args, "--tasks", "-t", "--config", "-C"):
        raise UsageError(f"abricot-local lm-eval needs --tasks NAME[,NAME...]: abricot-local's {SHIPPED_TASKS}, "
                         "or any lm-eval task (`lm-eval ls tasks` lists them)")
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    from abricot_local.lm_eval.tasks import TASKS_PATH

    include = [] if _given(args, "--include_path") else ["--include_path", str(TASKS_PATH)]
    argv = ["lm-eval", "run", "--model", MODEL_NAME, "--model_args", json.dumps({"model": model}), *include, *args]
    saved = sys.argv
    sys.argv = argv
    _door["waits"] = False  # the command line: a signal llama.cpp does not return from ends the process
    try:
        setup_logging()
        parser = HarnessCLI()
        try:
            parsed = parser.parse_args()
        except ValueError as err:  # its own reading of --model_args, --metadata...: bad JSON, a bad key=value
            raise UsageError(f"lm-eval could not read its arguments: {str(err).splitlines()[0]}") from None
        same_model(model, getattr(parsed, "model_args", None))
        parser.execute(parsed)
    except ValueError as err:
        if not str(err).startswith("Tasks not found"):
            raise
        raise UsageError(f"lm-eval: {str(err).splitlines()[0]}; abricot-local's tasks are {SHIPPED_TASKS}; "
                         "`lm-eval ls tasks` lists lm-eval's") from None
    except AssertionError as err:  # lm-eval's sampler asked for shots from an empty few-shot split
        if "no documents available for sampling" not in str(err):
            raise
        raise UsageError("lm-eval found no documents to draw the --num_fewshot examples from: the task's few-shot "
                         "split is empty (a warning above says why); give its data, or run it without "
                         "--num_fewshot") from None
    except AbricotError as err:  # an option it names in this command's words: model_args, --metadata, lm-eval's
        raise (err if err.namer else err.said_by(lm_eval_requests.door_words)) from None
    finally:
        sys.argv = saved
        _door["waits"] = True
