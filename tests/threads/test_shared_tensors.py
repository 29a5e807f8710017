"""dlinterop from many threads at once (deleters run once, on any thread): exports, imports and
round trips on shared tensors, new Tensors made and freed on every thread, views made in C.

Every test in tests/threads/ is also run under pytest-run-parallel by test_run_parallel.py.
The tests check ownership per tensor (reference counts), never the process-wide
memory_stats() counters, which other threads move; conftest checks those after each test.
A short GIL switch interval makes the threads interleave inside the calls under test."""

import queue
import sys

import numpy as np
import pytest

import dlinterop as dl

from thread_cases import (  # noqa: F401 (fixtures)
    _SHARE,
    ITERATIONS,
    THREADS,
    _short_switch_interval,
    refcounts_settle,
    run_threads,
)

# Slow (stress: many threads racing): deselected unless --run-slow (tests/conftest.py).
pytestmark = pytest.mark.slow


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
