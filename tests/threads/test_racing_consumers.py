"""Threads racing to consume one capsule: exactly one may win, and the deleter runs once.

Every test in tests/threads/ is also run under pytest-run-parallel by test_run_parallel.py.
The tests check ownership per tensor (reference counts), never the process-wide
memory_stats() counters, which other threads move; conftest checks those after each test.
A short GIL switch interval makes the threads interleave inside the calls under test."""

import sys
import threading

import numpy as np
import pytest

import dlinterop as dl

from thread_cases import (  # noqa: F401 (fixtures)
    _SHARE,
    THREADS,
    _short_switch_interval,
    refcounts_settle,
)

# Slow (stress: many threads racing): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow


RACE_ROUNDS = 500 // _SHARE


class CapsuleProducer:
    """Hands out one ready-made capsule, as a producer whose __dlpack__ reuses it would."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


# --------------------------------------------------------------------------------------
# Racing consumers: exactly one wins
# --------------------------------------------------------------------------------------


def _race(make_capsule, consume, rounds=RACE_ROUNDS, threads=THREADS):
    """`rounds` times: `threads` threads call consume(capsule) on one fresh capsule at once.
    Returns the per-round outcomes: a list of (winners, ValueError messages)."""
    slot = [None]
    results = [[None] * threads for _ in range(rounds)]
    start = threading.Barrier(threads + 1)
    finish = threading.Barrier(threads + 1)

    def worker(index):
        for r in range(rounds):
            start.wait()
            try:
                results[r][index] = consume(slot[0])
            except ValueError as error:
                results[r][index] = error
            finish.wait()

    errors = []

    def guarded(index):
        try:
            worker(index)
        except BaseException as error:  # noqa: BLE001
            errors.append(error)
            start.abort()
            finish.abort()

    pool = [threading.Thread(target=guarded, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    outcomes = []
    try:
        for r in range(rounds):
            slot[0] = make_capsule(r)
            start.wait()
            finish.wait()
            slot[0] = None
            row, results[r] = results[r], None
            winners = [x for x in row if not isinstance(x, ValueError)]
            losers = [str(x) for x in row if isinstance(x, ValueError)]
            outcomes.append((winners, losers))
            del row, winners
    except threading.BrokenBarrierError:
        pass
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return outcomes


@pytest.mark.parametrize("max_version", [None, (1, 3)], ids=["legacy", "versioned"])
def test_racing_consumers_of_one_capsule_exactly_one_wins(max_version):
    source = dl.full((3, 4), 2.5)
    base = sys.getrefcount(source)

    outcomes = _race(
        lambda r: source.__dlpack__(max_version=max_version),
        lambda capsule: dl.from_dlpack(capsule).data_ptr,
    )
    assert len(outcomes) == RACE_ROUNDS
    for winners, losers in outcomes:
        assert winners == [source.data_ptr]
        assert len(losers) == THREADS - 1
        assert all("already consumed" in message for message in losers)
    # Each deleter ran once: a second run would take the count below its base.
    assert refcounts_settle(lambda: sys.getrefcount(source), base) == base


def test_racing_consumers_of_all_kinds_exactly_one_wins():
    """dl.from_dlpack on the capsule, through a producer, with copy=True, and NumPy's
    from_dlpack, all racing for the same capsule."""
    source = dl.full((8,), 4.0, "float64")
    base = sys.getrefcount(source)

    # Without a GIL, exactly one winner needs every racer to consume inside the capsule's
    # critical section, as dlinterop does; NumPy's from_dlpack (2.4) does not, so racing it
    # against others can make two owners: there it stays out of the race.
    kinds = 4 if getattr(sys, "_is_gil_enabled", lambda: True)() else 3

    def consume(capsule, counter=iter(range(10**9))):
        kind = next(counter) % kinds
        if kind == 0:
            return float(np.asarray(dl.from_dlpack(capsule))[0])
        if kind == 1:
            return float(np.asarray(dl.from_dlpack(CapsuleProducer(capsule)))[0])
        if kind == 2:
            return float(np.asarray(dl.from_dlpack(capsule, copy=True))[0])
        return float(np.from_dlpack(CapsuleProducer(capsule))[0])

    outcomes = _race(lambda r: source.__dlpack__(max_version=(1, 3) if r % 2 else None), consume)
    assert len(outcomes) == RACE_ROUNDS
    for winners, losers in outcomes:
        assert winners == [4.0]
        assert len(losers) == THREADS - 1
    assert refcounts_settle(lambda: sys.getrefcount(source), base) == base


def test_racing_consumers_of_a_foreign_capsule_deleter_runs_once():
    """The same race over capsules of another producer (forged with a counting deleter):
    the deleter runs once per capsule, when the winner's Tensor dies."""
    from forge import forge

    forged = []

    def make(r):
        f = forge(shape=(2, 3), versioned=bool(r % 2))
        forged.append(f)
        return f.capsule

    outcomes = _race(make, lambda capsule: dl.from_dlpack(capsule).shape, rounds=200 // _SHARE)
    for winners, losers in outcomes:
        assert winners == [(2, 3)]
        assert len(losers) == THREADS - 1
    assert [f.deleter_calls for f in forged] == [1] * len(forged)
    for f in forged:
        f.release()
    assert [f.deleter_calls for f in forged] == [1] * len(forged)
