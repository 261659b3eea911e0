"""Errors a user can act on, and the options they name, in each door's words.

A message names an option by its field (:func:`opt`: ``opt("shots", 3)``), never by one door's
spelling of it; the door renders it (:func:`render` with its :class:`Namer`): the command line as
``--shots 3`` (cli/), lm-eval as ``model_args shots=3`` (lm_eval/), Python as ``shots=3``
(:func:`keywords`: what ``str(err)`` gives unless a door set ``err.namer``). A call of a command the message
tells the user to make (:func:`call`) is the door's too: the shell command (:func:`command`) unless the door
writes it its own way (the API: ``abricot_local.evaluate([...])``). The CLI prints the
message folded to :data:`WIDTH` columns (:func:`fold`) and exits with ``err.exit_code``."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import astuple, dataclass
from typing import Any, Callable, Sequence

WIDTH = 120  # no line of a message is wider (a URL, a path or a SHA-256 longer than that is kept whole)


def fold(text: str, width: int = WIDTH) -> str:
    """Every line of ``text`` folded at spaces to ``width`` columns, a continuation indented two
    spaces more than its line; a word longer than ``width`` (a URL, a path, a SHA-256) is kept
    whole, on a line of its own. A command folded by :func:`fold_command` (lines continued with a
    trailing backslash) is left as it is: a space inside a quoted argument is not a place to fold."""
    out: list[str] = []
    continued = False
    for line in text.split("\n"):
        if continued or line.endswith(" \\"):
            out.append(line)
            continued = line.endswith(" \\")
            continue
        body = line.lstrip(" ")
        indent = line[: len(line) - len(body)]
        current = indent
        for word in body.split(" "):
            if current.strip() and len(current) + 1 + len(word) > width:
                out.append(current)
                current = indent + "  " + word
            else:
                current = current + (" " if current.strip() else "") + word
        out.append(current.rstrip() if current.strip() else line)
    return "\n".join(out)


def fold_command(words: Sequence[str], lead: str = "", width: int = WIDTH) -> str:
    """A command line (``words``, each quoted for a POSIX shell as it is to be shown) that a shell reads
    back as the one command when pasted: whole when it fits ``width`` columns after ``lead``, else folded
    between arguments (an option kept with its value), every line but the last ending in " \\" and the
    next one indented two spaces; an argument is never cut (one longer than ``width`` passes it)."""
    units: list[list[str]] = []
    for w in words:
        if units and len(units[-1]) == 1 and units[-1][0].startswith("-") and not w.startswith("-"):
            units[-1].append(w)
        else:
            units.append([w])
    if len(lead) + len(" ".join(words)) <= width:
        return lead + " ".join(words)
    lines, current, first = [], lead, True
    for unit in (" ".join(u) for u in units):
        if not first and len(current) + 1 + len(unit) + 2 > width:
            lines.append(current + " \\")
            current = "  " + unit
        else:
            current = current + ("" if first else " ") + unit
        first = False
    return "\n".join([*lines, current])


_SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")
_SHELL_NAMED = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shell_word(word: str) -> str:
    """``word`` quoted for bash and zsh, so that pasting it gives back exactly ``word``: as it is when it needs no
    quote, else in single quotes (shlex.quote's), else, when it holds a character a terminal would not show as
    itself (a control, a tab or newline, a bidirectional or other format character, a separator other than the
    space, an unassigned or private-use one), as ``$'...'`` with that character escaped (``\\t``, ``\\x1b``,
    ``\\u202e``); printable text (``città``) is kept as it is. The one quoting of every command the tool prints."""
    import unicodedata

    word = str(word)
    if word and all(c in _SHELL_SAFE for c in word):
        return word
    hidden = [c != " " and unicodedata.category(c)[0] in "CZ" for c in word]
    if not any(hidden):
        return "'" + word.replace("'", "'\"'\"'") + "'"
    out = []
    for c, h in zip(word, hidden):
        if c in _SHELL_NAMED:
            out.append(_SHELL_NAMED[c])
        elif h:  # a byte no encoding read (a surrogate-escaped file name: U+DC80..U+DCFF) as that byte
            o = ord(c) - 0xDC00 if 0xDC80 <= ord(c) <= 0xDCFF else ord(c)
            out.append(f"\\x{o:02x}" if o < 0x80 or o != ord(c) else f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"


def shell_line(words: Sequence[str]) -> str:
    """``words`` as one command line (each :func:`shell_word`), what a user pastes into bash or zsh."""
    return " ".join(shell_word(w) for w in words)


def command(*words: str, **options: Any) -> str:
    """A whole abricot-local command line to paste into a shell, the same in every door (a shell command is the
    command line's, whichever door shows it: never rendered as one door's options, :func:`opt`): ``words`` (the
    command and its arguments), then ``options`` by the command line's own names, in order, each its flag made
    from the name (``to="Q3_K_M"``: ``--to Q3_K_M``; ``allow_requantize=True``: ``--allow-requantize``; None or
    False: left out), every word quoted as :func:`shell_word` quotes it."""
    return " ".join(command_words(*words, **options))


def command_words(*words: str, **options: Any) -> list[str]:
    """:func:`command`'s words, each quoted (what :func:`fold_command` folds: a command on lines of its own)."""
    line = ["abricot-local", *words]
    for name, value in ((n, v) for n, v in options.items() if v is not None and v is not False):  # None, False: out
        line += [flag_of(name)] if value is True else [flag_of(name), str(value)]
    return [shell_word(w) for w in line]


# -- options named in a message ------------------------------------------------------------------
_OPEN, _VALUE, _CLOSE = "\ue000", "\ue001", "\ue002"  # private-use characters: never in a user's text
_MANY = "\ue003"  # before each element of a list value
_CALL = "\ue004"  # before a call's fields (:func:`call`)
NONE = object()  # an option named without a value


@dataclass(frozen=True)
class Call:
    """A call of a command that a message tells the user to make, as each door makes it (:attr:`Namer.call`;
    :func:`call` puts it in a message): the command line's ``command`` ("run"), its arguments ``words``, its
    ``options`` as (field, name, value) (``("models_file", "models", PATH)``: ``name`` as :func:`command` takes
    it; a list value a list); ``placeholders``: words that stand for the user's (``FILE``), written as they are."""

    command: str
    words: tuple[str, ...] = ()
    options: tuple[tuple[str, str, Any], ...] = ()
    placeholders: bool = False

    def shell(self) -> str:
        """The call as the shell command that makes it (:func:`command`): a list value with commas."""
        given = {flag: ",".join(v) if isinstance(v, (list, tuple)) else v for _, flag, v in self.options}
        if self.placeholders:
            return " ".join(["abricot-local", self.command, *self.words, *command_words(**given)[1:]])
        return command(self.command, *self.words, **given)


@dataclass(frozen=True)
class Namer:
    """How a door writes an option a message names (:func:`opt`): ``write(name, value)`` (``value`` is
    :data:`NONE` when none is shown); a list value's elements reach ``write`` joined by ``join`` (the
    command line's commas unless the door says otherwise: lm-eval's model_args ';', Python a list); a call
    the message tells the user to make (:func:`call`) by ``call`` (None: the shell command, :meth:`Call.shell`)."""

    write: Callable[[str, Any], str]
    join: Callable[[Sequence[str]], str] = ",".join
    call: Callable[[Call], str] | None = None


def call(made: Call) -> str:
    """The call ``made`` in a message, as :func:`render` writes it for the door (``Namer.call``, else the shell's):
    the command line's user is told `abricot-local run A B`, the API's the call that does it."""
    return f"{_OPEN}{_CALL}{json.dumps(astuple(made))}{_CLOSE}"  # (JSON's \u escapes: no marker inside)


def opt(name: str, value: Any = NONE) -> str:
    """The option ``name`` (a field's or a call's argument name), with ``value`` when one is shown (a
    placeholder such as ``"DIR"``, a number, True for a switch; a (key, value) pair for a keyed
    option: ``opt("data", ("abricot", "FILE"))``; a list for several values of a list option:
    ``opt("rpc", ["HOST:PORT", "HOST:PORT"])``), as a door renders it (:func:`render`)."""
    if isinstance(value, list):
        return f"{_OPEN}{name}{_VALUE}{''.join(_MANY + str(v) for v in value)}{_CLOSE}"
    shown = "" if value is NONE else _VALUE + (repr(tuple(value)) if isinstance(value, tuple) else str(value))
    return f"{_OPEN}{name}{shown}{_CLOSE}"


def render(text: str, namer: Namer | None = None) -> str:
    """``text`` with each option :func:`opt` and call :func:`call` named in it written by ``namer`` (default: Python's
    keywords); a private-use character that starts no whole marker is a user's (a label, a path) and stays as it is."""
    if _OPEN not in text:
        return text
    namer, out, at = namer or keywords, [], 0
    while (start := text.find(_OPEN, at)) >= 0 and (end := text.find(_CLOSE, start)) >= 0:
        inner = text[start + 1:end]
        name, has, value = inner.partition(_VALUE)
        try:  # a call (:func:`call`), as this door makes it
            made = Call(*_value(inner[1:], call=True)) if inner.startswith(_CALL) else None
        except (ValueError, TypeError):
            made, name = None, ""
        if made is None and not name.isidentifier():  # no marker starts here (an option is named by its field)
            out.append(text[at:start + 1])
            at = start + 1
            continue
        if made is not None:
            shown = namer.call(made) if namer.call is not None else made.shell()
        else:  # several values (a list option's) joined as this door writes a list; else one, or none
            many = value.startswith(_MANY)
            shown = namer.write(name, namer.join(value.split(_MANY)[1:]) if many else _value(value) if has else NONE)
        out += [text[at:start], shown]
        at = end + 1
    return "".join(out) + text[at:]


def _value(text: str, call: bool = False) -> Any:
    """A marker's value as :func:`opt` wrote it (a switch, a tuple's repr, a text); ``call``: a call's JSON fields."""
    if call:
        name, words, options, placeholders = json.loads(text)
        return name, tuple(words), tuple(map(tuple, options)), placeholders
    if text in ("True", "False"):  # a switch
        return text == "True"
    if text.startswith("(") and text.endswith(")"):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
    return text


AS_CALLS = {"dry_run": "plan(...)"}  # a command line's switch that is a call of its own in Python: `run --dry-run`
_BARE = re.compile(r"\.\.\.|[A-Z][A-Z0-9_]*([:/][A-Z0-9_]+)*|[\[{].*", re.S)  # a placeholder (FILE, HOST:PORT, ...), a dict


def literal(value: Any) -> str:
    """A value in a dict or JSON a message shows, to be pasted: a text quoted (json.dumps: ``"2024"`` too) unless it
    stands for the user's (``FILE``, ``...``) or is written already (``{"a": FILE}``); a number or switch as Python's."""
    if value is None or isinstance(value, (bool, int, float)):
        return str(value)
    return str(value) if _BARE.fullmatch(str(value)) else json.dumps(str(value), ensure_ascii=False)


def _keyword(name: str, value: Any = NONE) -> str:
    """An option as a Python keyword: ``shots``, ``shots=3``, ``force=True``, ``data={"abricot": FILE}`` (a path as
    its literal: ``{"abricot": "/x.csv"}``); a switch that is a call in Python (:data:`AS_CALLS`): ``plan(...)``."""
    if name in AS_CALLS:
        return AS_CALLS[name]
    if value is NONE:
        return name
    if isinstance(value, tuple) and len(value) == 2:
        return f"{name}={{{json.dumps(str(value[0]), ensure_ascii=False)}: {literal(value[1])}}}"
    return f"{name}={value}"


keywords = Namer(_keyword, lambda values: f"[{', '.join(values)}]")  # Python's words: shots=3, rpc=[A:1, B:2]


def flag_of(name: str) -> str:
    """A field's flag on the command line (``n_batch`` -> ``--n-batch``)."""
    return "--" + name.replace("_", "-")


def _recorded(name: str, value: Any = NONE) -> str:
    """An option as a run's record writes it in its texts (a skipped task's ``how``, a task's notes):
    the flag made from the field, ``--data-dir DIR``, as records always have."""
    flag = flag_of(name)
    if value is NONE or value is True:
        return flag
    return f"{flag} {value[0]}={value[1]}" if isinstance(value, tuple) and len(value) == 2 else f"{flag} {value}"


recorded_words = Namer(_recorded)  # a record's words: --shots 3, --rpc A:1,B:2


def recorded_text(err: "AbricotError") -> str:
    """An error as a run's folder (its FAILED state) writes it: the options it names in the record's words."""
    return render(err.raw(), recorded_words)


class AbricotError(Exception):
    """Base class: every expected failure (bad input, missing file, offline...). Its text names
    options with :func:`opt`; ``str(err)`` renders them with ``namer`` (a door sets it)."""

    exit_code = 2
    namer: Namer | None = None

    def raw(self) -> str:
        """The message with its options unrendered (:func:`render` writes them)."""
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()

    def __str__(self) -> str:
        return render(self.raw(), self.namer)

    def said_by(self, namer: Namer) -> "AbricotError":
        """This error, its options rendered by ``namer`` (the door it leaves through)."""
        self.namer = namer
        return self


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


class FilesNotDownloaded(DownloadError):
    """Files a task's pull could not download, said in lines of their own: why (``cause``: "the
    network is unreachable (HOST: REASON)", "offline: ABRICOT_OFFLINE is set", "HTTP 404 ..."),
    the folder they go into, and each file's URL (:func:`url_lines`). ``fetch.download_files``
    raises it; a pull that fetches otherwise can raise it itself."""

    def __init__(self, cause: str, folder: str, urls: tuple[str, ...], *, names: tuple[str, ...] = (),
                 network: bool = False):
        self.cause, self.folder, self.urls, self.network = cause, folder, tuple(urls), network  # network: unreachable
        self.names = tuple(names) or tuple(u.rsplit("/", 1)[-1] for u in self.urls)  # saved as
        n = len(self.urls)
        super().__init__(f"could not download {n} file{'s' * (n != 1)} into {folder}: {cause}")

    def raw(self) -> str:
        return "\n".join([self.args[0], *url_lines(self.urls, self.names, "  ")])


def url_lines(urls, names=(), indent: str = "  ") -> list[str]:
    """URLs as lines within :data:`WIDTH` columns: each folder's URL once (ending in ``/``), then the
    names of its files under it, each on a line of its own (a file saved under another name says
    so)."""
    names = tuple(names) or tuple(u.rsplit("/", 1)[-1] for u in urls)
    out: list[str] = []
    base_of: dict[str, list[tuple[str, str]]] = {}
    for url, name in zip(urls, names):
        base, _, leaf = url.rpartition("/")
        base_of.setdefault(base + "/", []).append((leaf, name))
    for base, leaves in base_of.items():
        out.append(indent + base)
        out += [f"{indent}  {leaf}" + (f"  (save as {name})" if name != leaf else "") for leaf, name in leaves]
    return out


class MissingDataError(DataError):
    """Task data that is not here, in short lines: what is missing (where it was looked for, and
    why it was not downloaded), the one command that gets it, the files to save by hand (their
    URLs, each on a line of its own: ``download``, a :class:`FilesNotDownloaded` or a tuple of
    them), the offline alternative."""

    def __init__(self, what: str, get: str | None, offline: str, *, task: str = "", where: str = "",
                 reason: str = "", download=None):
        self.what, self.get, self.offline = what, get, offline
        self.task, self.where, self.reason = task, where, reason  # for joining several into one
        self.download = download
        super().__init__(what)

    def advice(self) -> str:
        """The last two lines as one: "get it: CMD; offline: HOW"."""
        return "; ".join(([f"get it: {self.get}"] if self.get else []) + [f"offline: {self.offline}"])

    def one_line(self) -> str:
        return f"{self.what}; {self.advice()}"

    def raw(self) -> str:
        lines = [self.what]
        downloads = [d for d in (self.download if isinstance(self.download, tuple) else (self.download,))
                     if d is not None and d.urls]
        if self.get:
            back = " (once the network is back)" if downloads and all(d.network for d in downloads) else ""
            lines.append(f"  get it:  {self.get}{back}")
        for d in downloads:
            lines.append(f"  {'or ' if self.get else ''}save {'these files' if len(d.urls) > 1 else 'this file'} "
                         f"by hand into {d.folder}:")
            lines += url_lines(d.urls, d.names, "    ")
        lines.append(f"  offline: {self.offline}")
        return "\n".join(lines)
