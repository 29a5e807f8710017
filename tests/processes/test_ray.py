"""Ray: dlinterop Tensors through a real local Ray (ray.init with two CPUs): put/get and
task arguments are zero-copy over the object store's memory, read-only, as NumPy's are."""

import os
import sys

import numpy as np
import pytest

import dlinterop as dl

ray = pytest.importorskip(
    "ray", reason="Ray is not installed (the 'ray' extra; no wheel for every Python)"
)

# Ray's object store keeps what the driver put or got alive until Ray lets go, which it
# does asynchronously: these tests wait for dlinterop's counters instead of the automatic
# check, which looks at once.
# Slow (a local Ray cluster): deselected unless --run-slow (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.no_leak_check]


@pytest.fixture(scope="module")
def ray_session():
    import cloudpickle

    # The tasks below are this module's functions: Ray's workers cannot import the test
    # module by name, so cloudpickle sends them by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=256 * 1024 * 1024,
        configure_logging=False,
    )
    try:
        yield
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def summary(t):
    """What a Ray worker sees of a Tensor: its type, layout, flags and a checksum."""
    import numpy as np

    return (
        type(t).__name__,
        t.shape,
        str(t.dtype),
        t.readonly,
        float(np.from_dlpack(t).astype(np.float64).sum()),
    )


def test_get_of_a_put_tensor_is_zero_copy_and_read_only(ray_session, settled):
    t = dl.from_dlpack(np.arange(64 * 1024, dtype=np.float32).reshape(256, 256))
    ref = ray.put(t)
    first, second = ray.get(ref), ray.get(ref)
    assert type(first) is dl.Tensor and first.shape == (256, 256)
    assert first.dtype == dl.float32
    # One copy of the bytes, in the object store: every get is a view of it.
    assert first.data_ptr == second.data_ptr != t.data_ptr
    assert first.readonly and second.readonly
    assert memoryview(first).readonly
    assert not np.from_dlpack(first).flags.writeable
    assert np.array_equal(np.from_dlpack(first), np.from_dlpack(t))
    del first, second, ref


@pytest.mark.parametrize(
    "name", ["bool", "int8", "uint16", "float16", "int64", "float64", "complex64"]
)
def test_every_dtype_comes_back_with_its_values(ray_session, settled, name):
    t = dl.full((3, 5), 1, name)
    back = ray.get(ray.put(t))
    assert back.dtype == t.dtype and back.shape == (3, 5)
    assert bytes(memoryview(back).cast("B")) == bytes(memoryview(t).cast("B"))
    del back


def test_a_strided_view_arrives_with_its_values(ray_session, settled):
    base = np.arange(48, dtype=np.int32).reshape(6, 8)
    view = dl.from_dlpack(base[1::2, ::-3])
    back = ray.get(ray.put(view))
    assert back.shape == view.shape
    assert np.array_equal(np.from_dlpack(back), base[1::2, ::-3])
    del back


def test_a_task_argument_is_read_only_and_the_result_a_tensor(ray_session, settled):
    @ray.remote
    def scaled(t, factor):
        import numpy as np

        import dlinterop as dl

        assert type(t) is dl.Tensor and t.readonly  # a view of the object store
        return dl.from_dlpack(np.from_dlpack(t) * factor)

    t = dl.full((4, 1000), 2.0, "float64")
    result = ray.get(scaled.remote(t, 3))
    assert type(result) is dl.Tensor and result.shape == (4, 1000)
    assert np.array_equal(np.from_dlpack(result), np.full((4, 1000), 6.0))
    del result


def test_four_tasks_read_one_reference(ray_session, settled):
    remote_summary = ray.remote(summary)
    a = np.arange(100_000, dtype=np.float32)
    ref = ray.put(dl.from_dlpack(a))
    seen = ray.get([remote_summary.remote(ref) for _ in range(4)])
    assert seen == [("Tensor", (100_000,), "float32", True, float(a.sum(dtype=np.float64)))] * 4
    del ref


def test_a_worker_killed_mid_task_is_retried(ray_session, settled, tmp_path):
    @ray.remote(max_retries=2)
    def die_once(t, marker):
        import os
        import signal

        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return summary(t)

    t = dl.full((1000,), 1.0, "float32")
    marker = os.fspath(tmp_path / "died")
    seen = ray.get(die_once.remote(t, marker), timeout=120)
    assert os.path.exists(marker)  # the first try killed its worker
    assert seen == ("Tensor", (1000,), "float32", True, 1000.0)
