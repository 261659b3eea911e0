"""This machine's measured speed for a model: a calibration, cached in the user cache.

A calibration loads the model (timed), then through the engine's own decode calls: a fixed
Italian prompt of :data:`PROMPT_TOKENS` tokens from position 0 in ``n_batch``-token calls
with one output row; the same prompt in :data:`CALLS` parts, no row; :data:`ROWS` tokens in
one call with a row each (every row through the same finite log-softmax as a run). Three
equations give seconds per token, per decode call and per output row (plan_cost.Measured),
each from the fastest of up to :data:`REPEATS` measurements.
A few seconds on a 270M model on a laptop's CPU; a large model's load (reading its file)
comes first and counts too.

Each one is kept in ``cache_dir()/calibrations.json`` under the model file's SHA-256 and what
changes the speed: the backend's ``speed_settings(options)`` (for llama.cpp: its build,
threads, n_batch, flash attention, GPU layers, extra buffer types, RPC servers) and this
host. A model not calibrated gets the speed of the calibrated model nearest in parameters
with the same settings, scaled (plan_cost.speed_from).

The cache is read entry by entry: one that is not a calibration this version writes (a
missing key, a time of 0, negative, infinite, absurd or not a number, facts that are not
numbers) is ignored and named (:func:`read`'s notes, which the dry run shows), and left out
when the next calibration rewrites the file; a file that cannot be read at all (not JSON,
nested too deep) holds none. A degenerate fit (an output row's cost fitted to 0: :func:`degenerate`) is
written beside the calibration it would have replaced, which stays the one used, and named as ignored. Writers take
``calibrations.json.lock`` (jsonfiles.locked: flock, removed when done) and
merge under it, so calibrations made at the same time are all kept.
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import MISSING, asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from abricot_local.cache import cache_dir
from abricot_local.errors import opt
from abricot_local.run.cost import Measured, ModelFacts, Speed, speed_from, widened

PROMPT_TOKENS, CALLS, ROWS = 256, 8, 32  # prompt tokens, parts of it, rows
REPEATS, REPEAT_BUDGET = 3, 3.0  # measured up to 3 times while the first ones took under 3 s
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


def cache_file() -> Path:
    return cache_dir() / "calibrations.json"


@dataclass(frozen=True)
class Calibration:
    """One model's measured speed with one set of settings on one host."""

    model: str  # the model's label when it was calibrated
    sha256: str  # the model file's (for a synthetic model: "synthetic:" + its label)
    settings: dict  # the backend's speed_settings(options)
    host: str
    measured: Measured
    facts: ModelFacts | None  # None: a synthetic model (nothing to scale by)
    when: str  # UTC, ISO 8601

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Calibration":
        return cls(d["model"], d["sha256"], dict(d["settings"]), d["host"], Measured(**d["measured"]),
                   ModelFacts(**d["facts"]) if d.get("facts") else None, d["when"])

    def speed(self, target: ModelFacts | None, same: bool) -> Speed:
        return speed_from(self.measured, self.facts, target, same=same, reference=self.model, when=self.when)


# a measured time in seconds: (least, most); a decode call's may be 0, a row's may not (:func:`degenerate`)
SECONDS = {"token_s": (0.0, 1e3), "call_s": (0.0, 1e3), "row_s": (0.0, 1e3), "load_s": (0.0, 1e6)}


DEGENERATE = "a degenerate fit"  # its note's words: measured again on a quiet machine


def degenerate(m: Measured) -> str:
    """Why a fit cannot be used ("" if it can): an output row's cost fitted to 0 (negative, clipped to 0). A row is
    a log-softmax over the whole vocabulary: never free; a 0 is a busy machine's noise swamping the three timings, and
    it would predict every row free, for this model and every model scaled from it."""
    return _zero_row(m.row_s)


def _zero_row(row_s: float) -> str:
    if row_s > 0:
        return ""
    return (f"measured.row_s is {row_s!r}: {DEGENERATE}, an output row's cost lost in a busy machine's noise, not a "
            "speed to predict or scale by")


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
            quiet = " on a quiet machine" if DEGENERATE in why else ""
            notes.append(f"{path}: calibration {k} ignored ({why}); {opt('calibrate', True)}{quiet} measures it again")
        else:
            good.append(Calibration.from_json(d))
    return Cache(tuple(good), tuple(notes))


def load() -> list[Calibration]:
    """Every usable calibration cached (see :func:`read`)."""
    return list(read().calibrations)


def store(cal: Calibration) -> Path:
    """Keep ``cal``, replacing the calibration of the same model, settings and host: read,
    merged and written under the cache's lock, so no other writer's entry is lost. A :func:`degenerate` one
    replaces nothing: it is written after the calibration it would replace, which stays the one used (:func:`read`
    ignores it, and its note says so in every plan until a calibration replaces both)."""
    from abricot_local.jsonfiles import atomic_write, locked

    path = cache_file()
    with locked(path, "calibration"):
        kept = [c for c in load() if degenerate(cal.measured)
                or (c.sha256, c.settings, c.host) != (cal.sha256, cal.settings, cal.host)]
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
    return widened(lambda f: near.speed(f, same=False), facts)


def measure(backend, load_s: float) -> Measured:
    """Time the three kinds of work on ``backend``'s engine (see the module's text)."""
    engine = backend.engine
    n_batch, n_ctx = engine.session.n_batch, backend.n_ctx()
    tokens = tuple(backend.tokenize(TEXT * 4)[: max(CALLS, min(PROMPT_TOKENS, n_ctx - 1))])
    n, part = len(tokens), len(tokens) // CALLS

    def timed(work) -> float:
        engine.reset()
        t0 = time.perf_counter()
        work()
        dt = time.perf_counter() - t0
        engine.reset()
        return dt

    def in_parts() -> None:
        for k in range(0, CALLS * part, part):
            engine.decode(k, tokens[k : k + part], (), LABEL)

    rows = min(ROWS, n - 1)
    timed(lambda: engine.decode(0, tokens[:8], (), LABEL))  # warm-up: first-call allocations
    best = [math.inf] * 3
    start = time.perf_counter()
    for _ in range(REPEATS):  # the fastest of each: other processes only ever slow a measurement down
        got = (timed(lambda: engine.decode(0, tokens, {n - 1: ()}, LABEL)), timed(in_parts),
               timed(lambda: engine.decode(0, tokens[:rows], {p: (tokens[p + 1],) for p in range(rows)}, LABEL)))
        best = [min(b, g) for b, g in zip(best, got)]
        if time.perf_counter() - start > REPEAT_BUDGET:
            break
    return fit(n, part, rows, n_batch, best, load_s)


def fit(n: int, part: int, rows: int, n_batch: int, seconds, load_s: float) -> Measured:
    """The costs the three timings (``seconds``: the prompt of ``n`` tokens with one row, it in :data:`CALLS` parts of
    ``part`` tokens, ``rows`` tokens with a row each) give: seconds = tokens x + calls y + rows z for each, solved,
    each cost clipped to what noise leaves possible (a row's may clip to 0: :func:`degenerate`)."""
    t_prompt, t_parts, t_rows = seconds
    calls = [math.ceil(n / n_batch), CALLS * math.ceil(part / n_batch), math.ceil(rows / n_batch)]
    a = np.array([[n, calls[0], 1], [CALLS * part, calls[1], 0], [rows, calls[2], rows]], float)
    x, y, z = np.linalg.lstsq(a, np.array([t_prompt, t_parts, t_rows]), rcond=None)[0]
    y = min(max(float(y), 0.0), t_parts / calls[1] / 2)  # noise: a call is not most of its work
    z = min(max(float(z), 0.0), t_rows / rows / 2)
    x = max((t_prompt - calls[0] * y - z) / n, t_prompt / n / 10)
    return Measured(token_s=x, prompt_tokens=n, call_s=y, row_s=z, load_s=load_s)


def calibrate(ref, options, settings: dict, facts: ModelFacts | None) -> Calibration:
    """Load ``ref`` (a modelref.ModelRef) with ``options``, measure it, cache the result."""
    from abricot_local.models.given import load

    t0 = time.perf_counter()
    backend = load(ref, options, force=True)
    try:
        measured = measure(backend, time.perf_counter() - t0)
    finally:
        backend.close()
    sha = ref.sha256 or f"synthetic:{ref.label}"
    cal = Calibration(ref.label, sha, settings, host(), measured, facts,
                      datetime.now(timezone.utc).isoformat(timespec="seconds"))
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
