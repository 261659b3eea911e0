"""The kernel path: what decides a run's arithmetic, recorded in ``provenance.kernels``
(:class:`~abricot_local.record.schema.Kernels`), described in one line, and compared
between a recorded run and this machine (``check``).

Compared: the runtime (its version is its kernels' code), the build (portable, native...)
when both are known, the CPU features its kernels use, whether the weights use extra
buffer types, and every device but the CPU (name, model, compute capability, driver). Not
compared: the CPU's model (a portable build's kernels do not depend on it: docs/numerics.md)
and the thread count (it moves numbers only in decode calls the backend counts as thread
dependent; ``check`` names those). A run made of parts (a resumed run's processes, a merged run's
shards) states the thread count its thread-dependent numbers were made with (:func:`joined_threads`).
Names no backend.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence

from abricot_local.record.schema import Device, Kernels, Provenance

UNKNOWN = "unknown"
# a part of a run (a process of a resumed run, a shard of a merged one): (its thread count, its thread-dependent
# decode calls), None where not known
Part = tuple[Optional[int], Optional[int]]


def recorded(prov: Provenance | None) -> Kernels | None:
    """A run's kernel path: its ``provenance.kernels``, or None (nothing recorded)."""
    return None if prov is None else prov.kernels


def _device(d: Device) -> str:
    facts = [f for f in (f"compute capability {d.compute_capability}" if d.compute_capability else "",
                         f"driver {d.driver}" if d.driver else "", d.endpoint or "") if f]
    what = f"{d.name} {d.description}".strip() if d.description and d.description != d.name else d.name
    return what + (f" ({', '.join(facts)})" if facts else "")


def accelerators(k: Kernels) -> tuple[str, ...]:
    """The devices other than the CPU, each described (what it is, compute capability, driver)."""
    return tuple(_device(d) for d in k.devices if d.type != "cpu")


def _build(k: Kernels) -> str:
    return f"{k.build} build" + (f" ({' '.join(k.cpu_features)})" if k.cpu_features else "")


def describe(k: Kernels | None) -> str:
    """One line: the build and its CPU features, the weights' buffer types, the devices, the runtime."""
    if k is None:
        return "not recorded"
    parts = [_build(k)]
    if k.extra_bufts is not None:
        parts.append("repacked CPU weights (extra buffer types on)" if k.extra_bufts
                     else "plain CPU kernels (extra buffer types off)")
    devices = accelerators(k)
    parts.append("devices: " + ", ".join(devices) if devices else "CPU only")
    if k.cpu:
        parts.append(f"CPU {k.cpu}")
    return "; ".join(parts) + f"; {k.runtime}"


def _known(a: Any, b: Any) -> bool:
    return a not in (None, UNKNOWN) and b not in (None, UNKNOWN)


def differences(rec: Kernels | None, here: Kernels | None) -> tuple[str, ...]:
    """What differs in the arithmetic between a recorded kernel path and this one, one line
    each ("build: recorded portable build (AVX AVX2 F16C FMA), here native build (...)");
    empty when they are the same, or when the run recorded none."""
    if rec is None or here is None:
        return ()
    out = []
    if rec.runtime != here.runtime and _known(rec.runtime, here.runtime):
        out.append(f"runtime: recorded {rec.runtime}, here {here.runtime}")
    if rec.cpu_features != here.cpu_features or (rec.build != here.build and _known(rec.build, here.build)):
        out.append(f"build: recorded {_build(rec)}, here {_build(here)}")
    if rec.extra_bufts != here.extra_bufts and _known(rec.extra_bufts, here.extra_bufts):
        shown = {True: "on", False: "off"}
        out.append(f"extra buffer types (repacked CPU weights): recorded {shown[rec.extra_bufts]}, "
                   f"here {shown[here.extra_bufts]}")
    if accelerators(rec) != accelerators(here):
        out.append(f"devices: recorded {', '.join(accelerators(rec)) or 'CPU only'}, "
                   f"here {', '.join(accelerators(here)) or 'CPU only'}")
    return tuple(out)


def thread_note(rec: Kernels | None, here: Kernels | None, dependent: int) -> tuple[str | None, bool]:
    """(a line on the thread counts, or None when they agree or this machine's is unknown; whether they can
    have moved numbers: ``dependent`` decode calls of the re-scoring depended on them). A run that states no
    count (its parts' thread-dependent calls were made at several, or not counted: :func:`joined_threads`) is
    another kernel path wherever a call depends on the count."""
    if rec is None or here is None or here.threads is None or rec.threads == here.threads:
        return None, False
    recorded = f"recorded {rec.threads}" if rec.threads is not None else "not recorded as one count"
    if dependent:
        return (f"threads: {recorded}, here {here.threads}; {dependent} decode call(s) of these items "
                "depend on the thread count (docs/numerics.md#threads)"), True
    return (f"threads: {recorded}, here {here.threads}; no decode call of these items depends on "
            "the thread count"), False


def part(prov: Provenance | None) -> Part:
    """A finished run as one part of a larger one: its kernels' (threads, thread_dependent)."""
    k = recorded(prov)
    return (None, None) if k is None else (k.threads, k.thread_dependent)


def joined_threads(parts: Sequence[Part], own: int | None) -> Part:
    """The (threads, thread_dependent) a run made of ``parts`` records: the calls summed (None when a part's were
    not counted); the thread count of the parts whose numbers may depend on it (calls made, or not counted) when
    that is one count (None when it is several, or unknown), else ``own`` (what the record states already: no
    number depends on the count, any count gives them all)."""
    total = None if any(c is None for _, c in parts) else sum(c for _, c in parts)
    made = {t for t, c in parts if c is None or c > 0}
    if not made:
        return own, total
    return (made.pop() if len(made) == 1 else None), total


def thread_conflict(parts: Sequence[Part]) -> tuple[int, ...]:
    """The known thread counts of the parts that made thread-dependent decode calls, when there are several (no
    one count made the numbers: merge and --resume refuse that); else ()."""
    made = sorted({t for t, c in parts if c and t is not None})
    return tuple(made) if len(made) > 1 else ()


def with_threads(prov: Provenance, parts: Sequence[Part]) -> Provenance:
    """``prov`` (a run's, made of ``parts``) stating what they made (:func:`joined_threads`): its kernels'
    ``threads`` and ``thread_dependent``, and the backend's own ``threads`` key where it records one."""
    k = prov.kernels
    if k is None or not parts:
        return prov
    threads, calls = joined_threads(parts, k.threads)
    extra = {**prov.extra, "threads": threads} if "threads" in prov.extra else prov.extra
    return replace(prov, extra=extra, kernels=replace(k, threads=threads, thread_dependent=calls))
