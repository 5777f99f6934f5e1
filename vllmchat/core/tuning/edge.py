"""The two searches that decide a pick: up to the edge of the card, and the finalists
re-measured in alternation.

The edge: from the estimate's bound towards more on the GPU while a step loads,
measures and leaves the margin free; the first step that does not is the edge
(the estimate only says where to start). Where the measured free memory allows
several steps, the search jumps there (the estimate's cost per step, measured
free memory minus the margin), and bisects back when the jump did not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from vllmchat.core.tuning import plan
from vllmchat.core.tuning.results import TuneConfig, TunePoint
from vllmchat.core.tuning.sweep import Sweep


def _steps_up(sweep: Sweep, at: Callable[[int], TuneConfig], v: int, top: int, spare: int) -> int:
    """How many steps above ``v`` the estimate says ``spare`` bytes pay for (at least 1)."""
    base = sweep.estimate_vram(at(v))
    k = 0
    while base is not None and v + k < top:
        nxt = sweep.estimate_vram(at(v + k + 1))
        if nxt is None or nxt - base > spare:
            break
        k += 1
    return max(1, k)


def _steps_down(sweep: Sweep, at: Callable[[int], TuneConfig], v: int, short: int) -> int:
    """How many steps below ``v`` free ``short`` more bytes, by the estimate (at least 1)."""
    base = sweep.estimate_vram(at(v))
    k = 1
    while base is not None and v - k > 0:
        low = sweep.estimate_vram(at(v - k))
        if low is None or base - low >= short:
            break
        k += 1
    return k


def find_edge(
    sweep: Sweep,
    at: Callable[[int], TuneConfig],
    start: int,
    top: int,
) -> Iterator[TunePoint]:
    """Measure from ``start`` towards ``top`` (more on the GPU) until a step does not
    fit, or down until one does; yields each new point. The edge is then the largest
    value measured that fits with the margin free, its next step measured as not."""
    limits = sweep.limits
    good: int | None = None
    bad: int | None = None
    v = max(0, min(start, top))
    while True:
        point = sweep.point(at(v))
        if point is None:
            point = sweep.run(at(v))
            if point is None:
                return  # out of time, or stopped
            yield point
        if point.fits and limits.allows(point):
            good = v if good is None else max(good, v)
        else:
            bad = v if bad is None else min(bad, v)
        if good is None:  # nothing fits yet: down
            if v == 0:
                return
            short = (limits.margin - point.free_after) if point.free_after is not None else 0
            v = max(0, v - (_steps_down(sweep, at, v, short) if point.fits else 1))
        elif bad is None:  # everything so far fits: up, as far as the free memory says
            if good >= top:
                return
            spare = (point.free_after or 0) - limits.margin
            v = min(top, good + _steps_up(sweep, at, good, top, spare))
        elif bad - good <= 1:
            return
        else:
            v = (good + bad) // 2


def edge_of(
    points: list[TunePoint], value: Callable[[TuneConfig], int], limits: plan.MemoryLimits
) -> int | None:
    """The most-on-GPU value among ``points`` that fits with the margin free."""
    ok = [value(p.config) for p in points if p.fits and limits.allows(p)]
    return max(ok) if ok else None


def interleaved(sweep: Sweep, configs: list[TuneConfig], rounds: int) -> Iterator[TunePoint]:
    """Each of ``configs`` measured once per round, in turn (A B C A B C ...), so that
    a busy CPU slows all alike; then up to ``plan.SETTLE_ROUNDS`` more rounds of the
    two fastest while their medians stay within ``plan.SETTLE``. A round starts only
    when all of it fits in the budget; a finalist that fails a round is dropped (it
    does not fit)."""
    alive = list(configs)
    r = 0
    while len(alive) > 1:
        if r >= rounds:
            medians = plan.final_medians([p for p in sweep.points if p.config in alive])
            alive = plan.unsettled(medians) if r < rounds + plan.SETTLE_ROUNDS else []
            if not alive:
                return
        if not sweep.has_time(reserve_points=len(alive) - 1):
            return
        r += 1
        for c in list(alive):
            point = sweep.run(c, final_round=r)
            if point is None:
                return
            yield point
            if not point.fits:
                alive.remove(c)
