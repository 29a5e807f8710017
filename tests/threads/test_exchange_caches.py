"""Framework tensors through the C exchange API from many threads: the per-type producer cache
and torch's bit reader, shared, set up, mutated and replaced while others import.

Every test in tests/threads/ is also run under pytest-run-parallel by test_run_parallel.py.
The tests check ownership per tensor (reference counts), never the process-wide
memory_stats() counters, which other threads move; conftest checks those after each test.
A short GIL switch interval makes the threads interleave inside the calls under test."""

import subprocess
import sys
import textwrap
import threading

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
