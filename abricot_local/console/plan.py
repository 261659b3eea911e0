"""A run's plan as text (dry_plan.DryRun): the full table ``run --dry-run`` prints, and the
short lines every real run prints first. Names no task and no backend. The command line, model
names and paths are shown through console.safe.visible (an escape in a name is seen, not acted on); the
command line is folded between its arguments only, with a backslash, so that it pastes back whole."""

from __future__ import annotations

from pathlib import Path

from abricot_local.console import _duration
from abricot_local.report.safe import visible
from abricot_local.errors import WIDTH, fold, fold_command, opt, shell_word

_GIB = 1024**3


def _time(seconds: float | None, exact: bool = True) -> str:
    if seconds is None:
        return "?"
    return ("" if exact else "~") + _duration(seconds) if seconds >= 1 else "<1 s"


def error_bar(error: float, below: float | None = None) -> str:
    """A prediction's error bar as the plan shows it: " ±25%", or each side on its own where they differ
    (``below``: the bar under the prediction; " +143% / -29%": a model whose width is not known yet)."""
    if not error:
        return ""
    lower = error if below is None else below
    return f" ±{error:.0%}" if f"{error:.0%}" == f"{lower:.0%}" else f" +{error:.0%} / -{lower:.0%}"


def _bar(speed) -> str:
    """A scaled speed's error bar, as the time columns show it (:func:`error_bar`)."""
    return error_bar(speed.error, speed.below) if speed is not None and not speed.calibrated else ""


def _tokens(work) -> str:
    return "?" if work is None else ("" if work.exact else "~") + f"{work.tokens:,}"


def _speed_line(m, first: str = "") -> str:
    """A model's speed line; ``first``: the label of a model above whose line said the same note (said once)."""
    s = m.speed
    if s is None:
        return f"none, as for {visible(first)} above" if first else m.speed_note
    facts = f"{s.prompt_rate():,.3g} prompt tokens/s (a 512-token prompt), {s.per_call * 1e3:.1f} ms per decode call, " \
            f"{s.per_row * 1e3:.2f} ms per output row, load {_time(s.load)}"
    if s.calibrated:
        how = f"calibrated on this machine {s.measured}" + (f" ({s.how})" if s.how else "")
    else:
        by = m.facts.basis if m.facts else "?"
        how = (f"scaled from {s.reference} (calibrated {s.measured}) by the facts of {by}: {s.how};"
               f"{error_bar(s.error, s.below)} (`{opt('calibrate', True)}` on the model itself measures it)")
    return f"{how}: {facts}" + (f"; {m.speed_note}" if m.speed_note else "")


def _memory_line(m) -> str:
    f = m.memory
    if f is None:
        return "nothing to load (synthetic)" if not m.path and not m.download else "unknown"
    est = f"; {m.memory_estimated}" if m.memory_estimated else ""
    verdict = "fits" if f.fits else "does NOT fit " + (f"(run refuses it without {opt('force', True)})" if m.refused
                                                       else f"({opt('force', True)}: the run tries it)")
    return (f"{f.need / _GIB:.2f} GiB (weights {f.weights / _GIB:.2f} + KV cache {f.kv / _GIB:.2f}) of "
            f"{f.budget / _GIB:.1f} GiB available ({f.where()}): {verdict}{est}")


def download_line(m) -> str:
    """A model's download as a run says it before it starts (``plan: download ...``)."""
    return "plan: " + _file_line(m).replace("\n            ", "\n  ")


def _file_line(m) -> str:
    if m.download is not None and not m.download.fetches:  # a package to install first: the run refuses
        return f"file:     not here, and the run refuses (it installs nothing): {visible(m.download.refused)}"
    if m.download is not None:
        d = m.download
        size = f"{d.bytes / 1e9:.2f} GB" if d.bytes else "size unknown"
        free = f", {d.free / _GIB:.1f} GiB free there" if d.free is not None else ""
        refused = f"\n            offline: the run itself would refuse this download ({visible(d.refused)})" if d.refused else ""
        return f"download: {visible(d.what)}, {size} -> {visible(d.to)}{free}{refused}"
    if m.path:
        size = f" ({m.facts.bytes / 1e9:.2f} GB)" if m.facts else ""
        return f"file:     {visible(m.path)}{size}, on this machine"
    return "file:     none (synthetic)"


MODEL_COLUMN = (22, 40)  # the plan's model column: at least 22 wide, as wide as its names up to 40 (and WIDTH)


def full(plan, command: str = "") -> str:
    """The whole plan: a row per model and task, each model's file or download, memory and
    speed, the total, and what other item selections would cost. The model column is as wide as its names
    (:data:`MODEL_COLUMN`); a longer name is a line of its own above its rows."""
    tw = max([14, *(len(t.task) for m in plan.models for t in m.tasks)])  # task keys: TASK@PROTOCOL~VARIANT
    names = [visible(m.label) for m in plan.models]
    rest = f" {'task':<{tw}} {'items':>6} {'tokens':>11} {'calls':>7}  {'time':<13} tokens counted by"
    most = max(MODEL_COLUMN[0], min(MODEL_COLUMN[1], WIDTH - len(rest)))  # the header within WIDTH
    mw = max([MODEL_COLUMN[0], *(len(n) for n in names if len(n) <= most)])
    head = f"{_command('plan of: ', command)}\n" if command else ""
    header = f"{'model':<{mw}}{rest}"
    lines = [head + "(a dry run: nothing is scored, written or downloaded)", "", header, "-" * max(100, len(header))]
    noted: dict[str, str] = {}  # a model with no speed: its note, said by the first model that has it
    for m, label in zip(plan.models, names):
        if m.problem:
            lines += [f"{label:<{mw}} cannot be planned: {visible(m.problem)}", ""]
            continue
        if len(label) > mw and m.tasks:  # folded: the name on its own line, its rows under it
            lines.append(label)
        if m.recorded:  # a finished run's --resume: nothing loaded or scored
            lines += [*_recorded_rows(m, label, mw, tw), ""]
            continue
        for k, t in enumerate(m.tasks):
            name = label if k == 0 and len(label) <= mw else ""
            if t.problem and t.work is None:
                lines.append(_row(f"{name:<{mw}} {t.task:<{tw}} {t.items or '':>6} {'':>11} {'':>7}  {'':<13}",
                                  t.problem, mw + 1))
                continue
            exact = t.work.exact and m.speed is not None and m.speed.calibrated
            when = _time(t.seconds, exact) + (_bar(m.speed) if t.seconds is not None else "")
            basis = t.work.basis + (f"; {t.saved} saved in {opt('out')}, left out" if t.saved else "")
            lines.append(_row(f"{name:<{mw}} {t.task:<{tw}} {t.items:>6} {_tokens(t.work):>11} {t.work.calls:>7,}  "
                              f"{when:<13}", basis, mw + 1))
            lines += [fold(f"{'':<{mw + 1}}{line}") for line in _settle_lines(t, m.speed)]
            lines += [fold(f"{'':<{mw + 1}}warning: {visible(note)}") for note in t.notes]  # as the run warns
        if m.speed is not None:
            lines.append(f"{'':<{mw}} {'load':<{tw}} {'':>6} {'':>11} {'':>7}  {_time(m.speed.load):<13}")
        exact = all(t.work.exact for t in m.tasks if t.work)
        total = _time(m.seconds, exact and m.speed is not None and m.speed.calibrated)
        lines.append(f"{'':<{mw}} {'total':<{tw}} {sum(t.items for t in m.tasks):>6} {'':>11} {'':>7}  "
                     f"{total + (_bar(m.speed) if m.seconds is not None else ''):<13}".rstrip())
        first = noted.setdefault(m.speed_note, m.label) if m.speed is None and m.speed_note else m.label
        lines += [f"  {_file_line(m)}", f"  memory:   {_memory_line(m)}",
                  f"  speed:    {_speed_line(m, '' if first == m.label else first)}", ""]
    n = len(plan.models)
    scaled = [m.speed for m in plan.models if m.speed and not m.speed.calibrated]
    bar = max((s.error for s in scaled), default=0.0)
    bar_text = f"{error_bar(bar, max(s.below for s in scaled))} (a model's speed is scaled from another's)" if bar else ""
    lines.append(f"total: {_time(plan.seconds, False)} predicted for {n} model{'s' * (n != 1)} on this machine"
                 + (bar_text if plan.seconds is not None else " (a model has no speed yet: see its speed line)"))
    lines += _uncounted(plan)
    if plan.alternatives:
        lines.append("instead: " + "; ".join(f"{a.option}: {_time(a.seconds, False)}" for a in plan.alternatives))
    return fold(visible("\n".join(lines), newlines=True))


def _recorded_rows(m, label: str, mw: int, tw: int) -> list[str]:
    """The rows of a model a finished run's --resume takes as recorded, its file not here (dry_plan.ModelPlan's
    ``recorded``): each task's items left (none: those its folder holds, saved) and no time, then the note."""
    rows = []
    for k, t in enumerate(m.tasks):
        name = label if k == 0 and len(label) <= mw else ""
        said = "; ".join([*([t.problem] if t.problem else []), *([f"{t.saved} saved in {opt('out')}, left out"]
                                                                  if t.saved else [])])
        rows.append(_row(f"{name:<{mw}} {t.task:<{tw}} {t.items:>6} {'':>11} {'':>7}  {'none':<13}", said, mw + 1))
        rows += [fold(f"{'':<{mw + 1}}warning: {visible(note)}") for note in t.notes]  # as the run warns
    rows.append(f"{'':<{mw}} {'total':<{tw}} {sum(t.items for t in m.tasks):>6} {'':>11} {'':>7}  none")
    return [*rows, f"  file:     {visible(m.recorded)}: nothing to load, nothing to score"]


def _not_counted(plan) -> list:
    """The tasks of the models that could be planned whose work could not be counted (a problem, no work)."""
    return [(m, t) for m in plan.models if not m.problem for t in m.tasks if t.problem and t.work is None]


def _uncounted(plan) -> list[str]:
    """The full plan's last word on the tasks it could not count, each kind of problem as what it is: a task whose
    data is not here (no item to count: a run downloads it first), and a task whose items are here but could not
    all be counted (its line says the item and why: a run checks every prompt before it scores and stops there)."""
    missing = list(dict.fromkeys(t.task for _, t in _not_counted(plan) if not t.items))
    stopped = list(dict.fromkeys(t.task for _, t in _not_counted(plan) if t.items))
    out = []
    if missing:
        k = len(missing)
        out.append(f"  not counted: {k} task{'s' * (k != 1)} whose data is not here ({', '.join(missing)}): "
                   f"a run downloads it first and scores {'them' if k != 1 else 'it'} too (offline it cannot: see "
                   f"{'each' if k != 1 else 'the'} task's line); with the data here, a plan counts "
                   f"{'them' if k != 1 else 'it'}")
    if stopped:
        k = len(stopped)
        out.append(f"  not counted: {k} task{'s' * (k != 1)} whose items are here but could not all be counted "
                   f"({', '.join(stopped)}): see {'each' if k != 1 else 'the'} task's line; a run checks every "
                   "prompt before it scores any, and stops at the first it cannot score")
    return out


def _settle_lines(t, speed) -> list[str]:
    """A --until-settled task's looks (the items and the time of each) and where its rule would stop if each
    published value were true (dry_plan.TaskPlan's ``looks``, ``expected``)."""
    if not t.looks:
        return []
    looks = ", ".join(f"{n:,}" + (f" ({_time(sec, False)}{_bar(speed)})" if sec is not None else "") for n, sec in t.looks)
    out = [f"until settled: looks at {looks} items"]
    out += [f"  if the run's value were the published one, {q}: {kind} at {n:,} items" for q, n, kind in t.expected]
    out += [f"  cannot settle within these looks: {line}" for line in t.reach]  # settled.Reach's words
    return out


def _command(lead: str, command: str) -> str:
    """``command`` (a shell line, shlex.join's) as a user pastes it: folded between its arguments only
    (errors.fold_command), each argument quoted by errors.shell_word (a control or bidirectional character
    written as its escape inside $'...': seen, not acted on, and pasted back as it was)."""
    import shlex

    try:
        words = [shell_word(w) for w in shlex.split(command)]
    except ValueError:  # not a shell line: shown as it is
        return lead + visible(command)
    return fold_command(words, lead)


def _row(cells: str, note: str, indent: int = 23) -> str:
    """A table row and its last column; a note that would pass :data:`WIDTH` goes on lines of its
    own under the row, indented by ``indent``."""
    line = f"{cells} {note}".rstrip()
    return line if len(line) <= WIDTH else fold(f"{cells.rstrip()}\n{'':<{indent}}{note}")


def untimed(plan) -> str:
    """Why ``plan`` predicts no time (a model's speed note: how to get one), "" when it predicts one."""
    if plan.seconds is not None:
        return ""
    return next((m.speed_note for m in plan.models if m.speed_note), "?")


def brief(plan, said: str = "") -> list[str]:
    """The lines a real run prints first: one per model and task, its work, or (not counted) its problem's
    first line, then the total. ``said``: why no time was predicted, as this run's lines said it before
    (:func:`untimed`: the plan before a download); the same reason is not said again, only that there is
    still no time."""
    out = []
    for m in plan.models:
        for t in m.tasks if not m.problem else ():
            if t.work is None:
                if t.problem:  # said in one line: the problem's first (its line in the full plan has the rest)
                    out.append(f"plan: {visible(m.label)} {visible(t.task)}: not counted: {t.problem.splitlines()[0]}")
                continue
            items = f"{t.items} items left ({t.saved} saved)" if t.saved else f"{t.items} items"
            items = ("at most " if t.looks else "") + items
            out.append(f"plan: {visible(m.label)} {visible(t.task)}: {items}, {_tokens(t.work)} tokens"
                       + (f", {_time(t.seconds, False)}{_bar(m.speed)}" if t.seconds is not None else "")
                       + (f"; looks at {', '.join(str(n) for n, _ in t.looks)} items" if t.looks else ""))
            out += [f"plan: {visible(m.label)} {visible(t.task)}: cannot settle within these looks: {line}"
                    for line in t.reach]  # --until-settled: settled.Reach's words, as the dry run's
    if not out:
        return []
    left = len(_not_counted(plan))
    if plan.seconds is not None:
        sources = sorted({("calibrated" if m.speed.calibrated else "scaled from another model") + _bar(m.speed)
                          for m in plan.models if m.speed})
        out.append(f"plan: total {_time(plan.seconds, False)} with loading ({', '.join(sources)}"
                   + (f"; the {left} task{'s' * (left != 1)} not counted left out" if left else "")
                   + "; `--dry-run` shows the whole plan)")
    elif untimed(plan) == said:
        out.append("plan: no time predicted (why, and how to get a prediction: above)")
    else:
        out.append("plan: no time predicted: " + untimed(plan))
    return [fold(line) for line in out]


# -- kld --dry-run (run/kld_cost.py's KldCost) ---------------------------------------------------
def _speeds(models) -> list[str]:
    """Each model's speed in a line, the models with the same words in one (a note said once)."""
    said: dict[str, list[str]] = {}
    for m in models:
        s = m.speed
        how = m.note or "no speed" if s is None else f"calibrated on this machine {s.measured}" \
            if s.calibrated else \
            f"scaled from {visible(s.reference)} (calibrated {s.measured}){error_bar(s.error, s.below)}"
        said.setdefault(how, []).append(visible(m.label))
    return [fold(f"{'speed:' if k == 0 else '':<10}{', '.join(names)}: {how}") for k, (how, names) in
            enumerate(said.items())]


def kld(cost, command: str = "") -> str:
    """`kld --dry-run`: the reference, each reference pass (its runs, per task the items, the tokens each
    model decodes, its decode calls, the rows compared, the time; the time by model; the memory), the
    speeds, the total."""
    exact = cost.error == 0
    n, g = len(cost.rungs), len(cost.passes)
    bar = error_bar(cost.error)
    head = f"{_command('plan of: ', command)}\n" if command else ""
    lines = [head + "(a dry run: nothing is loaded, scored or written)", "",
             f"reference: {visible(cost.reference)}",
             f"  model:    {visible(cost.model.label)}" + (f" ({cost.model.quant})" if cost.model.quant else "")
             + (f", {visible(cost.model.path)}" if cost.model.path else ""),
             f"{n} run{'s' * (n != 1)} in {g} reference pass{'es' * (g != 1)} (a pass loads its runs' models beside "
             "the reference, which decodes each call once for them all)"]
    tw = max([14, *(len(t.task) for p in cost.passes for t in p.tasks)])
    for k, p in enumerate(cost.passes, 1):
        lines += ["", f"pass {k} of {g}: " + ", ".join(visible(cost.rungs[i].quant or Path(cost.rungs[i].run).name)
                                                         for i in p.rungs),
                  f"  {'task':<{tw}} {'items':>6} {'tokens':>11} {'calls':>7} {'rows compared':>14}  time"]
        for t in p.tasks:
            if t.work is None:
                lines.append(_row(f"  {t.task:<{tw}} {t.items:>6}", t.problem))
                continue
            when = _time(t.seconds, exact) + (bar if t.seconds is not None else "")
            lines.append(f"  {t.task:<{tw}} {t.items:>6} {t.work.tokens:>11,} {t.work.calls:>7,} "
                         f"{t.work.tokens * len(p.rungs):>14,}  {when}")
        lines.append(f"  {'load':<{tw}} {'':>6} {'':>11} {'':>7} {'':>14}  {_time(p.load, exact)}")
        names = ["the reference", *(visible(cost.rungs[i].quant or cost.rungs[i].label) for i in p.rungs)]
        parts = [f"{name} {_time(s, exact)}" for name, s in zip(names, p.models)]
        if p.per_row is not None:
            parts.append(f"the rows compared {_time(p.compare, exact)} ({p.per_row * 1e3:.2f} ms a row against "
                         f"{len(p.rungs)} run{'s' * (len(p.rungs) != 1)} on {cost.threads} thread"
                         f"{'s' * (cost.threads != 1)}, measured now)")
        lines.append(fold(f"  time:     {', '.join(parts)}"))
        f = p.memory
        if f is not None:
            verdict = "fits" if f.fits else "does NOT fit"
            lines.append(f"  memory:   {f.need / _GIB:.2f} GiB (weights {(f.weights - p.rows_bytes) / _GIB:.2f} + output "
                         f"rows {p.rows_bytes / _GIB:.2f} + KV caches {f.kv / _GIB:.2f}) of {f.budget / _GIB:.1f} GiB "
                         f"available ({f.where()}): {verdict}")
    lines += ["", *_speeds((cost.model, *cost.rungs))]
    total = cost.seconds
    lines.append(f"total: {_time(total, False)}{bar if total is not None else ''} predicted for {n} run"
                 f"{'s' * (n != 1)} in {g} reference pass{'es' * (g != 1)} on this machine, with loading"
                 + ("" if total is not None else " (a model has no speed yet: see the speed line)"))
    return fold(visible("\n".join(lines), newlines=True))
