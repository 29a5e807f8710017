"""Dask: dlinterop Tensors in Dask's memory accounting and on a real local cluster (two
worker processes), as NumPy arrays are."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl

import mp_workers

dask = pytest.importorskip("dask", reason="Dask is not installed (the 'dask' extra)")
from dask.sizeof import sizeof  # noqa: E402

# -- sizeof, through Dask's entry point ----------------------------------------------------


@pytest.mark.parametrize(
    "shape,name",
    [
        ((1024, 256), "float32"),
        ((3, 5), "complex128"),
        ((0, 4), "int8"),
        ((), "float64"),
        ((7,), "float4_e2m1fn"),
        ((9,), "bool"),
    ],
)
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


# -- tokenize: the bytes are hashed, as for NumPy arrays -----------------------------------


def test_token_follows_the_contents():
    from dask.base import tokenize

    a = dl.from_dlpack(np.arange(6.0))
    assert tokenize(a) == tokenize(dl.from_dlpack(np.arange(6.0)))
    assert tokenize(a) != tokenize(dl.from_dlpack(np.arange(1.0, 7.0)))
    assert tokenize(a) != tokenize(dl.from_dlpack(np.arange(6.0).reshape(2, 3)))
    assert tokenize(a) != tokenize(dl.from_dlpack(np.arange(6, dtype=np.int64)))
    np.from_dlpack(a)[0] = 10.0  # a write changes the token
    assert tokenize(a) != tokenize(dl.from_dlpack(np.arange(6.0)))


def test_token_of_a_strided_view_is_that_of_its_elements():
    from dask.base import tokenize

    base = np.arange(24.0).reshape(4, 6)
    assert tokenize(dl.from_dlpack(base[:, ::2])) == tokenize(
        dl.from_dlpack(np.ascontiguousarray(base[:, ::2]))
    )


# -- a real local cluster ----------------------------------------------------------------

distributed = pytest.importorskip(
    "distributed", reason="Dask distributed is not installed (the 'dask' extra)"
)


# -- distributed's "dask" serialization family --------------------------------------------


def _frames_round_trip(t, frame=None):
    from distributed.protocol import deserialize, serialize

    header, frames = serialize(t)
    assert header["serializer"] == "dask"  # not pickle: frames whatever the protocol
    return deserialize(header, frames if frame is None else [frame])


@pytest.mark.parametrize(
    "name",
    [
        "bool",
        "int8",
        "uint16",
        "float16",
        "bfloat16",
        "float32",
        "complex128",
        "float8_e4m3fn",
        "float4_e2m1fn",
    ],
)
def test_every_dtype_crosses_as_one_frame(name):
    t = dl.full((3, 5), 1, name)
    back = _frames_round_trip(t)
    assert type(back) is dl.Tensor and back.dtype == t.dtype and back.shape == (3, 5)
    assert not back.readonly
    assert bytes(back.__reduce_ex__(5)[1][0].raw()) == bytes(t.__reduce_ex__(5)[1][0].raw())


def test_a_strided_read_only_view_crosses_with_its_values_and_flag():
    base = np.arange(48, dtype=np.int32).reshape(6, 8)
    base.flags.writeable = False
    back = _frames_round_trip(dl.from_dlpack(base[1::2, ::-3]))
    assert back.readonly and back.shape == (3, 3)
    assert np.array_equal(np.from_dlpack(back), base[1::2, ::-3])


def test_a_frame_at_any_address_is_shared_not_copied():
    # Dask's TCP transport reads small frames into one buffer: the bytes can start at any
    # address. The Tensor stays over them, as NumPy's arrays do (flags.aligned False).
    t = dl.from_dlpack(np.arange(1000, dtype=np.float64))
    raw = bytes(t.__reduce_ex__(5)[1][0].raw())
    received = bytearray(len(raw) + 8)
    received[3 : 3 + len(raw)] = raw
    frame = memoryview(received)[3 : 3 + len(raw)]
    buffers = dl.memory_stats()["live_buffers"]
    back = _frames_round_trip(t, frame)
    assert dl.memory_stats()["live_buffers"] == buffers  # no copy of dlinterop's
    assert back.data_ptr % 8 == 3
    assert np.array_equal(np.from_dlpack(back), np.arange(1000, dtype=np.float64))
    np.from_dlpack(back)[0] = 7.0
    assert received[3:11] == np.float64(7.0).tobytes()  # the same memory


def test_a_read_only_frame_for_a_writable_tensor_is_copied():
    t = dl.from_dlpack(np.arange(4.0))
    back = _frames_round_trip(t, memoryview(bytes(t.__reduce_ex__(5)[1][0].raw())))
    assert not back.readonly
    np.from_dlpack(back)[0] = 5.0  # its own memory


def test_a_crafted_header_is_a_clear_error():
    from distributed.protocol import deserialize, serialize

    header, frames = serialize(dl.from_dlpack(np.arange(4.0)))
    for sub, error in (
        ({"shape": [5]}, ValueError),
        ({"shape": [2**62]}, ValueError),
        ({"shape": ["4"]}, TypeError),
        ({"shape": [2, 2.0]}, TypeError),
        ({"dtype": [2, 64, 1, 0]}, TypeError),
        ({"dtype": [99, 8, 1]}, ValueError),
        ({"readonly": 1}, TypeError),
    ):
        crafted = dict(header, **{"sub-header": dict(header["sub-header"], **sub)})
        with pytest.raises(error):
            deserialize(crafted, frames)


@pytest.mark.parametrize(
    "header", [{"shape": [4]}, {"dtype": [2, 64, 1]}, {"shape": 4}, {"shape": [4], "dtype": 2}, {}]
)
@pytest.mark.parametrize("family", ["deserialize_tensor", "cuda_deserialize_tensor"])
def test_a_header_without_shape_or_type_is_a_clear_error(family, header):
    from dlinterop._integrations import dask as _dask

    with pytest.raises(ValueError, match="header holds its 'shape' and 'dtype'"):
        getattr(_dask, family)(dict(header, readonly=False), [bytes(32)])


@pytest.mark.parametrize("count", [0, 2])
@pytest.mark.parametrize("family", ["deserialize_tensor", "cuda_deserialize_tensor"])
def test_a_tensor_is_one_frame(family, count):
    from dlinterop._integrations import dask as _dask

    header = {"shape": [4], "dtype": [2, 64, 1], "readonly": False}
    with pytest.raises(ValueError, match="one frame"):
        getattr(_dask, family)(header, [bytearray(32)] * count)


# The cuda family's deserializer takes any frame with __cuda_array_interface__ or the
# buffer protocol: a host frame stands in for a device one here (tests/gpu runs device
# frames). Its header must take exactly the frame's bytes, checked before anything is made.


@pytest.mark.parametrize(
    "shape,error",
    [
        ([1000], "0 bytes do not hold a float32 tensor of shape"),  # was an uninitialised Tensor
        ([2**40], "0 bytes do not hold"),  # was a 4 TiB allocation
        ([2**62], "overflows"),
        ([-1], "negative"),
        ([2] * 65, "at most 64 dimensions"),
    ],
)
def test_a_cuda_header_for_an_empty_frame_is_checked(shape, error):
    from dlinterop._integrations import dask as _dask

    buffers = dl.memory_stats()["live_buffers"]
    with pytest.raises(ValueError, match=error):
        _dask.cuda_deserialize_tensor(
            {"shape": shape, "dtype": [2, 32, 1]}, [dl.zeros(0, dl.uint8)]
        )
    assert dl.memory_stats()["live_buffers"] == buffers


def test_a_crafted_cuda_header_through_distributed_is_a_clear_error():
    from distributed.protocol import deserialize, pickle

    header = {
        "serializer": "cuda",
        "type-serialized": pickle.dumps(dl.Tensor),
        "sub-header": {"shape": [1000], "dtype": [2, 32, 1], "device": "cuda:0"},
        "compression": (False,),
    }
    with pytest.raises(ValueError, match="0 bytes do not hold"):
        deserialize(header, [dl.zeros(0, dl.uint8)])


@pytest.mark.parametrize(
    "shape,dtype", [([3], [2, 32, 1]), ([1], [2, 32, 1]), ([2, 2], [2, 32, 1]), ([1], [2, 16, 1])]
)
def test_a_cuda_header_must_take_exactly_the_frames_bytes(shape, dtype):
    from dlinterop._integrations import dask as _dask

    with pytest.raises(ValueError, match="8 bytes do not hold"):
        _dask.cuda_deserialize_tensor({"shape": shape, "dtype": dtype}, [dl.zeros(8, dl.uint8)])


@pytest.mark.parametrize(
    "dtype,error", [([99, 8, 1], ValueError), ([2, 32], TypeError), (["2", 32, 1], TypeError)]
)
def test_a_cuda_header_with_a_crafted_type_is_a_clear_error(dtype, error):
    from dlinterop._integrations import dask as _dask

    with pytest.raises(error):
        _dask.cuda_deserialize_tensor({"shape": [2], "dtype": dtype}, [dl.zeros(8, dl.uint8)])


def test_a_cuda_header_for_packed_elements_is_refused():
    # The cuda family's serializer sends packed types through the dask family.
    from dlinterop._integrations import dask as _dask

    with pytest.raises(ValueError, match="packed float4_e2m1fn"):
        _dask.cuda_deserialize_tensor({"shape": [4], "dtype": [17, 4, 1]}, [dl.zeros(2, dl.uint8)])


@pytest.mark.parametrize("shape", [[2, 3], [6], [], [0, 4]])
def test_a_cuda_header_that_fits_views_the_frame(shape):
    from dlinterop._integrations import dask as _dask

    count = int(np.prod(shape))
    frame = dl.from_dlpack(np.arange(count, dtype=np.float32).view(np.uint8))
    back = _dask.cuda_deserialize_tensor({"shape": shape, "dtype": [2, 32, 1]}, [frame])
    assert back.shape == tuple(shape) and back.dtype == dl.float32
    if count:
        assert back.data_ptr == frame.data_ptr
        assert np.array_equal(
            np.from_dlpack(back), np.arange(count, dtype=np.float32).reshape(shape)
        )


def test_a_host_tensor_is_not_the_cuda_familys():
    # The cuda family (UCX's) carries CUDA Tensors only: a host Tensor goes on to the next.
    from distributed.protocol import serialize
    from distributed.protocol.cuda import cuda_serialize

    assert cuda_serialize.dispatch(dl.Tensor).__module__ == "dlinterop._integrations.dask"
    header, _frames = serialize(dl.from_dlpack(np.arange(3.0)), serializers=["cuda", "dask"])
    assert header["serializer"] == "dask"


def test_registered_whichever_is_imported_first():
    # Dask's dask.sizeof entry point registers the serializers when distributed.protocol
    # is imported (it always comes after dask.sizeof); import dlinterop alone waits for
    # nothing and imports none of it.
    check = (
        "import dlinterop as dl\n"
        "from distributed.protocol.serialize import dask_serialize\n"
        "from distributed.protocol.cuda import cuda_serialize\n"
        "ours = 'dlinterop._integrations.dask'\n"
        "assert dask_serialize.dispatch(dl.Tensor).__module__ == ours\n"
        "assert cuda_serialize.dispatch(dl.Tensor).__module__ == ours\n"
    )
    for first in ("import dlinterop\n", "import distributed\n", "import dask.sizeof\n"):
        proc = subprocess.run(
            [sys.executable, "-c", first + check], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, (first, proc.stderr[-2000:])


# The client lets go of a task's arguments and results when the scheduler confirms the
# release, which arrives asynchronously: each cluster test waits for dlinterop's counters
# to come back to where they were (nothing leaked in the client) instead of the automatic
# check, which looks at once.
# Slow (a local Dask cluster): deselected unless --run-slow (tests/conftest.py).
pytestmark = [pytest.mark.slow, pytest.mark.no_leak_check]


@pytest.fixture(scope="module")
def client():
    # Dask's batched streams keep the last messages they sent for debugging
    # (distributed.admin.low-level-log-length, 1,000 by default), task arguments' frames
    # included: a NumPy array or a Tensor sent to a worker stays alive in the client until
    # 1,000 more messages have gone. Off here, so that a real leak would show.
    with (
        dask.config.set({"distributed.admin.low-level-log-length": 0}),
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
    ):
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
        lambda dask_scheduler, key=future.key: dask_scheduler.tasks[key].nbytes
    )
    assert nbytes >= t.nbytes
    del future


def test_a_worker_killed_mid_task_is_retried(client, settled, tmp_path):
    t = dl.full((1000,), 1.0, "float32")
    marker = os.fspath(tmp_path / "died")
    seen = client.submit(mp_workers.die_once, t, marker, pure=False).result(timeout=120)
    assert os.path.exists(marker)  # the first try killed its worker
    assert seen == ("Tensor", (1000,), "float32", False, 1000.0)
    client.wait_for_workers(2, timeout=120)  # the nanny restarts it for the next tests
