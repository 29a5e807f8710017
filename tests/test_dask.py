"""Dask: dlinterop Tensors in Dask's memory accounting and on a real local cluster (two
worker processes), as NumPy arrays are."""
import gc
import os
import time

import numpy as np
import pytest

import dlinterop as dl
import mp_workers

dask = pytest.importorskip("dask", reason="Dask is not installed (the 'dask' extra)")
from dask.sizeof import sizeof  # noqa: E402


# -- sizeof, through Dask's entry point ----------------------------------------------------

@pytest.mark.parametrize("shape,name", [((1024, 256), "float32"), ((3, 5), "complex128"),
                                        ((0, 4), "int8"), ((), "float64"),
                                        ((7,), "float4_e2m1fn"), ((9,), "bool")])
def test_sizeof_counts_the_elements_bytes(shape, name):
    t = dl.zeros(shape, name)
    assert sizeof(t) == t.nbytes


def test_sizeof_is_dasks_own_for_a_numpy_view():
    # A broadcast axis (stride 0) reads the same memory again: counted once, as Dask
    # counts NumPy's; a strided view counts its elements.
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (np.broadcast_to(base[0], (1000, 4)), base[:, ::2], base.T, base[1]):
        assert sizeof(dl.from_dlpack(view)) == sizeof(view), view.strides


def test_sizeof_of_a_large_tensor_is_not_the_object_header():
    t = dl.empty((64, 1024, 1024), "float32")
    assert sizeof(t) == 256 * 1024 * 1024


# -- a real local cluster ----------------------------------------------------------------

distributed = pytest.importorskip("distributed",
                                  reason="Dask distributed is not installed (the 'dask' extra)")


# The client lets go of a task's arguments and results when the scheduler confirms the
# release, which arrives asynchronously: each cluster test waits for dlinterop's counters
# to come back to where they were (nothing leaked in the client) instead of the automatic
# check, which looks at once.
pytestmark = pytest.mark.no_leak_check


def _live():
    stats = dl.memory_stats()
    return (stats["live_buffers"], stats["live_bytes"], stats["live_exports"])


@pytest.fixture
def settled():
    gc.collect()
    before = _live()
    yield
    deadline = time.monotonic() + 60
    while _live() != before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _live() == before, "a Tensor sent through Dask outlived its futures in the client"


@pytest.fixture(scope="module")
def client():
    # Dask's batched streams keep the last messages they sent for debugging
    # (distributed.admin.low-level-log-length, 1,000 by default), task arguments' frames
    # included: a NumPy array or a Tensor sent to a worker stays alive in the client until
    # 1,000 more messages have gone. Off here, so that a real leak would show.
    with dask.config.set({"distributed.admin.low-level-log-length": 0}), \
            distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None, worker_dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.mark.parametrize("readonly", [False, True])
def test_scatter_task_gather(client, settled, readonly):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    a.flags.writeable = not readonly
    t = dl.from_dlpack(a)
    future = client.scatter(t)
    seen = client.submit(mp_workers.tensor_summary, future).result()
    assert seen == ("Tensor", (4, 6), "float32", readonly, float(a.sum()))
    back = future.result()
    assert type(back) is dl.Tensor and back.readonly is readonly
    assert np.array_equal(np.from_dlpack(back), a)
    del future, back


def test_a_task_result_is_a_tensor(client, settled):
    t = dl.full((3, 1000), 2.0, "float64")
    result = client.submit(mp_workers.scaled, t, 3).result()
    assert type(result) is dl.Tensor and result.shape == (3, 1000)
    assert np.array_equal(np.from_dlpack(result), np.full((3, 1000), 6.0))


def test_the_scheduler_sees_the_bytes(client, settled):
    t = dl.empty((1024, 1024), "float32")
    future = client.scatter(t)
    nbytes = client.run_on_scheduler(
        lambda dask_scheduler, key=future.key: dask_scheduler.tasks[key].nbytes)
    assert nbytes >= t.nbytes
    del future


def test_a_worker_killed_mid_task_is_retried(client, settled, tmp_path):
    t = dl.full((1000,), 1.0, "float32")
    marker = os.fspath(tmp_path / "died")
    seen = client.submit(mp_workers.die_once, t, marker, pure=False).result(timeout=120)
    assert os.path.exists(marker)             # the first try killed its worker
    assert seen == ("Tensor", (1000,), "float32", False, 1000.0)
    client.wait_for_workers(2, timeout=120)   # the nanny restarts it for the next tests
