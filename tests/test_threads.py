"""dlinterop from many threads at once (deleters run once, on any thread): exports, imports and
round trips on shared tensors, and threads racing to consume one capsule, where exactly one may
win.

Every test here is also run under pytest-run-parallel by test_thread_tests_under_run_parallel
(each test body then runs in several threads at once, each starting its own eight), and can
be run that way by hand:

    DLINTEROP_RUN_PARALLEL_COPIES=4 python -m pytest -p run-parallel --parallel-threads=4 \
        tests/test_threads.py

(DLINTEROP_RUN_PARALLEL_COPIES divides the iterations between the copies; leave it out to
give each copy the full 8 x 10,000.)

The tests check ownership per tensor (reference counts), never the process-wide
memory_stats() counters, which other threads move; conftest checks those after each test.
A short GIL switch interval makes the threads interleave inside the calls under test.
"""

import os
import queue
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dlinterop as dl

# Slow (stress: many threads racing): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow

# More threads where the GIL is off (.ci/freethreaded.sh sets DLINTEROP_THREADS=16).
THREADS = int(os.environ.get("DLINTEROP_THREADS", "8"))
# The run-parallel run (four copies of each test at once) divides the work between copies.
_SHARE = int(os.environ.get("DLINTEROP_RUN_PARALLEL_COPIES", "1"))
ITERATIONS = 10_000 // _SHARE
RACE_ROUNDS = 500 // _SHARE


@pytest.fixture(autouse=True)
def _short_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(target, count=THREADS):
    """Runs target(index) on `count` threads started together; re-raises the first error."""
    errors = []
    start = threading.Barrier(count)

    def body(index):
        try:
            start.wait()
            target(index)
        except BaseException as error:  # noqa: BLE001 - reported below, with its traceback
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def refcounts_settle(read, expected, seconds=5.0):
    """read() once it equals `expected` (or after `seconds`): reference counts, read by the
    same expression that read `expected`. Where there is no GIL, CPython counts references
    dropped by other threads apart and merges them later (biased reference counting), so a
    count read just after the threads stop may still include releases in flight; a leak
    stays, and still fails the comparison."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        counts = read()
        if counts == expected or time.monotonic() > deadline:
            return counts
        time.sleep(0.01)


class CapsuleProducer:
    """Hands out one ready-made capsule, as a producer whose __dlpack__ reuses it would."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


# --------------------------------------------------------------------------------------
# Mixed traffic on shared tensors
# --------------------------------------------------------------------------------------


def _shared_tensors():
    owned = dl.full((THREADS, 64), 1.5)  # each thread writes its row
    ints = dl.from_dlpack(np.arange(24, dtype=np.int64).reshape(4, 6))
    strided = dl.from_dlpack(np.from_dlpack(dl.full((6, 8), 2.0, "float64"))[::-2, 1::3])
    # Read-only by flag (a versioned capsule of a legacy import): no legacy export.
    readonly = dl.from_dlpack(
        dl.to_dlpack(dl.from_dlpack(dl.to_dlpack(dl.full((5,), 7, "int32"))), versioned=True)
    )
    scalar = dl.full((), 3, "uint8")
    return owned, ints, strided, readonly, scalar


def test_mixed_exports_imports_and_round_trips_on_shared_tensors():
    owned, ints, strided, readonly, scalar = shared = _shared_tensors()
    numpy_source = np.arange(48, dtype=np.float32).reshape(6, 8)
    bases = [sys.getrefcount(t) for t in shared]
    numpy_base = sys.getrefcount(numpy_source)
    handoff = queue.SimpleQueue()  # capsules made on one thread, consumed on another
    done = [0] * THREADS
    expected_strided = np.full((3, 3), 2.0)
    expected_ints = np.arange(24).reshape(4, 6)

    def worker(index):
        row = np.from_dlpack(owned)[index]
        for i in range(ITERATIONS):
            op = i % 12
            if op == 0:
                dl.from_dlpack(owned.__dlpack__())  # legacy export, import
            elif op == 1:
                view = dl.from_dlpack(ints.__dlpack__(max_version=(1, 3)))
                assert view.data_ptr == ints.data_ptr and not view.readonly
            elif op == 2:
                np.testing.assert_array_equal(np.from_dlpack(strided), expected_strided)
            elif op == 3:
                view = dl.from_dlpack(numpy_source)
                assert view.data_ptr == numpy_source.ctypes.data
            elif op == 4:
                again = dl.from_dlpack(np.from_dlpack(ints))  # dl -> numpy -> dl
                assert again.data_ptr == ints.data_ptr and again.strides == ints.strides
            elif op == 5:
                try:
                    readonly.__dlpack__()
                except BufferError:
                    pass
                else:
                    raise AssertionError("legacy export of a read-only tensor")
                assert dl.from_dlpack(readonly.__dlpack__(max_version=(1, 0))).readonly
            elif op == 6:
                handoff.put(dl.to_dlpack(ints, versioned=bool(i & 1)))
            elif op == 7:
                try:
                    capsule = handoff.get_nowait()
                except queue.Empty:
                    continue
                if i & 2:  # consume it here; otherwise its destructor runs here
                    assert dl.from_dlpack(capsule).shape == (4, 6)
            elif op == 8:
                row[:] = i  # this thread's own row
                assert np.from_dlpack(owned)[index, 63] == i
            elif op == 9:
                copied = dl.from_dlpack(strided, copy=True)
                assert copied.data_ptr != strided.data_ptr
                np.testing.assert_array_equal(np.asarray(copied), expected_strided)
            elif op == 10:
                assert memoryview(scalar).tolist() == 3
                assert dl.from_dlpack(dl.from_dlpack(scalar)).shape == ()
            else:
                np.testing.assert_array_equal(np.asarray(dl.from_dlpack(ints)), expected_ints)
            done[index] += 1
        del row

    run_threads(worker)
    while not handoff.empty():
        handoff.get_nowait()
    assert sum(done) >= THREADS * ITERATIONS * 11 // 12  # op 7 may find the queue empty
    rows = np.from_dlpack(owned)
    assert (rows[:, 0] == rows[0, 0]).all()
    del rows
    assert refcounts_settle(lambda: [sys.getrefcount(t) for t in shared], bases) == bases
    assert refcounts_settle(lambda: sys.getrefcount(numpy_source), numpy_base) == numpy_base


def test_capsules_made_released_and_consumed_on_different_threads():
    source = dl.full((16,), 1.0)
    base = sys.getrefcount(source)
    channel = queue.SimpleQueue()
    per_producer = 2_000
    producers = THREADS // 2

    def worker(index):
        if index < producers:
            for i in range(per_producer):
                channel.put(source.__dlpack__(max_version=(1, 3) if i % 3 else None))
            return
        for i in range(per_producer):
            capsule = channel.get()
            if i % 2:
                view = dl.from_dlpack(capsule)
                assert view.data_ptr == source.data_ptr
            del capsule

    run_threads(worker)
    assert channel.empty()
    assert refcounts_settle(lambda: sys.getrefcount(source), base) == base


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


# --------------------------------------------------------------------------------------
# New Tensors made and freed on every thread (the allocator and its counters are shared)
# --------------------------------------------------------------------------------------


def test_tensors_made_and_freed_on_many_threads():
    # Small blocks (from the heap's per-thread caches), blocks past the size where zeros
    # come from the kernel, and every creation path; some Tensors die on another thread.
    handed = queue.Queue()

    def worker(index):
        kept = []
        for i in range(ITERATIONS // 20):
            n = 16 + (i + index) % 7
            e = dl.empty((n,))
            z = dl.zeros(n, "float64")
            o = dl.ones((2, n), dl.int32)
            f = dl.full(n, 2.5)
            r = dl.arange(n)
            assert e.data_ptr % 256 == 0 and z.data_ptr % 256 == 0
            assert bytes(memoryview(z)) == bytes(8 * n)
            assert memoryview(o).tolist() == [[1] * n] * 2
            assert memoryview(f).tolist() == [2.5] * n
            assert memoryview(r).tolist() == list(range(n))
            if i % 50 == 0:
                big = dl.zeros(200 << 10, "uint8", alignment=4096)
                assert big.data_ptr % 4096 == 0 and bytes(memoryview(big)) == bytes(200 << 10)
                handed.put(big)
            kept.append(f)
            if len(kept) > 8:
                handed.put(kept.pop(0))
            else:
                try:
                    handed.get_nowait()  # freed here, made on another thread
                except queue.Empty:
                    pass

    run_threads(worker)
    while not handed.empty():
        handed.get_nowait()


# --------------------------------------------------------------------------------------
# Framework tensors through the C exchange API (the per-type cache is shared)
# --------------------------------------------------------------------------------------


def test_imports_of_alternating_types_from_many_threads():
    torch = pytest.importorskip("torch")
    sources = [
        torch.arange(12, dtype=torch.float32).reshape(3, 4),
        np.arange(12, dtype=np.float32).reshape(3, 4),
        dl.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)).copy(),
    ]
    pointers = [sources[0].data_ptr(), sources[1].ctypes.data, sources[2].data_ptr]
    bases = [sys.getrefcount(s) for s in sources]

    def worker(index):
        for i in range(2_000):
            k = (i + index) % 3
            view = dl.from_dlpack(sources[k])
            assert view.data_ptr == pointers[k] and view.shape == (3, 4)

    run_threads(worker)
    assert refcounts_settle(lambda: [sys.getrefcount(s) for s in sources], bases) == bases


def test_first_torch_imports_race_with_the_bit_reader_set_up():
    """The first PyTorch imports of a process, from eight threads at once, so that threads
    may reach the set-up of the native bit reads together: none crashes, every plain
    tensor is shared and every negated view refused, and the reads end up set up."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import sys, threading, torch, dlinterop as dl
        from dlinterop import _core
        sys.setswitchinterval(1e-6)
        plain = torch.arange(6.0)
        negated = torch._neg_view(plain)
        barrier = threading.Barrier(8)
        failures = []

        def worker():
            barrier.wait()
            try:
                for _ in range(200):
                    assert dl.from_dlpack(plain).data_ptr == plain.data_ptr()
                    try:
                        dl.from_dlpack(negated)
                    except BufferError:
                        pass
                    else:
                        raise AssertionError("a negated view was shared")
            except BaseException as e:
                failures.append(repr(e))

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(failures, _core._torch_native_bits())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    failures, offset = out.stdout.rsplit(" ", 1)
    assert failures == "[]"
    if sys.platform.startswith("linux"):
        assert int(offset) >= 16


def test_producer_cache_mutated_while_importing():
    # A producer type whose attributes change while other threads import its instances:
    # each change gives the type a new version tag, so the importer's per-type cache is
    # re-described under the threads' feet. Every import must still see a valid producer.
    source = np.arange(16.0)

    class Producer:
        def __init__(self):
            self.array = source

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    objects = [Producer() for _ in range(8)]
    stop = threading.Event()
    imports = [0] * THREADS

    def mutate():
        n = 0
        while not stop.is_set():
            Producer.marker = n  # a new version tag for the type
            n += 1

    def importer(k):
        for i in range(ITERATIONS // 4):
            t = dl.from_dlpack(objects[i % len(objects)])
            assert t.data_ptr == source.ctypes.data and t.shape == (16,)
            imports[k] += 1

    mutator = threading.Thread(target=mutate)
    mutator.start()
    try:
        run_threads(importer)
    finally:
        stop.set()
        mutator.join()
    assert sum(imports) == THREADS * (ITERATIONS // 4)


def test_producer_entry_replaced_while_many_threads_import():
    """Regression (free-threaded 3.13, 64 threads): the per-type cache entry one thread
    read was freed by another that replaced it (Cython's dict.get lends its reference),
    and on 3.13 every import replaced it (its version-tag check read a flag 3.13 no longer
    sets); it crashed in about half the runs, mostly within a second. Here a C-speed
    producer type (an ndarray subclass) changes under many importing threads, each change
    making the next import replace the entry. Three subprocesses: the failure was a
    crash."""
    code = textwrap.dedent(f"""
        import sys, threading, numpy as np, dlinterop as dl
        sys.setswitchinterval(1e-6)
        Sub = type("Sub", (np.ndarray,), {{}})
        views = [np.arange(8.0).view(Sub) for _ in range(4)]
        pointers = [v.__array_interface__["data"][0] for v in views]
        stop = threading.Event()
        barrier = threading.Barrier({8 * THREADS})
        failures = []

        def mutate():
            n = 0
            while not stop.is_set():
                Sub.marker = n      # a new version tag: the next import re-describes Sub
                n += 1

        def worker():
            barrier.wait()
            try:
                for i in range({5000 // _SHARE}):
                    assert dl.from_dlpack(views[i & 3]).data_ptr == pointers[i & 3]
            except BaseException as e:
                failures.append(repr(e))

        mutator = threading.Thread(target=mutate)
        mutator.start()
        threads = [threading.Thread(target=worker) for _ in range({8 * THREADS})]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        mutator.join()
        print(failures)
    """)
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-4000:]
        assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------
# Views made in C from many threads
# --------------------------------------------------------------------------------------


def test_views_of_shared_tensors_from_many_threads():
    """Indexing, transpose, reshape, view and squeeze read their arguments and the source's
    layout in C: threads making views of one tensor and of each other's views see the right
    elements, and the root's reference count comes back when the views are gone."""
    base = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    root = dl.from_dlpack(base).copy()
    expected = base.copy()
    before = sys.getrefcount(root)

    def work(index):
        for i in range(ITERATIONS // 10):
            row = (index + i) % 6
            view = root[row]
            assert view[3].item() == expected[row, 3]
            assert root[row, ::-2].shape == (4,)
            assert root[1:5:2, None, ..., 2].shape == (2, 1)
            flat = root.T.reshape(-1)
            assert flat[row].item() == expected.T.reshape(-1)[row]
            assert root.view(48)[row * 8 + 1].item() == expected[row, 1]
            assert (
                root.reshape(6, 1, 8).squeeze(1).transpose(1, 0)[2, row].item()
                == (expected[row, 2])
            )
            assert root.unsqueeze(0)[0, row, 7].item() == expected[row, 7]

    run_threads(work)
    assert refcounts_settle(lambda: sys.getrefcount(root), before) == before


# --------------------------------------------------------------------------------------
# The whole file under pytest-run-parallel
# --------------------------------------------------------------------------------------


def test_thread_tests_under_run_parallel():
    pytest.importorskip("pytest_run_parallel")
    if os.environ.get("DLINTEROP_RUN_PARALLEL_COPIES"):
        pytest.skip("already inside the run-parallel run")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DLINTEROP_RUN_PARALLEL_COPIES="4")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "run-parallel",
            "--parallel-threads=4",
            "--run-slow",  # the file is marked slow: without it, nothing would be selected
            "-k",
            "not test_thread_tests_under_run_parallel",
            os.path.join(here, "test_threads.py"),
        ],
        cwd=os.path.dirname(here),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout
