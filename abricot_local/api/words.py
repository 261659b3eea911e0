"""The API's words for a call a message tells the user to make (errors.call: the command line's `abricot-local run
A B`): the API's own call that does it (``abricot_local.evaluate(['A', 'B'])``), each option by its keyword, with the
options' words of errors.keywords; a command the API has no call for (`quantize`) keeps its shell command. Every text
the API shows is in these words: an error leaving a call (api/arguments.entry), and what it renders itself (:func:`said`:
a warning, a Plan, a SweepError's lines)."""

from __future__ import annotations

from abricot_local.errors import Call, Namer, keywords, render

CALLS = {"run": "evaluate", "compare": "compare", "merge": "merge", "check": "check"}  # a command: the API's call


def python_call(made: Call, entry: str = "evaluate") -> str:
    """The API's call that makes the command call ``made`` (errors.call), as a message shows it: a run as ``entry``
    (the call the user made, evaluate or plan), its models a list where several (``abricot_local.evaluate(['A',
    'B'])``), each option by its keyword; a command the API has no call for, its shell command."""
    name = entry if made.command == "run" and entry in ("evaluate", "plan") else CALLS.get(made.command)
    if name is None:
        return made.shell()
    shown = [w if made.placeholders else repr(w) for w in made.words]
    args = [f"[{', '.join(shown)}]"] if made.command == "run" and len(shown) > 1 else shown
    args += [f"{field}={value!r}" for field, _, value in made.options]
    return f"abricot_local.{name}({', '.join(args)})"


def words_of(entry: str) -> Namer:
    """The API's words (errors.keywords) for an error leaving API call ``entry``: its calls (errors.call) as
    :func:`python_call` writes them."""
    return Namer(keywords.write, keywords.join, lambda made: python_call(made, entry))


def said(text: str, entry: str = "evaluate") -> str:
    """``text`` (its options errors.opt's, its calls errors.call's) in the API's words (:func:`words_of`), as the call
    ``entry`` the user made shows it: a run's warning, a sweep's failures, a plan's lines."""
    return render(text, words_of(entry))
