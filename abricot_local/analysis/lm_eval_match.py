"""An lm-eval task's logged items matched to one of this tool's task instances (lm_eval_input.py reads the
output around it): a registered task under one of its protocols, prompt variants and shot counts, whose items are
built from the data here. An lm-eval item is the tool's item with the same scored context and the same
continuations, in the same order (:func:`items.scored_key`, the key `compare` pairs task instances by too); every
logged item must match, else one line says why none does (:class:`DataNotHere`: the data is not here).

An output made with lm-eval's ``--apply_chat_template`` (or an export of a run with a chat template) scored each
prompt as the one user turn of a chat template, as a run with ``chat_template`` does (run/execute.py's
``apply_chat``: the prompt rendered through the template): the context ``head + prompt + tail``, the continuations
without their leading space (lm-eval's target delimiter is dropped under a chat template). :func:`chat_of` reads that turn from the results file: its
``chat_template`` as abricot-local's lm-eval model and an export record it (the user turn around ``{message}``),
else (a Jinja source: lm-eval's ``hf``) found from the contexts themselves, each task's items wrapped alike. The
task's items are wrapped so (:func:`wrapped`) before they are matched: the items read back carry the text the
model saw, as the run's own samples do. A template that trims the message (Gemma 3's ``| trim``) holds each prompt
without its outer whitespace, as a run with that template renders it too: such items match their prompt trimmed
(:attr:`Turn.trimmed`; the recorded turn around ``{message}`` does not show the trim). What no run scores is refused
before matching (:func:`refused`): a system turn (``--system_instruction``, a task's ``description``), shots as
turns of their own (``fewshot_as_multiturn``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

from abricot_local.analysis.items import scored_key
from abricot_local.errors import AbricotError, ResultsError, opt
from abricot_local.option_fields import lm_eval_option


class DataNotHere(ResultsError):
    """An lm-eval task none of whose items matched as its data is not here: ``keys``, the data keys to give."""

    def __init__(self, message: str, keys: tuple[str, ...]):
        super().__init__(message)
        self.keys = keys


@dataclass(frozen=True)
class Logged:  # one logged item of an lm-eval task: its doc id, scored context, continuations, log-likelihoods
    doc_id: int
    context: str
    continuations: tuple[str, ...]
    logprobs: tuple[float, ...]


MESSAGE = "{message}"  # where the user message stands in the chat template abricot-local's lm-eval model records


@dataclass(frozen=True)
class Chat:
    """The chat template an lm-eval output recorded (its ``chat_template``): ``head`` and ``tail``, the user turn
    around every prompt, when the template is that turn around ``{message}``; else None, found from the contexts."""

    template: str
    head: str | None = None
    tail: str | None = None


def chat_of(doc: Mapping, where) -> Chat | None:
    """The chat template the results document ``doc`` (of file ``where``) records (None: none), or one
    ResultsError line: a template with a system instruction, which no run scores."""
    template = doc.get("chat_template")
    if template is None or template is False or template == "":
        return None
    if not isinstance(template, str):
        raise ResultsError(f"{where}: its chat_template is {type(template).__name__}, not the text lm-eval records")
    system = doc.get("system_instruction")
    if system:
        raise ResultsError(f"{where}: lm-eval put a system instruction ({str(system)[:40]!r}) in a turn of its own "
                           f"before every prompt, and a run with {opt('chat_template', True)} scores the prompt as "
                           "the one user turn: no run here scored these texts; run lm-eval without "
                           f"{lm_eval_option('system_instruction')} to compare it")
    if template.count(MESSAGE) == 1:
        head, tail = template.split(MESSAGE)
        return Chat(template, head, tail)
    return Chat(template)


def refused(lm_task: str, config: Mapping, shots: int | None, multiturn: Any) -> str | None:
    """Why lm-eval task ``lm_task`` (its ``configs`` entry ``config``), scored under a chat template, holds texts no
    run scores (None: it may match): the task's description in a system turn; its shots as turns of their own."""
    if config.get("description"):
        return (f"cannot read lm-eval task {lm_task} as a run: under {lm_eval_option('apply_chat_template')} "
                f"lm-eval puts the task's description in a system turn of its own, and a run with "
                f"{opt('chat_template', True)} scores the whole prompt as one user turn: no run here scored these "
                "texts")
    if shots and multiturn is True:  # not recorded (before lm-eval 0.4.3): matched, or refused as no match
        return (f"cannot read lm-eval task {lm_task} as a run: lm-eval wrote its {shots} shots as chat turns of their "
                f"own (fewshot_as_multiturn, its default under {lm_eval_option('apply_chat_template')}), and a "
                f"run with {opt('chat_template', True)} scores them in its one user turn; run lm-eval with "
                f"{lm_eval_option('fewshot_as_multiturn', 'false', False)} to compare it")
    return None


@dataclass(frozen=True)
class Turn:
    """The user turn a chat template put every prompt in: ``head`` + prompt + ``tail``; ``trimmed``: the
    prompt without its leading and trailing whitespace (a template's ``| trim``, which a run renders too)."""

    head: str
    tail: str
    trimmed: bool = False


def wrapped(items, head: str, tail: str, trimmed: bool = False) -> list:
    """``items`` as a run with a chat template scores them (run/execute.py's ``apply_chat``): each context the
    user turn ``head + context + tail`` (special tokens parsed), each continuation without its leading space;
    ``trimmed``: the context stripped first, as a template that trims the message renders it."""
    return [it.in_chat(head + (it.context.strip() if trimmed else it.context) + tail) for it in items]


def _turns(logged: list[Logged], items, most: int = 8) -> list[Turn]:
    """The turns a chat template put an item's context in to make the first logged context (an item with the
    logged continuations, less their space, whose context, whole or trimmed, lies inside it): at most ``most``."""
    first = min(logged, key=lambda x: x.doc_id)
    out: dict[Turn, None] = {}
    for it in items:
        if not it.context or tuple(c.lstrip(" ") for c in it.continuations) != first.continuations:
            continue
        for trimmed, text in dict.fromkeys([(False, it.context), (True, it.context.strip())]):
            at = first.context.find(text) if text and (not trimmed or text != it.context) else -1
            if at >= 0 and (at or len(first.context) > len(text)):
                out.setdefault(Turn(first.context[:at], first.context[at + len(text):], trimmed), None)
        if len(out) >= most:
            break
    return list(out)


def _candidates(lm_task: str, shots: int | None, seed: int | None,
                run_seed: int | None = None) -> Iterator[tuple[str, dict]]:
    """(task key, TaskOptions fields) of every task instance an lm-eval task may be, the most default first:
    each registered task (those whose name the lm-eval task's contains first) as `run --protocol P` makes
    it under each of its protocols, then with the shots lm-eval gave, then under each prompt variant
    (keyed as `run --prompt-variant V` keys one; :func:`apart` names apart two variants of one task);
    lm-eval's few-shot seed after the default (a task's ``shot_seed`` where it uses one; the run's ``seed`` too, but
    ``run_seed`` where known: an export's)."""
    from abricot_local.core import DEFAULT_SEED
    from abricot_local.errors import TaskError
    from abricot_local.tasks import all_task_names, task_class

    names = sorted(all_task_names(), key=lambda n: n not in lm_task.lower())
    for s in dict.fromkeys([DEFAULT_SEED, DEFAULT_SEED if seed is None else seed]):
        for name in names:
            try:
                cls = task_class(name)
            except TaskError:  # a broken plugin: no lm-eval task is it (it is named where it is asked for)
                continue
            keys = [name, *(f"{name}@{p.name}" for p in cls.protocols[1:])]
            seeds = {"seed": s if run_seed is None else run_seed,
                     **({"shot_seed": s} if "shot_seed" in cls.uses else {})}
            for n in dict.fromkeys([None, shots]):
                for key in keys:
                    yield key, {"shots": n, **seeds}
            for variant in cls.prompt_variants:
                for n in dict.fromkeys([None, shots]):
                    yield name, {"prompt_variant": variant, "shots": n, **seeds}


def apart(matched: list) -> list:
    """The matched (lm-eval task, task instance, pairs), two prompt variants of one task keyed apart as
    `run --prompt-variant A,B` keys them (the default one plain, another ``TASK~VARIANT``); two lm-eval
    tasks holding the very same instance: refused."""
    from abricot_local.tasks import make_task

    count = Counter(task.key for _, task, _ in matched)
    out = []
    for lm_task, task, pairs in matched:
        variant = task.config().get("prompt_variant")
        if count[task.key] > 1 and variant:
            plain = replace(task.options, prompt_variant=None)
            if variant != make_task(task.key, plain).config().get("prompt_variant"):
                task = make_task(f"{task.key}~{variant}", plain)
        out.append((lm_task, task, pairs))
    seen: dict[str, str] = {}
    for lm_task, task, _ in out:
        if task.key in seen:
            raise ResultsError(f"lm-eval tasks {seen[task.key]} and {lm_task} both hold the items of {task.key}; "
                               "give a folder of one run of each")
        seen[task.key] = lm_task
    return out


def _index(items) -> dict[str, list]:
    out: dict[str, list] = {}  # scored key -> the items holding it, in order
    for it in items:
        out.setdefault(scored_key(it.context, it.continuations), []).append(it)
    return out


def match_task(lm_task: str, logged: list[Logged], shots: int | None, seed: int | None, base,
               chat: Chat | None = None, run_seed: int | None = None) -> tuple[Any, list, Turn | None]:
    """The tool's task instance whose items hold every logged item (the most default one first), the item of each
    logged one and, under the chat template ``chat``, the turn its items were wrapped in (:func:`wrapped`: whole
    first, then trimmed); else one ResultsError line saying why none does. ``seed``: lm-eval's few-shot seed;
    ``run_seed``: the run's own --seed where the output records it (an export's)."""
    from abricot_local.tasks import make_task

    if not logged:
        raise ResultsError(f"lm-eval task {lm_task} logged no item")
    best, seen, skipped = (0, ""), set(), {}
    wanted = Counter(scored_key(x.context, x.continuations) for x in logged)
    if chat is not None:
        base = replace(base, chat_template=True)  # the task's config as the run's with a chat template
    for key, fields in _candidates(lm_task, shots, seed, run_seed):
        try:
            task = make_task(key, replace(base, **fields))
            items = task.items()
        except AbricotError:
            skipped.setdefault(key.partition("@")[0].partition("~")[0], None)
            continue
        turns = ([None] if chat is None else _turns(logged, items) if chat.head is None
                 else [Turn(chat.head, chat.tail), Turn(chat.head, chat.tail, True)])
        for turn in turns:
            index = _index(items if turn is None else wrapped(items, turn.head, turn.tail, turn.trimmed))
            sig = tuple(sorted(index))
            if sig in seen:
                continue
            seen.add(sig)
            hits = sum(min(n, len(index.get(k, ()))) for k, n in wanted.items())  # each item of the task once
            if hits == len(logged):
                used: Counter = Counter()
                chosen = []
                for x in sorted(logged, key=lambda x: x.doc_id):
                    k = scored_key(x.context, x.continuations)
                    chosen.append((x, index[k][used[k]]))
                    used[k] += 1
                return task, chosen, turn
            if hits > best[0]:
                best = (hits, key)
    first = min(logged, key=lambda x: x.doc_id)
    turn = "" if chat is None else (" in the user turn of the chat template it recorded" if chat.head is not None
                                    else " inside the chat template's turns")
    if best[0]:
        why = (f"only {best[0]} of its {len(logged)} items have the scored context and continuations of an item of "
               f"{best[1]}{turn}")
    else:
        why = (f"no item of any task here{turn} has the scored context and continuations of its items (doc "
               f"{first.doc_id} scores {len(first.continuations)} continuations after {first.context[:40]!r}...)")
    if skipped and not best[0]:
        from abricot_local.tasks import task_class

        named = [n for n in skipped if n in lm_task.lower()] or list(skipped)  # the task the lm-eval one names
        keys = tuple(dict.fromkeys(task_class(n).data.key for n in named))
        why += (f"; the data of {', '.join(named)} is not here (abricot-local data pull TASK, give where it is, "
                "or compare it with a run that read it)")
        raise DataNotHere(f"cannot read lm-eval task {lm_task} as a run: {why}", keys)
    raise ResultsError(f"cannot read lm-eval task {lm_task} as a run: {why}")
