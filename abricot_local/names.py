"""Did-you-mean for mistyped names (tasks, groups, model aliases): by edit distance only, and
only close matches, so a suggestion is a likely typo and never a merely similar word;
:func:`path_part`, the one place a name becomes part of a path; and plugins' entry points by name as every
registry reads them (tasks/, backends/, models/stores/: :func:`grouped`, each name's distinct entries, a package
found twice being one; :func:`plugin_entries`, the plugins' names against the shipped ones: a plugin's entry
taking a shipped name ignored, a name two plugins register refused) and the words a message names them in
(:func:`listed`, :func:`where`); each registry keeps its own rules (what it ships, its messages' words, whether a
name two plugins register stays listed, what a broken entry means)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Callable, Container, Iterable, Mapping

MAX_PART = 120  # characters of a name made a path part (a file system allows 255 bytes)


def path_part(name: str, fallback: str = "run") -> str:
    """``name`` as one part of a path that stays where it is put: separators, control and format
    characters become ``_``; leading dots and spaces go (no ``.``, ``..`` or hidden name), as
    do trailing ones; an empty result is ``fallback``. An ordinary name comes back as it is."""
    chars = ("_" if c in "/\\" or unicodedata.category(c)[0] in "CZ" and c != " " else c for c in str(name))
    part = "".join(chars)[:MAX_PART].strip(". ")
    return part or fallback


def distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) turning ``a`` into ``b``."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def allowed(name: str) -> int:
    """The most edits a close match may be away: 1 up to 7 characters, then one more per 4, at most 3."""
    return max(1, min(3, len(name) // 4))


SUFFIX_SEPARATORS = "-_.:@~"  # a name, then one of these: a longer name of the same thing (smollm2-135m-pypi)


def close_names(name: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """The known names at most :func:`allowed` edits from ``name`` (case ignored), nearest first;
    then those that are ``name`` with a suffix (``smollm2-135m`` -> ``smollm2-135m-pypi``)."""
    low = name.lower()
    scored = sorted((distance(low, k.lower()), k) for k in set(known))
    near = [k for d, k in scored if d <= allowed(name)]
    longer = sorted(k for k in set(known) if k not in near and len(k) > len(low) and k.lower().startswith(low)
                    and k[len(low)] in SUFFIX_SEPARATORS and low)
    return (near + longer)[:limit]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" Did you mean: X?" for close matches, else ""."""
    close = close_names(name, known)
    return f" Did you mean: {', '.join(close)}?" if close else ""


def grouped(eps: Iterable[EntryPoint], fold: Callable[[str], str] = str) -> dict[str, tuple[EntryPoint, ...]]:
    """Each name (``fold``-ed: tasks' are case-blind) with its distinct entries, in the order found; names sorted."""
    found: dict[str, dict[str, EntryPoint]] = {}
    for ep in eps:
        found.setdefault(fold(ep.name), {}).setdefault(ep.value, ep)
    return {name: tuple(found[name].values()) for name in sorted(found)}


def package(ep: EntryPoint) -> str:
    """The installed package an entry comes from ("" when not known)."""
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else ""


def from_package(ep: EntryPoint) -> str:
    """`` (package NAME)`` when the entry's package is known, else ""."""
    return f" (package {package(ep)})" if package(ep) else ""


def listed(name: str, eps: Iterable[EntryPoint]) -> str:
    """The entries of ``name`` as a message names them: ``name = module:attr (package P) and ...``."""
    return " and ".join(f"{name} = {ep.value}{from_package(ep)}" for ep in eps)


def where(ep: EntryPoint) -> str:
    """An entry as a refusal names it in parentheses: ``module:attr, package P`` (the package when known)."""
    return ep.value + (f", package {package(ep)}" if package(ep) else "")


@dataclass(frozen=True)
class Clashes:
    """A registry's words for its plugins' clashes: ``str.format`` templates of ``name`` (a plugin's name) and
    ``entries`` (:func:`listed`): ``ignored``, a plugin's entry taking a shipped name; ``several``, a name several
    plugins register."""

    ignored: str
    several: str


@dataclass(frozen=True)
class Plugins:
    """A registry's plugin entries against the names it ships (:func:`plugin_entries`)."""

    entries: dict[str, tuple[EntryPoint, ...]]  # each name no shipped one has -> its entries, names sorted
    several: dict[str, str]  # a name several plugins register -> why it is refused
    ignored: dict[str, str]  # a name a plugin takes from a shipped one -> why its entries are ignored

    def over(self, shipped: Mapping[str, object]) -> dict[str, object]:
        """``shipped``, then each plugin name with its first entry (a name several plugins register too: it is
        refused when it is used, :attr:`several`)."""
        return {**shipped, **{name: eps[0] for name, eps in self.entries.items()}}


def plugin_entries(eps: Iterable[EntryPoint], shipped: Container[str], words: Clashes,
                   fold: Callable[[str], str] = str) -> Plugins:
    """The plugins' entries ``eps`` by name (:func:`grouped`, ``fold``-ed) against the ``shipped`` names: a
    plugin's entry taking a shipped name is ignored (the shipped one runs), a name several plugins register is
    refused; each said in the registry's ``words``."""
    entries, several, ignored = {}, {}, {}
    for name, found in grouped(eps, fold).items():
        said = {"name": name, "entries": listed(name, found)}
        if name in shipped:
            ignored[name] = words.ignored.format(**said)
            continue
        entries[name] = found
        if len(found) > 1:
            several[name] = words.several.format(**said)
    return Plugins(entries, several, ignored)
