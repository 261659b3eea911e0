"""lm-evaluation-harness's three request types over a backend, without importing lm-eval.

``model.py`` (the only module importing lm-eval) wraps these functions in
lm-eval's ``LM`` class; they take plain strings and return plain numbers, so they
run on any backend, the fake one included. The rules, recorded in every output
(:data:`REQUEST_RULES`), make each number a function of its request's own text:

- ``loglikelihood``: requests are grouped by their context; each group is one
  :class:`~abricot_local.core.Request` (the context, all its continuations, the
  whitespace belonging to the continuation as lm-eval gives it), scored with one
  evaluation of the context for all continuations. Its cached prefix is
  :func:`~abricot_local.core.cached_prefix`, the rule of every door (`run`'s
  too): the context up to and including its last blank line (``"\\n\\n"``,
  lm-eval's description and few-shot delimiter), so the cuts depend on nothing
  but the request's text: not on ``--batch_size``, the request order or ``--limit``.
  An empty context scores the continuation after ``prefix_token`` (BOS).
- ``loglikelihood_rolling``: lm-eval's own rolling windows
  (``get_rolling_token_windows`` with ``context_len=1``, ``make_disjoint_window``)
  of ``n_ctx - 1`` predicted tokens, so that every scored window fits the
  ``n_ctx`` cells; each window scored exactly over the full vocabulary.
- ``generate_until``: greedy (the argmax of each checked row), until a stop
  string (the text is cut before the first one), EOS/EOG, ``max_gen_toks``
  (default 256) or a full context; the prompt's prefix follows the rule above.

With an exact engine (naive, single, prefix) the numbers are bit-identical
whatever the grouping; with ``batched`` several contexts share decode calls and
agree within a measured tolerance (docs/numerics.md#engines).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from abricot_local.backends import DEFAULT_BACKEND, option_specs
from abricot_local.backends.base import GENERATE, ROLLING, Backend
from abricot_local.core import Generated, Request, Scored, cached_prefix
from abricot_local.errors import (NONE, AbricotError, ContextOverflowError, Namer, UsageError, keywords, literal, opt,
                                   shell_word)
from abricot_local.option_fields import lm_eval_option
from abricot_local.record import Provenance
from abricot_local.run.execute import scored

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default for its own models

REQUEST_RULES = {
    "version": "lm-eval/v1",
    "loglikelihood": "one request per distinct context with all its continuations; cached prefix = the context "
                     "up to and including its last '\\n\\n'; empty context: continuation after prefix_token",
    "loglikelihood_rolling": "lm-eval get_rolling_token_windows(context_len=1) + make_disjoint_window, "
                             "n_ctx - 1 predicted tokens per window, after prefix_token",
    "generate_until": "greedy (argmax of each checked row); stops at an 'until' string (cut before it), EOS/EOG, "
                      f"max_gen_toks (default {DEFAULT_MAX_GEN_TOKS}) or a full context; prefix rule as loglikelihood",
}



def run_arg_keys() -> dict[str, str]:
    """The run's options lm-eval's front end takes, by model_args key: each RunOptions field's ``model_arg``
    (``models``: models_file, ``model_dir``: model_dirs, ``force``)."""
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions

    return {s.model_arg: s.name for s in specs(RunOptions) if s.model_arg}


# model_args the front end takes besides the backend's own options (backend_arg_keys): the model, the backend, the
# run's options that have a model_args key (run_arg_keys)
FRONT_KEYS = ("model", "backend", *run_arg_keys())
IGNORED_KEYS = ("batch_size", "max_batch_size", "device", "trust_remote_code")  # lm-eval's; numbers never depend on them

Windows = Callable[[list[int], int, int], Iterable[tuple[list[int], list[int]]]]
Progress = Callable[[int, int], None]  # (done, total) in units of distinct requests
Labels = Sequence[str | None] | None  # each request's name in an error (its document: doc_label), None: label_of's


def label_of(text: str) -> str:
    return "ctx-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


_ITEMS: dict[str, str] = {}  # an lm-eval document's digest (_doc_key) -> the id of abricot-local's item it is


def _doc_key(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def known_items(pairs: Iterable[tuple[dict, str]]) -> None:
    """(document, item id): the documents the shipped tasks give lm-eval (lm_eval/tasks/loaders.py), each the item of
    abricot-local's task it was made from, by which :func:`doc_label` names it."""
    for doc, item in pairs:
        _ITEMS.setdefault(_doc_key(doc), item)


def doc_label(task: str | None, doc_id: int | None, doc: Any = None) -> str | None:
    """A request's document as lm-eval knows it, its name in an error (``item LABEL: ...``): the task and its doc_id
    (``discotex_card doc_id 3``), after the item of abricot-local's it is, where one of the shipped tasks' documents
    (:func:`known_items`: ``task_1_ted_test_1 (discotex_card doc_id 3)``); None where lm-eval gave neither."""
    if task is None or doc_id is None:
        return None
    where = f"{task} doc_id {doc_id}"
    item = _ITEMS.get(_doc_key(doc)) if _ITEMS and isinstance(doc, dict) else None
    return f"{item} ({where})" if item else where


# -- the model, opened as `run` opens it ---------------------------------------------------------
@dataclass(frozen=True)
class OpenedModel:
    """A model opened for lm-eval: its backend, the provenance recorded as it opened (``made``) and its label."""

    backend: Backend
    made: Provenance
    label: str

    @property
    def provenance(self) -> dict:
        """What lm-eval's output records (``config.abricot_local``), as `run` records it at the end of its run: the
        provenance made as the model opened, with the decode calls scored so far whose numbers depend on the thread
        count (:func:`counted`). lm-eval asks for it (get_model_info) after scoring."""
        from abricot_local.run.record import counted

        return counted(self.made, self.backend).to_dict()


def backend_arg_keys() -> tuple[str, ...]:
    """The model_args keys of the backends' options: every registered backend's fields."""
    return tuple(spec.name for spec, _ in option_specs())


def _model_arg(name: str, value=NONE) -> str:
    """lm-eval's words for an option: ``model_args n_ctx``, ``model_args n_ctx=4096``; a run option by its key
    (``models_file``: ``model_args models``)."""
    name = {field: key for key, field in run_arg_keys().items()}.get(name, name)
    return f"model_args {name}" if value is NONE else f"model_args {name}={value}"


def _metadata_words(name: str, value: Any = None) -> str:
    """An option as lm-eval's metadata gives it to the shipped tasks (lm_eval/tasks/loaders.py; :data:`metadata_words`)
    in both of lm-eval's doors, since a task's message cannot know which one the user ran (as
    option_fields.lm_eval_option names the shots): the command line's ``--metadata`` JSON, then the TaskManager a
    simple_evaluate user gives the shipped tasks (simple_evaluate's own ``metadata=`` reaches only the TaskManager
    it makes when given none, which does not find them): ``--metadata '{"data_dir": DIR}' (simple_evaluate's
    TaskManager(metadata={"data_dir": DIR}))``, a path given as its JSON (errors.literal: ``{"data_dir": "/data"}``,
    the whole quoted for the shell), to be pasted; another option as Python's keyword."""
    if name not in ("data", "data_dir"):
        return keywords.write(name, NONE if value is None else value)
    bare = value is None or value is NONE
    if bare:
        shown = "..."
    elif isinstance(value, tuple) and len(value) == 2:  # a keyed option: {"abricot": FILE}
        shown = f"{{{json.dumps(str(value[0]), ensure_ascii=False)}: {literal(value[1])}}}"
    else:
        shown = literal(value)
    given = f'{{"{name}": {shown}}}'
    flag = f"--metadata {name}" if bare else f"--metadata {shell_word(given)}"
    return f"{flag} (simple_evaluate's TaskManager(metadata={given}))"


metadata_words = Namer(_metadata_words)  # the errors.Namer of the shipped tasks' metadata, in lm-eval's two doors


def _door_words(name: str, value=NONE) -> str:
    """An option as `abricot-local lm-eval` and lm-eval's API take it (:data:`door_words`: a message no narrower
    namer claimed, the tasks' warnings and errors): the tasks' data as lm-eval's metadata gives it
    (:data:`metadata_words`) and the shots as lm-eval's own num_fewshot, each in both of lm-eval's doors (the message
    cannot know which one the user ran: option_fields.lm_eval_option, ``--num_fewshot 2 (simple_evaluate's
    num_fewshot=2)``), the model's options as model_args keys (:data:`model_arg`), another by its Python keyword."""
    if name in ("data", "data_dir"):
        return metadata_words.write(name, value)
    if name == "shots":
        if value is NONE:
            return lm_eval_option("num_fewshot")
        return lm_eval_option("num_fewshot", str(value), int(value) if str(value).isdigit() else value)
    keys = (*FRONT_KEYS, *run_arg_keys().values(), *backend_arg_keys())
    return _model_arg(name, value) if name in keys else keywords.write(name, value)


# the errors.Namer of lm-eval's model_args and of the command `abricot-local lm-eval`; a list in model_args is
# written with ';' (lm-eval splits model_args at commas): rpc=HOST:PORT;HOST:PORT
model_arg = Namer(_model_arg, ";".join)
door_words = Namer(_door_words, ";".join)


def request_of(args: dict):
    """The run.request.RunRequest of lm-eval's ``model_args``: ``model`` (any name `run` takes), the
    backend's option fields by name (lm-eval's types, each parsed by its field; a list written with ';'),
    ``backend``, and the run's options by their keys (:func:`run_arg_keys`: ``models``, an extra models.toml;
    ``model_dir``, folders written with ';'; ``force``), each parsed and checked by its field."""
    from abricot_local.option_fields import specs
    from abricot_local.run.request import RunOptions, request_of

    keys = backend_arg_keys()
    unknown = sorted(set(args) - set(FRONT_KEYS) - set(keys) - set(IGNORED_KEYS))
    if unknown:
        raise UsageError(f"unknown model_args {', '.join(unknown)}; abricot-local takes "
                         f"{', '.join(FRONT_KEYS + keys)}")
    if not args.get("model"):
        raise UsageError("model_args needs model=ALIAS_OR_GGUF_PATH (a registry alias or a .gguf file)")
    many = {s.name for s in specs(RunOptions) if s.many}
    run = {name: args.get(key) for key, name in run_arg_keys().items()}  # by field name
    run = {name: tuple(d for d in str(v).split(";") if d) if name in many and not isinstance(v, (list, tuple))
           else v for name, v in run.items() if v is not None}  # a list in model_args: ';' (rpc=A;B); lm-eval
    # types what looks like a number (model_dir=2024: a folder's name all the same)
    return request_of(str(args["model"]), {**{k: args[k] for k in keys if args.get(k) is not None}, **run},
                      backend=str(args.get("backend") or DEFAULT_BACKEND))


def open_model(args: dict) -> OpenedModel:
    """Open ``args["model"]`` (lm-eval's model_args) as `run` does: the request of its model_args
    (:func:`request_of`), its plan (run/plan.py: the name located once, the registry's n_ctx when none
    is given, memory and disk checked before a download unless force, the file's checks and SHA-256),
    the backend opened as `run` opens it (execute.open_backend), the provenance `run` records
    (run/record.py) with lm-eval's own: the request rules (its thread-dependent decode calls counted when lm-eval
    reads it, after scoring: OpenedModel.provenance). An error says lm-eval's words (model_args)."""
    from abricot_local.analysis.lm_eval_input import REQUESTS
    from abricot_local.run.execute import open_backend
    from abricot_local.run.plan import make_plan
    from abricot_local.run.record import provenance

    try:
        p = make_plan(request_of(args), tasks=False)
        backend = open_backend(p)
    except AbricotError as err:
        raise err.said_by(model_arg) from None
    try:
        rules = dict(REQUEST_RULES)
        if ROLLING in backend.capabilities:
            rules.update(prefix_token=backend.prefix_token, rolling_window_tokens=window_tokens(backend))
        made = provenance(backend, before={"model": p.model.record().to_dict(), "config": p.model_config().to_dict()},
                          after={REQUESTS: rules})  # lm-eval's edge: OpenedModel.provenance, its output's JSON
    except BaseException:
        backend.close()
        raise
    return OpenedModel(backend, made, p.model.label)


# -- the three request types ---------------------------------------------------------------------
def window_tokens(backend: Backend) -> int:
    """Tokens each rolling window predicts at most: n_ctx - 1, the n_ctx asked (llama.cpp may
    allocate more cells), so that context + predicted tokens fit n_ctx."""
    return min(backend.options.n_ctx, backend.n_ctx()) - 1


def _names(texts: Sequence[str], labels: Labels) -> dict[str, str]:
    """Each text's name in an error: the label of its first request (its document, :func:`doc_label`), else
    :func:`label_of` (a digest of the text)."""
    out: dict[str, str] = {}
    for text, label in zip(texts, labels or [None] * len(texts)):
        if label and text not in out:
            out[text] = label
    return {text: out.get(text) or label_of(text) for text in texts}


def loglikelihood(backend: Backend, pairs: Sequence[tuple[str, str]], *, special: bool = False,
                  progress: Progress | None = None, labels: Labels = None) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) of each (context, continuation), in input order. Contexts
    are scored in a canonical order (prefix, then text); every prompt is tokenized and
    checked against n_ctx before anything is decoded. ``labels``: each pair's document (:func:`doc_label`), which an
    error names (a context shared by several: the first)."""
    groups: dict[str, dict[str, None]] = {}
    for ctx, cont in pairs:
        groups.setdefault(ctx, {}).setdefault(cont, None)
    order = sorted(groups, key=lambda c: (cached_prefix(c), c))
    names = _names([c for c, _ in pairs], labels)
    requests = [Request(c, tuple(groups[c]), label=names[c], parse_special=special)
                for c in order if c]
    try:
        for r in requests:
            backend.schedule(r)
    except ContextOverflowError as err:
        raise err.said_by(model_arg) from None
    results: dict[tuple[str, str], tuple[float, bool]] = {}
    done, total = 0, len(groups)

    def keep(ctx: str, conts: Sequence[str], s: Scored) -> None:
        greedy = s.greedy or (False,) * len(conts)
        for cont, lp, g in zip(conts, s.logprobs, greedy, strict=True):
            results[(ctx, cont)] = (lp, bool(g))

    if "" in groups:  # no context: the continuation after the prefix token, as lm-eval's models do
        conts = tuple(groups[""])
        toks = [backend.tokenize(c, special=special, bos=False) for c in conts]
        keep("", conts, backend.score_tokens([backend.prefix_token], toks, label=names[""]))
        done += 1
        if progress:
            progress(done, total)
    for k, s in scored(requests, backend):  # the run's loop (run/execute.py): its order kept, its chunks
        keep(requests[k].context, requests[k].continuations, s)
        done += 1
        if progress:
            progress(done, total)
    return [results[p] for p in pairs]


def loglikelihood_rolling(backend: Backend, texts: Sequence[str], windows: Windows, *, special: bool = False,
                          progress: Progress | None = None, labels: Labels = None) -> list[float]:
    """The log-likelihood of each whole text: the sum over its rolling windows (``windows``:
    lm-eval's, given (tokens, prefix token, max_seq_len)), each scored exactly; ``labels``: as loglikelihood's."""
    if ROLLING not in backend.capabilities:
        raise UsageError("this backend cannot score token windows (loglikelihood_rolling)")
    max_seq_len = window_tokens(backend)
    names = _names(texts, labels)
    done: dict[str, float] = {}
    for text in texts:
        if text not in done:
            total = 0.0
            tokens = backend.tokenize(text, special=special, bos=False)
            for k, (ctx, pred) in enumerate(windows(tokens, backend.prefix_token, max_seq_len)):
                total += backend.score_tokens(ctx, [pred], label=f"{names[text]}/w{k}").logprobs[0]
            done[text] = total
            if progress:
                progress(len(done), len(set(texts)))
    return [done[t] for t in texts]


@dataclass(frozen=True)
class GenSpec:
    until: tuple[str, ...]
    max_tokens: int


def gen_spec(kwargs: dict | None, default_max: int = DEFAULT_MAX_GEN_TOKS) -> GenSpec:
    """lm-eval's generation kwargs as abricot-local runs them: greedy only."""
    kw = dict(kwargs or {})
    if kw.get("do_sample"):
        raise UsageError("abricot-local generates greedily only, and this task asks do_sample=True; "
                         "override it with lm-eval's gen_kwargs do_sample=False")
    until = kw.get("until") or ()
    until = (until,) if isinstance(until, str) else tuple(str(u) for u in until)
    max_tokens = kw.get("max_gen_toks", default_max)
    if not isinstance(max_tokens, int) or max_tokens < 0:
        raise UsageError(f"max_gen_toks must be a non-negative integer, got {max_tokens!r}")
    return GenSpec(until, max_tokens)


def generate(backend: Backend, requests: Sequence[tuple[str, dict]], *, special: bool = False,
             progress: Progress | None = None, labels: Labels = None) -> list[Generated]:
    """Greedy generations for (context, gen_kwargs) requests, in input order; identical
    requests are generated once, in a canonical order, after every prompt is checked; ``labels`` as
    :func:`loglikelihood`'s."""
    if GENERATE not in backend.capabilities:
        raise UsageError("this backend cannot generate (generate_until)")
    keys = [(ctx, gen_spec(kw)) for ctx, kw in requests]
    names = _names([ctx for ctx, _ in requests], labels)
    n_ctx = backend.n_ctx()
    for ctx in {c for c, _ in keys}:
        n = len(backend.tokenize(ctx, special=special))
        if n >= n_ctx:
            raise ContextOverflowError(f"item {names[ctx]}: the prompt is {n} tokens but the context window holds "
                                       f"{n_ctx}: no room to generate; raise {opt('n_ctx', 'N')}").said_by(model_arg)
    out: dict[tuple[str, GenSpec], Generated] = {}
    unique = sorted(set(keys), key=lambda k: (cached_prefix(k[0]), k[0], k[1].until, k[1].max_tokens))
    for ctx, spec in unique:
        out[(ctx, spec)] = backend.generate(ctx, spec.until, spec.max_tokens,
                                            label=names[ctx], parse_special=special)
        if progress:
            progress(len(out), len(unique))
    return [out[k] for k in keys]
