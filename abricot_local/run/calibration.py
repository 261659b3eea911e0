"""This machine's measured speed for a model: a calibration, cached in the user cache.

A calibration loads the model (timed), then times the engine's own decode calls (:func:`timings`), in pairs
that differ in one thing each, so that what the two have in common, and a busy machine's slow spells between
pairs, cancel: a fixed Italian prompt of :data:`PROMPT_TOKENS` tokens from position 0 in ``n_batch``-token calls
and in :data:`CALLS` parts (a row at its end in both: the calls differ), and :data:`ROWS` tokens with one output
row and with a row each (the rows differ; every row through the same finite log-softmax as a run). :func:`fit`
gives seconds per token, per decode call and per output row (cost.Measured): the costs of a call and of a row
from the medians of their pairs' differences, a token's from the fastest whole prompt. The rows' pair is timed
:data:`MIN_REPEATS` to :data:`REPEATS` times, the prompt's 1 to :data:`REPEATS` times, more only while the
calibration has taken under :data:`REPEAT_BUDGET` seconds. A row whose median difference the pairs' spread does
not resolve (a busy machine: :func:`resolved`) is not fitted to 0: its cost is the token's measured one times the
output head's FLOPs over a token's (ModelFacts.row_flops: width x vocabulary), and the calibration says so
(``Calibration.row``, shown in the speed line). A few seconds on a 270M model on
a laptop's CPU; a large model's load (reading its file) comes first and counts too.

Each one is kept in ``cache_dir()/calibrations.json`` under the model file's SHA-256 and what
changes the speed: the backend's ``speed_settings(options)`` (for llama.cpp: its build,
threads, n_batch, flash attention, GPU layers, extra buffer types, RPC servers) and this
host. A model not calibrated gets the speed of the calibrated model nearest in parameters
with the same settings, scaled (cost.speed_from; Calibration.scaled).

The cache is read entry by entry: one that is not a calibration this version writes (a
missing key, a time of 0, negative, infinite, absurd or not a number, facts that are not
numbers) is ignored and named (:func:`read`'s notes, which the dry run shows), and left out
when the next calibration rewrites the file; a file that cannot be read at all (not JSON,
nested too deep) holds none. A degenerate fit (an output row's cost of 0: :func:`degenerate`; earlier versions
stored some) is never stored: :func:`calibrate` refuses it in one line, and the calibration before stays. Writers take
``calibrations.json.lock`` (jsonfiles.locked: flock, removed when done by the writer that made it) and
merge under it, so calibrations made at the same time are all kept.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from dataclasses import MISSING, asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path

from abricot_local.cache import cache_dir
from abricot_local.errors import opt
from abricot_local.run.cost import Measured, Speed, speed_from
from abricot_local.run.model_facts import ModelFacts, widened

PROMPT_TOKENS, CALLS, ROWS = 256, 8, 32  # prompt tokens, parts of it, rows
MIN_REPEATS, REPEATS, REPEAT_BUDGET = 3, 9, 3.0  # pairs timed 3 to 9 times, while under 3 s
RESOLVED = 2.0  # a row's median difference resolved: above this many of its robust standard errors
LABEL = "calibration"
TEXT = (
    "Nel piccolo paese di montagna, la biblioteca comunale apriva soltanto il martedì e il venerdì. "
    "Chi voleva un libro doveva prenotarlo con una settimana di anticipo, scrivendo il titolo su un "
    "quaderno appeso accanto alla porta. La bibliotecaria, una signora anziana che aveva insegnato "
    "matematica per quarant'anni, conosceva i gusti di tutti: ai ragazzi consigliava romanzi "
    "d'avventura, agli anziani le raccolte di poesie, ai turisti le guide dei sentieri. D'inverno, "
    "quando la neve chiudeva la strada per la valle, la sala di lettura diventava il luogo più "
    "frequentato del paese, perché era l'unica stanza pubblica riscaldata. Si leggeva, si giocava a "
    "carte, si discuteva delle notizie arrivate con l'ultima corriera. Nessuno ricordava chi avesse "
    "fondato la biblioteca, ma una targa di ottone, ormai annerita, portava la data del 1923 e il nome "
    "di un medico che, secondo la leggenda, aveva lasciato al comune tutti i suoi libri e una piccola "
    "somma per comprarne di nuovi ogni anno. "
)


def host() -> str:
    return f"{platform.node()} ({platform.machine()})"


def synthetic_key(label: str) -> str:
    """The key a synthetic model (a backend that reads no model file) is calibrated under, in place of a file's
    SHA-256: ``synthetic:<label>`` (the one place it is made; a run's record never holds it)."""
    return f"synthetic:{label}"


def cache_file() -> Path:
    return cache_dir() / "calibrations.json"


@dataclass(frozen=True)
class Calibration:
    """One model's measured speed with one set of settings on one host."""

    model: str  # the model's label when it was calibrated
    sha256: str  # the model file's (for a synthetic model: synthetic_key(its label))
    settings: dict  # the backend's speed_settings(options)
    host: str
    measured: Measured
    facts: ModelFacts | None  # None: a synthetic model (nothing to scale by)
    when: str  # UTC, ISO 8601
    row: str = ""  # how its output row's cost was had, where the timings did not resolve it ("": measured)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Calibration":
        return cls(d["model"], d["sha256"], dict(d["settings"]), d["host"], Measured(**d["measured"]),
                   ModelFacts(**d["facts"]) if d.get("facts") else None, d["when"], d.get("row", ""))

    def speed(self, target: ModelFacts | None, same: bool) -> Speed:
        speed = speed_from(self.measured, self.facts, target, same=same, reference=self.model, when=self.when)
        return replace(speed, how=self.row) if same and self.row else speed

    def scaled(self, target: ModelFacts) -> Speed:
        """This calibration's speed scaled to another model of facts ``target``, its band widened where those
        facts are estimated from a parameter count (model_facts.widened): :func:`speed_for`'s, bench/'s."""
        return widened(lambda f: self.speed(f, same=False), target)


# a measured time in seconds: (least, most); a decode call's may be 0, a row's may not (:func:`degenerate`)
SECONDS = {"token_s": (0.0, 1e3), "call_s": (0.0, 1e3), "row_s": (0.0, 1e3), "load_s": (0.0, 1e6)}


DEGENERATE = "a degenerate fit"  # its note's words


def degenerate(m: Measured) -> str:
    """Why a fit cannot be used ("" if it can): an output row's cost of 0. A row is the output head and a
    log-softmax over the whole vocabulary: never free; a 0 would predict every row free, for this model and every
    model scaled from it. :func:`fit` makes none where the model's facts are known; earlier versions stored some."""
    return _zero_row(m.row_s)


def _zero_row(row_s: float) -> str:
    return "" if row_s > 0 else f"measured.row_s is {row_s!r}, {DEGENERATE}: an output row is never free"


@dataclass(frozen=True)
class Cache:
    """What ``calibrations.json`` holds: the calibrations that can be used, and a note per
    entry ignored."""

    calibrations: tuple[Calibration, ...]
    notes: tuple[str, ...] = ()


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def problem(d) -> str:
    """Why a cached entry is not a calibration this version can use ("" if it is)."""
    if not isinstance(d, dict):
        return "not a JSON object"
    for key, kind in (("model", str), ("sha256", str), ("settings", dict), ("host", str), ("when", str),
                      ("measured", dict)):
        if not isinstance(d.get(key), kind):
            return f"{key} is missing or not {'an object' if kind is dict else 'text'}"
    m = d["measured"]
    for key, (low, high) in SECONDS.items():
        v = m.get(key)
        if not _number(v) or not low <= v <= high or (key == "token_s" and v <= 0):
            least = "above 0" if key == "token_s" else "at least 0"
            return f"measured.{key} is {v!r}, not a number of seconds {least} and at most {high:g}"
    if _zero_row(m["row_s"]):
        return _zero_row(m["row_s"])
    if not isinstance(d.get("row", ""), str):
        return "row is not text"
    if not (isinstance(m.get("prompt_tokens"), int) and 2 <= m["prompt_tokens"] <= 10**7) or \
            isinstance(m.get("prompt_tokens"), bool):
        return f"measured.prompt_tokens is {m.get('prompt_tokens')!r}, not a count of tokens"
    if set(m) != {f.name for f in fields(Measured)}:
        return "measured has other keys than token_s, prompt_tokens, call_s, row_s and load_s"
    facts = d.get("facts")
    if facts is None:
        return ""
    if not isinstance(facts, dict):
        return "facts is not an object"
    known = {f.name: f for f in fields(ModelFacts)}
    for key, value in facts.items():
        if key not in known:
            return f"facts.{key} is not a fact this version knows"
        if key == "basis":
            if not isinstance(value, str):
                return "facts.basis is not text"
        elif not _number(value) or value < 0 or (key == "params" and value <= 0):
            return f"facts.{key} is {value!r}, not a number at least 0"
    missing = [k for k, f in known.items() if k not in facts and f.default is MISSING]
    return f"facts lacks {', '.join(missing)}" if missing else ""


def read() -> Cache:
    """Every usable calibration cached, each bad entry ignored and named (a file that cannot be
    read at all holds none, with a note; a missing one holds none)."""
    from abricot_local.jsonfiles import BadJSON, loads

    path = cache_file()
    try:
        doc = loads(path.read_bytes())
    except FileNotFoundError:
        return Cache(())
    except (OSError, BadJSON) as exc:
        return Cache((), (f"{path} ignored: {exc.strerror if isinstance(exc, OSError) else exc}",))
    entries = doc.get("calibrations") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        return Cache((), (f"{path} ignored: it holds no list of calibrations",))
    good, notes = [], []
    for k, d in enumerate(entries, 1):
        why = problem(d)
        if why:
            notes.append(f"{path}: calibration {k} ignored ({why}); {opt('calibrate', True)} measures it again")
        else:
            good.append(Calibration.from_json(d))
    return Cache(tuple(good), tuple(notes))


def load() -> list[Calibration]:
    """Every usable calibration cached (see :func:`read`)."""
    return list(read().calibrations)


def store(cal: Calibration) -> Path:
    """Keep ``cal``, replacing the calibration of the same model, settings and host: read,
    merged and written under the cache's lock, so no other writer's entry is lost (the entries :func:`read`
    ignores are left out). A :func:`degenerate` one is refused (ValueError; :func:`calibrate` says why in one
    line): once written beside the others, each was dropped by the next store, which keeps only what :func:`read`
    can use, so of a ladder's rungs calibrated in turn only the last one's was left."""
    from abricot_local.jsonfiles import atomic_write, locked

    if degenerate(cal.measured):
        raise ValueError(f"not stored: {degenerate(cal.measured)}")
    path = cache_file()
    with locked(path, "calibration"):
        kept = [c for c in load() if (c.sha256, c.settings, c.host) != (cal.sha256, cal.settings, cal.host)]
        doc = {"version": 1, "calibrations": [c.to_json() for c in [*kept, cal]]}
        atomic_write(path, json.dumps(doc, indent=1) + "\n")
    return path


def speed_for(sha256: str | None, settings: dict, facts: ModelFacts | None) -> Speed | None:
    """This model's calibrated speed with these settings on this host; else the speed of the
    calibrated model nearest in parameters with the same settings, scaled to ``facts``; else
    None (no calibration yet, or nothing to scale by)."""
    same_settings = [c for c in load() if c.settings == settings and c.host == host()]
    own = [c for c in same_settings if sha256 and c.sha256 == sha256]
    if own:  # the same file: its own facts (from its header), whatever the caller could know
        return own[-1].speed(own[-1].facts or facts, same=True)
    others = [c for c in same_settings if c.facts is not None]
    if facts is None or not others:
        return None
    near = min(others, key=lambda c: abs(math.log(max(c.facts.params, 1) / max(facts.params, 1))))
    return near.scaled(facts)


@dataclass(frozen=True)
class Timings:
    """A calibration's measurements in seconds, as :func:`fit` reads them: the prompt's pair (``whole[k]`` and
    ``parts[k]`` timed one after the other, in ``calls`` and ``part_calls`` decode calls, a row at its end in
    both) and the rows' pair (``one_row[k]`` and ``all_rows[k]``: the same ``rows`` tokens with a row at the last
    and with a row each)."""

    tokens: int
    calls: int
    part_calls: int
    rows: int
    whole: tuple[float, ...]
    parts: tuple[float, ...]
    one_row: tuple[float, ...]
    all_rows: tuple[float, ...]


@dataclass(frozen=True)
class Fit:
    """What :func:`fit` makes of :class:`Timings`: the costs, and how the row's was had ("": measured)."""

    measured: Measured
    row: str = ""


def timings(backend) -> Timings:
    """Time the two pairs on ``backend``'s engine (see the module's text), each pair in turn in either order."""
    engine = backend.engine
    n_batch, n_ctx = engine.session.n_batch, backend.n_ctx()
    tokens = tuple(backend.tokenize(TEXT * 4)[: max(CALLS, min(PROMPT_TOKENS, n_ctx - 1))])
    n = len(tokens)
    cuts = [n * k // CALLS for k in range(CALLS + 1)]
    rows = min(ROWS, n - 1)

    def timed(work) -> float:
        engine.reset()
        t0 = time.perf_counter()
        work()
        dt = time.perf_counter() - t0
        engine.reset()
        return dt

    def in_parts() -> None:
        for a, b in zip(cuts, cuts[1:]):
            engine.decode(a, tokens[a:b], {n - 1: ()} if b == n else (), LABEL)

    prompt = (lambda: engine.decode(0, tokens, {n - 1: ()}, LABEL), in_parts)
    row_pair = (lambda: engine.decode(0, tokens[:rows], {rows - 1: (tokens[rows],)}, LABEL),
                lambda: engine.decode(0, tokens[:rows], {p: (tokens[p + 1],) for p in range(rows)}, LABEL))
    timed(lambda: engine.decode(0, tokens[:8], (), LABEL))  # warm-up: first-call allocations
    got: tuple[list[float], ...] = ([], [], [], [])
    start = time.perf_counter()
    for k in range(REPEATS):
        order = (0, 1) if k % 2 == 0 else (1, 0)  # a slow spell falls on either side of a pair alike
        if k == 0 or time.perf_counter() - start <= REPEAT_BUDGET:
            for i in order:
                got[i].append(timed(prompt[i]))
        for i in order:
            got[2 + i].append(timed(row_pair[i]))
        if k + 1 >= MIN_REPEATS and time.perf_counter() - start > REPEAT_BUDGET:
            break
    calls = math.ceil(n / n_batch)
    part_calls = sum(math.ceil((b - a) / n_batch) for a, b in zip(cuts, cuts[1:]))
    return Timings(n, calls, part_calls, rows, *(tuple(g) for g in got))


def measure(backend, load_s: float, facts: ModelFacts | None = None) -> Measured:
    """Time the engine of ``backend`` (:func:`timings`) and fit its costs (:func:`fit`)."""
    return fit(timings(backend), load_s, facts).measured


def resolved(differences) -> float | None:
    """The median of ``differences`` (paired timings' differences) where it is resolved: above 0 and above
    :data:`RESOLVED` times its robust standard error (1.4826 x the median absolute deviation over the square root
    of their number); else None (noise swamps it)."""
    mid = statistics.median(differences)
    spread = 1.4826 * statistics.median(abs(d - mid) for d in differences) / math.sqrt(len(differences))
    return mid if mid > 0 and mid > RESOLVED * spread else None


def fit(t: Timings, load_s: float, facts: ModelFacts | None = None) -> Fit:
    """The costs of :class:`Timings`: a row's from the median difference of the rows' pair, where resolved
    (:func:`resolved`); else, with ``facts``, a token's measured cost times the output head's FLOPs over a token's
    at the prompt's mean position (``Fit.row`` says so); else its median difference, 0 if not above it
    (:func:`degenerate`). A call's from the prompt's pair (0 if not above it; at most half its part's time), a
    token's from the fastest whole prompt less its calls and row (at least a tenth of it)."""
    n, whole = t.tokens, min(t.whole)
    added = t.part_calls - t.calls
    y = statistics.median(p - w for p, w in zip(t.parts, t.whole)) / added if added > 0 else 0.0
    y = min(max(y, 0.0), min(t.parts) / t.part_calls / 2)  # noise: a call is not most of its work
    per_row = [(a - o) / (t.rows - 1) for a, o in zip(t.all_rows, t.one_row)]  # rows >= 7: tokens >= CALLS
    z, row = resolved(per_row), ""
    ratio = facts.row_flops / facts.flops((n - 1) / 2) if facts and facts.row_flops and facts.params else 0.0
    if z is None and ratio:  # whole = n x + calls y + ratio x
        x = max((whole - t.calls * y) / (n + ratio), whole / n / 10)
        z = ratio * x
        row = (f"an output row estimated as {ratio:.3g} tokens, the output head's FLOPs over a token's: this "
               "machine's noise hid the row's own timing")
    else:
        z = max(statistics.median(per_row), 0.0) if z is None else z
        x = max((whole - t.calls * y - z) / n, whole / n / 10)
    return Fit(Measured(token_s=x, prompt_tokens=n, call_s=y, row_s=z, load_s=load_s), row)


def calibrate(ref, options, settings: dict, facts: ModelFacts | None) -> Calibration:
    """Load ``ref`` (a modelref.ModelRef) with ``options``, measure it, cache the result; a
    :func:`degenerate` fit is refused in one line and nothing is stored."""
    from abricot_local.errors import AbricotError
    from abricot_local.models.given import load

    t0 = time.perf_counter()
    backend = load(ref, options, force=True)
    try:
        load_s = time.perf_counter() - t0
        made = fit(timings(backend), load_s, facts)
    finally:
        backend.close()
    if degenerate(made.measured):
        raise AbricotError(f"calibration of {ref.label}: an output row's cost not resolved from this machine's "
                           f"noise, and no facts of the model to estimate it by; nothing stored: "
                           f"{opt('calibrate', True)} again when the machine is less busy")
    sha = ref.sha256 or synthetic_key(ref.label)
    cal = Calibration(ref.label, sha, settings, host(), made.measured, facts,
                      datetime.now(timezone.utc).isoformat(timespec="seconds"), made.row)
    store(cal)
    return cal


def busy() -> str:
    """A note when the machine was busy while a calibration ran (its speed is a busy machine's)."""
    import os

    try:
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
    except (OSError, AttributeError):
        return ""
    return (f"; the machine was busy (load average {load:.1f} on {cores} cores): this speed is a busy machine's, "
            "calibrate again when it is idle") if load > cores else ""
