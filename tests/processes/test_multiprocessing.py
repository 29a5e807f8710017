"""Shared Tensors through multiprocessing: Process arguments, Queue, Pipe, Pool and
concurrent.futures.ProcessPoolExecutor, with the fork, spawn and forkserver start methods.
A shared Tensor arrives as a Tensor over the same memory (writes on either side are seen
by the other, nothing is copied); any other Tensor arrives by value."""

import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dlinterop as dl

import mp_workers

# Slow (child processes, each start method): deselected unless --run-slow (tests/conftest.py).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="shared-memory Tensors are built on Linux memfds",
    ),
    # fork() with threads alive (PyTorch's, pytest's) warns on 3.12+: the children here run
    # only the workers above.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

METHODS = [
    m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()
]


@pytest.fixture(params=METHODS)
def ctx(request):
    return multiprocessing.get_context(request.param)


def values(t):
    return np.from_dlpack(t).tolist()


def test_process_arguments(ctx):
    t = dl.zeros((2, 3), "int32", shared=True)
    q = ctx.Queue()
    # The target lives in mp_workers: a spawned child imports it by module name, and this
    # file's module name depends on pytest's import mode.
    p = ctx.Process(target=mp_workers.put_result, args=(q, mp_workers.write, t, 4, 7))
    p.start()
    try:
        seen = q.get(timeout=60)
    finally:
        p.join(60)
        if p.is_alive():
            p.kill()
            p.join()
    assert seen[:5] == (True, (2, 3), (3, 1), "int32", False)
    assert values(t) == [[0, 0, 0], [0, 7, 0]]


def test_queue_both_ways(ctx):
    t = dl.full((4,), 1.0, shared=True)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=mp_workers.queue_round_trip, args=(inbox, outbox))
    p.start()
    inbox.put(t)
    back = outbox.get(timeout=60)
    inbox.put("taken")
    p.join(60)
    assert values(t) == [99.0, 1.0, 1.0, 1.0]
    assert back.is_shared and values(back) == values(t)
    np.from_dlpack(back)[1] = 2.0  # the returned Tensor is the same memory too
    assert values(t)[1] == 2.0


def test_pipe(ctx):
    t = dl.zeros((3,), "float64", shared=True)
    parent, child = ctx.Pipe()
    p = ctx.Process(target=mp_workers.pipe_echo, args=(child,))
    p.start()
    parent.send(t)
    seen = parent.recv()
    p.join(60)
    assert seen[0] and values(t) == [0.0, 0.0, -1.0]


def test_pool(ctx):
    t = dl.zeros((2, 2), shared=True)
    with ctx.Pool(2) as pool:
        pool.map(mp_workers.add_one, [t, t])
    assert values(t) == [[2.0, 2.0], [2.0, 2.0]]


def test_process_pool_executor(ctx):
    t = dl.zeros((3,), "int64", shared=True)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        back = pool.submit(mp_workers.add_one, t).result(timeout=60)
    assert values(t) == [1, 1, 1]
    assert back.is_shared and values(back) == [1, 1, 1]


def test_layout_dtype_and_read_only_are_kept(ctx):
    from dlinterop import _core

    t = dl.full((16,), 1.0, "float32", shared=True)
    segment, offset, shape, strides, triple, _ = _core._shared_handle(t)
    view = _core._tensor_from_shared(
        os.dup(segment.fd), segment.length, 8, (3,), (2,), triple, True
    )
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        seen = pool.submit(mp_workers.describe, view).result(timeout=60)
    assert seen == (True, (3,), (2,), "float32", True, [1.0, 1.0, 1.0])


@pytest.mark.parametrize("dtype", ["bool", "uint8", "float16", "complex128", "bfloat16"])
def test_every_dtype_crosses(ctx, dtype):
    t = dl.zeros((5,), dtype, shared=True)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        seen = pool.submit(mp_workers.describe, t).result(timeout=60)
    assert seen[:5] == (True, (5,), (1,), dtype, False)


def test_a_tensor_not_in_shared_memory_goes_by_value(ctx):
    t = dl.full((3,), 1.0)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        back = pool.submit(mp_workers.add_one, t).result(timeout=60)
    assert values(t) == [1.0, 1.0, 1.0] and values(back) == [2.0, 2.0, 2.0]
    assert not back.is_shared


def test_views_of_one_segment_cross_as_one_segment(ctx):
    # Process arguments under spawn once named its descriptor twice (multiprocessing
    # refused to start the child); each view arriving with an owner of its own would close
    # the descriptor twice.
    t = dl.zeros((4,), shared=True)
    view = dl.from_dlpack(t)
    q = ctx.Queue()
    p = ctx.Process(target=mp_workers.put_result, args=(q, mp_workers.same_segment, t, view))
    p.start()
    try:
        assert q.get(timeout=60) is True
    finally:
        p.join(60)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        assert pool.submit(mp_workers.same_segment, t, view).result(timeout=60) is True


def test_results_of_a_pool_whose_workers_retire_arrive(ctx):
    # Each worker exits after one task, as soon as it has sent its result: it hands the
    # segment over first, and the pool goes on.
    t = dl.zeros((3,), shared=True)
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        backs = [pool.apply_async(mp_workers.add_one, (t,)).get(timeout=60) for _ in range(2)]
        assert pool.apply_async(abs, (-3,)).get(timeout=60) == 3
    assert values(t) == [2.0, 2.0, 2.0]
    assert all(back.is_shared and values(back) == values(t) for back in backs)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="max_tasks_per_child is 3.11's")
@pytest.mark.parametrize("method", [m for m in METHODS if m != "fork"])  # (it refuses fork)
def test_results_of_an_executor_whose_workers_retire_arrive(method):
    t = dl.zeros((3,), "int64", shared=True)
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context(method), max_tasks_per_child=1
    ) as pool:
        backs = [pool.submit(mp_workers.add_one, t).result(timeout=60) for _ in range(2)]
        assert pool.submit(abs, -3).result(timeout=60) == 3
    assert values(t) == [2, 2, 2]
    assert all(back.is_shared for back in backs)


def test_a_process_that_sends_and_exits_at_once_delivers(ctx):
    t = dl.full((3,), 4.0, shared=True)
    parent, child = ctx.Pipe()
    p = ctx.Process(target=mp_workers.send_and_exit, args=(child, t))
    p.start()
    p.join(1)  # time to exit, as it did before it waited for its receiver
    try:
        back = parent.recv()
    finally:
        p.join(60)
    assert back.is_shared and values(back) == [4.0, 4.0, 4.0] and p.exitcode == 0


def test_a_tensor_received_after_its_sender_exited_is_a_clear_error(ctx):
    t = dl.zeros((3,), shared=True)
    parent, child = ctx.Pipe()
    p = ctx.Process(target=mp_workers.send_and_exit_without_waiting, args=(child, t))
    p.start()
    p.join(60)
    with pytest.raises(RuntimeError, match=f"process {p.pid}, which sent it, no longer"):
        parent.recv()
    assert parent.recv() == "after"  # the connection goes on


def test_a_pool_result_that_cannot_be_received_fails_alone(ctx):
    # Raised in the pool's result thread, it would end that thread, and every later result
    # of the pool would never arrive.
    with ctx.Pool(1) as pool:
        with pytest.raises(RuntimeError, match="cannot receive a shared Tensor"):
            pool.apply_async(mp_workers.unreceivable).get(timeout=60)
        with pytest.raises(RuntimeError, match="cannot receive a shared Tensor"):
            pool.map(mp_workers.unreceivable, range(3))
        assert pool.apply_async(abs, (-3,)).get(timeout=60) == 3


def test_an_executor_result_that_cannot_be_received_fails_alone(ctx):
    # Raised in the executor's manager thread, it would break the executor.
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        with pytest.raises(RuntimeError, match="cannot receive a shared Tensor"):
            pool.submit(mp_workers.unreceivable).result(timeout=60)
        assert pool.submit(abs, -3).result(timeout=60) == 3


def test_import_dlinterop_alone_registers_the_handle():
    # Registered without importing multiprocessing: it happens when multiprocessing is.
    code = textwrap.dedent("""
        import sys
        import dlinterop as dl
        assert "multiprocessing" not in sys.modules
        t = dl.zeros(3, shared=True)
        import concurrent.futures, multiprocessing
        import mp_workers
        with concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pool.submit(mp_workers.write, t, 0, 4.0).result(timeout=60)
        print(list(memoryview(t)))
    """)
    env = dict(
        os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "support")
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[4.0, 0.0, 0.0]"


def _open_segment_fds():
    """This process's descriptors of shared-memory segments (multiprocessing's own pipes and
    sockets, the resource sharer's among them, are not counted)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(("/memfd:", "/dev/shm/")):
            found.add(name)
    return found


def test_a_killed_child_leaves_nothing_behind(ctx):
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    t = dl.zeros((1024,), shared=True)
    inbox, ready = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=mp_workers.hold_forever, args=(inbox, ready))
    p.start()
    fds_before = _open_segment_fds()
    inbox.put(t)
    pid = ready.get(timeout=60)  # the child maps it and writes
    mp_workers.kill(pid)
    p.join(60)
    assert p.exitcode == -9
    assert values(t)[0] == 5.0
    # The descriptor sent was handed over and not kept (multiprocessing's resource sharer
    # closes its duplicate in a thread of its own just after handing it over: wait for it).
    deadline = time.monotonic() + 30
    while _open_segment_fds() != fds_before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _open_segment_fds() == fds_before
    if os.path.isdir("/dev/shm"):
        assert not [n for n in set(os.listdir("/dev/shm")) - shm_before if "dlinterop" in n]
    os.fstat(dl._core._shared_handle(t)[0].fd)  # the parent's segment is intact


def test_the_pages_example_runs(tmp_path):
    """The first example of docs/processes.md alone (tests/tools/test_docs.py runs the
    whole page)."""
    page = open(
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "docs", "processes.md"
        )
    ).read()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[0. 2. 4. 6.]"
