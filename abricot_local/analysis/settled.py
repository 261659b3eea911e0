"""A ``--until-settled`` run's own verdict on a published row its rule judged (:func:`settled_verdict`): the rule's,
at the look it stopped at, in the run's own line; what the fixed-n verdict beside it is (:data:`FIXED_N`: at the
margin the rule read, the run's ``--margin`` else the task's, so the two differ by the looks alone). Such a row's
every field is the rule's (:meth:`SettledVerdict.fields`: its verdict, its interval at its look and level, what settles
it: the next look, the ``--max-items`` a grow takes it at, or, the estimate of the items that would settle it lying
far beyond that look, the bound that could: :class:`Reach`, the one rule of that advice, for the run's end message,
`report`, the API, the quant ladder's line and the dry run, a run's figure always its record's, :func:`fixed_n_needed`),
the fixed-n figures under ``fixed_n``. Read by
`report` (overview.py, report/tables.py) and the API's ``Run.published()`` (frames.py). A rule and its record, typed both ways
(:func:`restored`, :func:`record_of`: sequential.Sequential <-> record.Settle, field by field). Pure: reads a record."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable

from abricot_local import metrics
from abricot_local.analysis import sequential as sq
from abricot_local.analysis import stats
from abricot_local.analysis.reproduction import words as fixed_n_words
from abricot_local.errors import opt
from abricot_local.record import PublishedCheck, Record, Settle, SettleLook, SettleQuestion

# what the fixed-n verdict of a row a --until-settled rule judged is, beside the rule's (console.settled's words)
FIXED_N = ("the fixed-n 90% verdict over the same items, at the rule's margin: it does not account for the looks "
           "this run took")


FAR = 2  # an estimate of the items needed past twice the look at hand lies far beyond it (past the look after next)


@dataclass(frozen=True)
class Reach:
    """Whether the look at hand (``at`` items: a stopped run's next look, were it grown; a plan's last) can settle an
    open verdict at ``margin``, by an estimate of the items that would (``needed``; stats.MAX_ITEMS: none would, the
    difference on the margin): a run's, the fixed-n figure (:func:`fixed_n_needed`); a plan's (``least``), the look
    at which its rule could first show the value within the margin, however its answers fall (:func:`plan_reach`).
    The one rule of the advice a run open at its last look gets (settle_record.advice: the run's end message and
    the API's warning; :attr:`SettledVerdict.step`: `report`, ``Run.published()``; the quant ladder's line) and of
    the dry run's until-settled lines (settle.forecast): an estimate :attr:`far` beyond the look says so, with its
    figure and the bound that could settle it (:attr:`bound`), or a wider ``--margin``."""

    at: int
    needed: int
    total: int
    margin: float
    least: bool = False  # a plan's figure: no run settles it as within the margin sooner
    basis: str = ""  # where an estimate comes from, if not a recorded fixed-n figure; a least one's, its case

    @property
    def far(self) -> bool:
        """Past FAR x the look (an estimate), past the look itself (a plan's least figure), and the look not the
        task's every item (exact: it settles)."""
        return self.at < self.total and self.needed > (self.at if self.least else FAR * self.at)

    @property
    def bound(self) -> int | None:
        """The ``--max-items`` that could settle it: the estimate, at most the task's items; None: no number does."""
        return None if self.needed >= stats.MAX_ITEMS else min(self.needed, self.total)

    def figure(self) -> str:
        """The estimate in words."""
        b = self.bound
        if b is None:
            return (f"no number of items would settle it within {self.margin:g} at a fixed n (the difference sits on "
                    "the margin)")
        every = f" (all {self.total:,}: every item)" if b >= self.total else ""
        if self.least:  # basis: the case most in its favour
            return (f"even if {self.basis}, its rule could show it within {self.margin:g} no sooner than its look at "
                    f"{b:,} items{every} (more as the answers fall otherwise, which a plan cannot know before scoring; "
                    "a verdict the other way may settle sooner)")
        return f"~{b:,} items{every} would settle it at a fixed n{f' ({self.basis})' if self.basis else ''}"

    def words(self, look: str, grow=None) -> str:
        """What settles it, ``look`` naming the look at hand (``the next look``, ``the plan's last look``): the
        figure, far beyond that look, and what could settle it (``grow``: the bound -> how a door's run reaches it;
        default its ``--max-items``), its options as :func:`errors.opt` names them (each door renders them); ""
        when the look is within reach."""
        if not self.far:
            return ""
        bound = None if self.bound is None else (grow or (lambda m: opt("max_items", m)))(self.bound)
        could = f"{bound} could, or a wider {opt('margin')}" if bound else f"a wider {opt('margin')} could"
        unlikely = "which cannot show it" if self.least else "which is unlikely to settle it"
        return f"{self.figure()}, far beyond {look} at {self.at:,} items, {unlikely}: {could}"


def reach(at: int | None, needed: int | None, total: int, margin: float, least: bool = False,
          basis: str = "") -> Reach | None:
    """:class:`Reach` of the look at ``at`` items where ``needed`` lies :attr:`Reach.far` beyond it; None when it
    does not, or either is unknown."""
    if at is None or needed is None:
        return None
    r = Reach(at, needed, total, margin, least, basis)
    return r if r.far else None


# a rung's estimate (no fixed-n figure is recorded for it), told from compare's figure the quant ladder says beside it
SCALED = "scaled from the rule's own interval at its last look, not the fixed-n verdict's"


def fixed_n_needed(record: Record, lk: sq.Look) -> int | None:
    """The fixed-n estimate of the items that would settle ``lk``'s open verdict (a rule's last look, in
    ``record``): a published row's, the figure the record's check of it holds (its ``items_to_settle``); a rung's
    (no such figure recorded), compare's rule (equivalence: the difference's distance from -margin, the power
    figures of stats.items_to_settle) applied to the interval the look read, its spread brought to 90% for items
    like these, then to the task's items (stats.of_population; :data:`SCALED`): a planning figure at 80% power from
    the rule's interval, not the n at which the fixed-n verdict's interval settles. The one figure of the advice of a
    run's verdict wherever it is said (its end message, `report`'s rows, the API, the quant ladder's line), so a rung
    is never told two bounds; the quant ladder's line says it only where it lies far beyond the rule's next look (the
    advice) or no fixed-n figure is there, labelled, else the fixed-n verdict's own figure, and no figure where that
    verdict beside it is settled (analysis.ladder._needed; the rung drops it). None: settled, every item scored, or
    no interval."""
    if lk.settled or lk.exact:
        return None
    checks = record.published.checks if record.published is not None else ()
    row = next((c for c in checks if sq.question_name(c.source, c.reference, c.task, c.metric) == lk.question), None)
    if row is not None:
        return row.items_to_settle
    if lk.interval is None or lk.value is None or math.isnan(lk.value):
        return None
    share = stats.fpc(lk.n, lk.total)
    if share <= 0:
        return None
    spread = (lk.interval[1] - lk.interval[0]) * metrics.z_of(0.90) / metrics.z_of(lk.level) / math.sqrt(share)
    n0 = stats.items_to_settle(lk.n, abs(lk.value + lk.margin), ci90=(0.0, spread))
    return max(stats.of_population(n0, lk.total), lk.n + 1)  # (of_population keeps a figure past MAX_ITEMS as it is)


def plan_reach(state: sq.Sequential, question: sq.Question) -> Reach | None:
    """A plan's (the dry run's) :class:`Reach` of its last look for ``question``, before any item is scored: the
    look of its rule, its plan carried on past its bound (the looks doubling to the task's items), at which it first
    shows the value within the margin where every look reads the case most in its favour (a published row: the run's
    value the published one; a rung's accuracy: no answer changed; sequential.expected_stop). How the answers fall
    it cannot know, and says so; nor, for a rung's correlation (read only once 10 answers changed), a case most in its
    favour: None, as for a look within reach."""
    if question.paired and question.stat != "accuracy":
        return None
    grid, n = list(state.planned), state.planned[-1]
    while 2 * n < state.total:
        n *= 2
        grid.append(n)
    if grid[-1] < state.total:
        grid.append(state.total)
    best = (0.0, 0.0) if question.paired else (None, None)
    case = "no answer changed" if question.paired else "the run's value were the published one"
    stop = sq.expected_stop(replace(state, planned=tuple(grid)), question, *best)
    return None if stop is None else reach(state.planned[-1], stop[0], state.total, question.margin, True, case)


def restored(recorded: Settle) -> sq.Sequential:
    """A recorded rule (``tasks.<key>.sequential``) as the ``sequential.Sequential`` it was: the one reader of a
    recorded rule (its lines, its replay, a grown run's looks already taken, a report's verdict)."""
    r = recorded
    return sq.Sequential(
        total=r.total, planned=r.planned, alpha=r.alpha, seed=r.seed, spend=r.spend,
        questions=tuple(sq.Question(name=q.name, stat=q.stat, margin=q.margin, published=q.published,
                                    rounding=q.rounding) for q in r.questions),
        looks=tuple(sq.Look(question=lk.question, k=lk.k, n=lk.n, total=lk.total, level=lk.level, margin=lk.margin,
                            verdict=lk.verdict, value=lk.value, interval=lk.interval, running=lk.running,
                            note=lk.note) for lk in r.looks))


def record_of(state: sq.Sequential, reference: str | None = None) -> Settle:
    """``state`` as results.json records it (``tasks.<key>.sequential``; ``reference``: a rung's, its reference run's
    folder named from its own): the one maker of a recorded rule (run/settle.py's section). An undefined value (NaN:
    a constant vector's correlation) is recorded as null, as :func:`restored` gives it back."""
    s = state
    return Settle(
        method=s.method, n=s.n, total=s.total, planned=tuple(s.planned), alpha=s.alpha, seed=s.seed, spend=s.spend,
        questions=tuple(SettleQuestion(name=q.name, stat=q.stat, margin=q.margin, published=_defined(q.published),
                                       rounding=q.rounding) for q in s.questions),
        looks=tuple(SettleLook(question=lk.question, k=lk.k, n=lk.n, total=lk.total, level=lk.level, margin=lk.margin,
                               verdict=lk.verdict, value=_defined(lk.value), interval=_pair(lk.interval),
                               running=_pair(lk.running), note=lk.note) for lk in s.looks),
        reference=reference)


def _defined(x: float | None) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _pair(p) -> tuple[float, float] | None:
    return None if p is None else tuple(p)


@dataclass(frozen=True)
class SettledVerdict:
    """A published row as the ``--until-settled`` rule of the run that waited for it judged it, at the look the
    rule stopped at: the run's verdict. ``line``: the run's own verdict line (sequential.Sequential.line, the
    row's name left out: its words, at which look of how many, its interval, its guarantee). ``next_look``: an open
    verdict's next look (items), the rule's own when it has not stopped, else the first a run grown by ``--resume
    --until-settled --max-items`` ``max_items`` takes (settle_record.advice's command; :func:`next_bound`); None
    when it settled or every item was scored."""

    look: sq.Look
    looks: int  # the looks the rule planned
    line: str
    next_look: int | None = None
    max_items: int | None = None
    needed: int | None = None  # the estimate of the items that would settle it (fixed_n_needed's; None: none)
    basis: str = ""  # where ``needed`` comes from, if not a recorded fixed-n figure (Reach.basis)

    @property
    def reach(self) -> Reach | None:
        """:class:`Reach` of the estimate (:attr:`needed`) where it lies far beyond ``next_look`` (a grown run's);
        None when it does not, or the run is not grown (no ``max_items``)."""
        lk = self.look
        return reach(self.next_look, self.needed, lk.total, lk.margin, basis=self.basis) if self.max_items else None

    @property
    def verdict(self) -> str:
        return self.look.verdict

    @property
    def words(self) -> str:
        return self.look.words

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval the verdict read (the looks' intervals intersected), at :attr:`level`."""
        return self.look.running

    @property
    def level(self) -> float:
        return self.look.level

    @property
    def items_to_settle(self) -> int | None:
        """What settles an open verdict, the rule's: the items of the run grown to its next look (the command's
        ``--max-items``), or, the estimate far beyond that look (:attr:`reach`), the bound the advice grows it to
        (stats.MAX_ITEMS: none, on the margin); or the rule's own next look; None when settled."""
        if self.reach is not None:
            return stats.MAX_ITEMS if self.reach.bound is None else self.reach.bound
        return self.max_items or self.next_look

    @property
    def step(self) -> str:
        """What settles an open verdict, in words; "" for none. Its options are errors.opt's, for the door that
        shows them to render (:func:`grown_by`): `report`'s output in the command line's flags, the API's
        ``Run.published()`` in Python's keywords, never both."""
        if self.max_items and self.reach is not None:
            return (f"not settled by its last look ({self.look.n:,} items): "
                    + self.reach.words("the next look", lambda m: f"the run grown by {grown_by(m)}"))
        if self.max_items:
            return (f"not settled by its last look ({self.look.n:,} items): the run grown by "
                    f"{grown_by(self.max_items)} takes its next look at {self.next_look:,} items")
        return f"its rule's next look is at {self.next_look:,} items" if self.next_look else ""

    def to_json(self) -> dict:
        lk = self.look
        return {"verdict": lk.verdict, "words": lk.words, "settled": lk.settled, "look": lk.k, "looks": self.looks,
                "n": lk.n, "total": lk.total, "level": lk.level, "interval": list(lk.running) if lk.running else None,
                "next_look": self.next_look, "max_items": self.max_items, "items_to_settle": self.items_to_settle,
                "needed": self.reach.needed if self.reach else None,  # far beyond next_look: the estimate (Reach)
                "could_settle": self.reach.bound if self.reach else None,
                "estimate": _defined(lk.value), "estimate_outside": lk.outside, "line": self.line}

    def fields(self, check: PublishedCheck) -> dict:
        """``check``'s row as its fields are in `report`'s JSON, every one the rule's: ``verdict`` its kind, ``ci90``
        null (its interval, at its look's level, in ``sequential``), ``items_to_settle`` :attr:`items_to_settle`,
        ``reasons`` its line then what settles it; the fixed-n verdict and its figures under ``fixed_n``."""
        return {"verdict": self.verdict, "ci90": None, "items_to_settle": self.items_to_settle,
                "reasons": [self.line, *((self.step,) if self.step else ())], "sequential": self.to_json(),
                "fixed_n": {"verdict": check.verdict, "words": fixed_n_words(check), "about": FIXED_N,
                            "ci90": list(check.ci90) if check.ci90 else None,
                            "items_to_settle": check.items_to_settle, "reasons": list(check.reasons)}}

    def notes(self, check: PublishedCheck) -> tuple[str, ...]:
        """The notes a table gives beside the row's verdict cell (the rule's line): the fixed-n verdict and each of
        its figures, every one said to be the fixed-n one, then what settles the rule's (:attr:`step`)."""
        c = check
        fixed = [f"{FIXED_N}: {c.reasons[0] if c.reasons else fixed_n_words(c)}",
                 *(f"fixed-n (does not account for the looks): {r}" for r in c.reasons[1:])]
        return (*fixed, *((self.step,) if self.step else ()))


def grown_by(max_items: int) -> str:
    """The options that grow a --until-settled run stopped at its bound to ``max_items`` (errors.opt's: the door
    renders them, ``--resume --until-settled --max-items 80`` on the command line): the one wording of a rule's
    next bound (:attr:`SettledVerdict.step`, the quant ladder's keep line)."""
    return f"{opt('resume', True)} {opt('until_settled', True)} {opt('max_items', max_items)}"


def next_bound(record: Record) -> int | None:
    """A --until-settled run stopped at its bound with a verdict open: the items of its next look (twice the
    bound, at most the largest task); None when every verdict settled or every item was scored. The ``--max-items``
    of the command settle_record.advice prints."""
    rules = [e.sequential for e in record.tasks.values() if e.sequential is not None]
    open_ = [r for r in rules if any(lk.k == len(r.planned) and lk.verdict not in sq.SETTLED for lk in r.looks)
             and r.n < r.total]
    if not open_:
        return None
    return min(max(r.total for r in open_), 2 * max(r.n for r in open_))


def _next(record: Record, state: sq.Sequential, lk: sq.Look) -> tuple[int | None, int | None]:
    """(next look, --max-items) of ``lk``'s open verdict (:class:`SettledVerdict`)."""
    if lk.settled or lk.exact:
        return None, None
    if not state.stopped:
        return state.next_look, None
    m = next_bound(record)
    if m is None:
        return None, None
    looks = record.config.looks if record.config is not None else None
    return next((n for n in sq.planned_looks(state.total, looks, m) if n > state.n), None), m


def far_beyond(record: Record) -> tuple[tuple[str, Reach], ...]:
    """(question, :class:`Reach`) of each verdict of a run stopped at its bound, open at its last look, whose
    estimate of the items that would settle it (:func:`fixed_n_needed`) lies far beyond the next look a grow
    takes (:func:`next_bound`): the verdicts that look is unlikely to settle (settle_record.advice's)."""
    out = []
    for e in record.tasks.values():
        if e.sequential is None:
            continue
        state = restored(e.sequential)
        for lk in state.open:
            at, m = _next(record, state, lk)
            found = reach(at, fixed_n_needed(record, lk), lk.total, lk.margin, basis=_basis(record, lk)) if m else None
            out += [(lk.question, found)] if found else []
    return tuple(out)


def _judged(record: Record, task: str, names: Iterable[str]) -> SettledVerdict | None:
    """The verdict at the look ``task``'s rule stopped at on the first of its questions named one of ``names``."""
    entry = record.tasks.get(task)
    if entry is None or entry.sequential is None:
        return None
    state = restored(entry.sequential)
    wanted = set(names)
    lk = next((lk for lk in state.latest if lk.question in wanted), None)
    if lk is None:
        return None
    return SettledVerdict(lk, len(state.planned), state.line(lk).removeprefix(f"{lk.question}: "),
                          *_next(record, state, lk), fixed_n_needed(record, lk), _basis(record, lk))


def _basis(record: Record, lk: sq.Look) -> str:
    """:data:`SCALED` for an estimate :func:`fixed_n_needed` makes from the look, "" for a recorded one."""
    checks = record.published.checks if record.published is not None else ()
    return "" if any(sq.question_name(c.source, c.reference, c.task, c.metric) == lk.question for c in checks) \
        else SCALED


def settled_verdict(record: Record, check: PublishedCheck) -> SettledVerdict | None:
    """The verdict a run's ``--until-settled`` rule (its ``record``'s) reached on ``check``'s row (its question
    named as run/settle.py names it: sequential.question_name), at the look the task's rule stopped at; None
    for a row no rule waited for (a run without the rule, a row not made as the run's task instance)."""
    return _judged(record, check.task, (sq.question_name(check.source, check.reference, check.task, check.metric),))


def qualifying(record: Record, check: PublishedCheck) -> tuple[str, ...]:
    """What qualifies ``check``'s verdict that the verdict does not say itself: each warning the run recorded on its
    task as a whole (``tasks.<task>.warnings``, record/misleading.py's rule, the HTML page's list), as recorded: the
    looks an earlier --until-settled rule took before a --sample grew the run and the error they spent, the items
    and data it scored. Left out: one on a metric (``NAME is undefined``, ``NAME rests on``: that metric's verdict
    says why itself) and one the check's ``differences`` say (not comparable). The one rule of `report`'s every
    format and the API's ``Run.published()``."""
    entry = record.tasks.get(check.task)
    return () if entry is None else tuple(
        w for w in entry.warnings if w.partition(" ")[0] not in entry.metrics
        and not any(w.startswith(d) for d in check.differences))


def rung_verdict(record: Record, reference: str | Iterable[str], task: str, metric: str) -> SettledVerdict | None:
    """The verdict a rung's ``--until-settled`` rule (``run --quants --until-settled``: its ``record``'s) reached
    against ``reference`` on ``task``'s ``metric``, at the look the task's rule stopped at: its question named as
    analysis/questions.py's pair_questions names it (sequential.pair_question_name: the rung's model as the run named it,
    its registry alias, name or the name as written, then ``reference``: a name, or the names the reference run
    may have been given). None for a rung no rule judged against that reference (a run without the rule, a
    ladder whose reference is another run)."""
    refs = (reference,) if isinstance(reference, str) else tuple(reference)
    m = record.model
    mine = dict.fromkeys(n for n in (m.alias, m.name, m.as_written) if n)
    return _judged(record, task, (sq.pair_question_name(own, ref, task, metric) for own in mine for ref in refs if ref))
