"""GPU tests: run by tests/gpu/run.sh on a machine with a CUDA GPU; skipped elsewhere."""

import gc
import time

import pytest

import dlinterop as dl

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not dl.cuda.is_available(), reason="needs a CUDA GPU"),
]

MEMORY_KINDS = ["cuda", "cuda_host", "cuda_managed"]


def stats(device):
    return {k: v for k, v in dl.memory_stats(device).items() if k.startswith("live")}


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.parametrize("device", MEMORY_KINDS)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16", "complex64", "bool"])
def test_full_on_each_memory_kind_reads_back(device, dtype):
    value = True if dtype == "bool" else 3
    t = dl.full((5, 7), value, dtype, device=device)
    assert t.device == f"{device}:0"
    back = t.to("cpu")
    assert back.device == "cpu:0"
    ref = dl.full((5, 7), value, dtype)
    assert _raw(back) == _raw(ref)


def _raw(t):
    import ctypes

    return ctypes.string_at(t.data_ptr, t.nbytes)


@pytest.mark.parametrize("device", MEMORY_KINDS)
def test_zeros_and_copies_between_memory_kinds(device):
    src = dl.full((64, 33), 2.5, "float32")
    there = src.to(device)
    assert _raw(there.to("cpu")) == _raw(src)
    for other in MEMORY_KINDS:
        assert _raw(there.to(other).to("cpu")) == _raw(src)
    assert _raw(dl.zeros((3, 3), device=device).to("cpu")) == bytes(36)


def test_strided_device_copy_gathers(cupy):
    a = cupy.arange(24, dtype=cupy.float32).reshape(4, 6)[:, ::-2]
    t = dl.from_dlpack(a)
    c = t.copy()
    assert c.is_contiguous()
    assert cupy.array_equal(cupy.from_dlpack(c), a)


@pytest.mark.parametrize("device", ["cuda", "cuda_managed"])
def test_cupy_round_trip_is_zero_copy(cupy, device):
    t = dl.full((128,), 1.0, "float32", device=device)
    a = cupy.from_dlpack(t)
    assert a.data.ptr == t.data_ptr
    a += 1
    back = dl.from_dlpack(a)
    assert back.data_ptr == t.data_ptr
    assert float(cupy.from_dlpack(back).sum()) == 256.0


def test_torch_round_trip_is_zero_copy(torch):
    t = dl.full((16, 16), 1.0, "float32", device="cuda")
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr and x.is_cuda
    y = torch.ones(8, 8, device="cuda")
    u = dl.from_dlpack(y)
    assert u.data_ptr == y.data_ptr() and u.device == "cuda:0"


def test_pinned_memory_is_shared_with_the_cpu_without_copy():
    t = dl.full((1000,), 7, "int32", device="cuda_host")
    view = memoryview(t)
    assert view[3] == 7
    np = pytest.importorskip("numpy")
    a = np.asarray(t)
    assert a.ctypes.data == t.data_ptr


def test_export_to_cpu_copies_with_is_copied_flag_and_copy_false_refuses():
    t = dl.full((10,), 4.0, "float32", device="cuda")
    with pytest.raises(dl.CopyError):
        t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    np = pytest.importorskip("numpy")
    a = np.from_dlpack(t, device="cpu")
    assert float(a.sum()) == 40.0


def test_stream_zero_is_rejected():
    t = dl.zeros(4, device="cuda")
    with pytest.raises(ValueError):
        t.__dlpack__(stream=0, max_version=(1, 3))
    t.__dlpack__(stream=-1, max_version=(1, 3))
    t.__dlpack__(stream=2, max_version=(1, 3))


def test_consumer_stream_waits_for_producer_work(torch):
    """Producer fills on stream A; torch consumes on stream B right away; the values must
    be the filled ones, which only an event wait (not luck) guarantees with long work."""
    n = 1 << 26
    a = dl.cuda.Stream()
    with a:
        t = dl.full((n,), 3.0, "float32", device="cuda")  # long fill pending on A
        for _ in range(5):
            t = t.copy()
    b = torch.cuda.Stream()
    with torch.cuda.stream(b):
        x = torch.from_dlpack(t)
        total = x.sum()
    b.synchronize()
    assert float(total) == 3.0 * n


def test_deleters_and_stats_back_to_baseline(cupy, torch):
    gc.collect()
    before = stats("cuda:0")
    for _ in range(100):
        t = dl.empty((256,), device="cuda")
        a = cupy.from_dlpack(t)
        x = torch.from_dlpack(t)
        del t, a, x
    gc.collect()
    assert stats("cuda:0") == before


def test_cuda_array_interface_is_v3_with_stream(cupy):
    t = dl.full((3, 4), 1.0, "float32", device="cuda")
    iface = t.__cuda_array_interface__
    assert iface["version"] == 3 and iface["data"][0] == t.data_ptr
    assert iface["stream"] is not None
    a = cupy.asarray(t)
    assert a.data.ptr == t.data_ptr
    back = dl.asarray(a)
    assert back.data_ptr == t.data_ptr


def test_out_of_memory_is_memory_error():
    with pytest.raises(MemoryError):
        dl.empty((1 << 50,), "uint8", device="cuda")


def test_host_to_device_bandwidth_is_measured(capsys):
    nbytes = 256 << 20
    src = dl.empty((nbytes,), "uint8", device="cuda_host")
    start = time.perf_counter()
    dst = src.to("cuda")
    dl.cuda.synchronize()
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\nH2D from pinned: {nbytes / elapsed / 1e9:.1f} GB/s")
    assert dst.nbytes == nbytes


def test_import_inside_a_stream_context_passes_that_stream(torch):
    """With a dl.cuda.Stream current, dl.from_dlpack hands its pointer to the producer."""
    seen = {}

    class Producer:
        def __init__(self, x):
            self.x = x

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            seen.update(kwargs)
            return self.x.__dlpack__(**kwargs)

    x = torch.ones(4, device="cuda")
    with dl.cuda.Stream() as s:
        t = dl.from_dlpack(Producer(x))
    assert seen["stream"] == s.ptr
    assert t.data_ptr == x.data_ptr()


# ---- the way out on CUDA (dlinterop.frameworks) -------------------------------------------


def test_empty_like_cuda_torch_uses_torchs_caching_allocator(torch):
    x = torch.ones(4, 4, device="cuda")
    before = stats("cuda")
    reserved = torch.cuda.memory_allocated()
    t = dl.zeros_like(x, shape=(1024, 1024))
    assert stats("cuda") == before  # not dlinterop's allocator
    assert torch.cuda.memory_allocated() >= reserved + 4 * 1024 * 1024
    assert t.device == "cuda:0"
    y = dl.to_framework(t, like=x)
    assert type(y) is torch.Tensor and y.is_cuda and y.data_ptr() == t.data_ptr
    assert int(torch.count_nonzero(y)) == 0  # the zero fill is ordered first


def test_to_framework_cuda_orders_dlinterops_work_before_torchs_stream(torch):
    t = dl.full((1 << 22,), 2.0, "float32", device="cuda")  # filled on dlinterop's stream
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = dl.to_framework(t, like="torch")
        total = float(y.sum())
    assert total == 2.0 * (1 << 22)


def test_borrow_of_a_cuda_torch_tensor_goes_through_its_table(torch):
    import dlinterop.frameworks as fw

    x = torch.ones(3, 5, device="cuda")
    assert fw._borrow_routes(x) == ("table", (3, 5), False)


def test_empty_like_cuda_cupy_uses_dlinterops_allocator(cupy):
    x = cupy.ones((8,), dtype=cupy.float32)
    before = stats("cuda")["live_buffers"]
    t = dl.empty_like(x)
    assert stats("cuda")["live_buffers"] == before + 1
    y = dl.to_framework(t, like=x)
    assert type(y) is type(x) and y.data.ptr == t.data_ptr


# ---- CUDA Tensors across processes (CUDA IPC) ----------------------------------------------


def _send_to_child(t):
    """Runs mp_workers.cuda_add_one on `t` in a spawned child; returns what it saw."""
    import concurrent.futures
    import multiprocessing

    import mp_workers  # tests/support/, on pytest's pythonpath: a spawned child imports it by name

    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        return pool.submit(mp_workers.cuda_add_one, t).result(timeout=120)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_shared_cuda_tensor_crosses_to_a_spawned_child_without_a_copy(dtype):
    from dlinterop._integrations import cuda_ipc

    t = dl.full((4, 8), 2, dtype, device="cuda", shared=True)
    assert t.is_shared and dl.share(t) is t
    assert _send_to_child(t) == 3
    assert _raw(t.to("cpu")) == _raw(dl.full((4, 8), 3, dtype))  # the parent's memory changed
    # The child let go: the sender's bookkeeping lets the Tensor go at the next send.
    cuda_ipc.release_received()
    assert all(entry[0] is not t for entry in cuda_ipc._sent)


def test_pool_cuda_tensor_crosses_as_a_device_copy():
    t = dl.full((16,), 5.0, device="cuda")  # the stream-ordered pool: no IPC handle
    assert not t.is_shared
    assert _send_to_child(t) == 6  # the child saw the values...
    assert _raw(t.to("cpu")) == _raw(dl.full((16,), 5.0))  # ...of a copy


def test_torch_cuda_tensor_crosses_without_a_copy(torch):
    x = torch.full((8,), 1.0, device="cuda")
    t = dl.from_dlpack(x)
    assert _send_to_child(t) == 2
    assert x.tolist() == [2.0] * 8  # torch's own memory, written by the child


def test_dl_share_of_a_cuda_tensor_is_ipc_memory():
    t = dl.share(dl.full((3, 5), 7, "int32", device="cuda"))
    assert t.is_shared and t.device == "cuda:0" and t.shape == (3, 5)
    assert _raw(t.to("cpu")) == _raw(dl.full((3, 5), 7, "int32"))


def test_crafted_cuda_handle_is_an_error():
    from dlinterop import _core

    with pytest.raises(dl.cuda.CUDAError):
        _core._tensor_from_cuda_ipc(
            b"\0" * 64,
            0,
            0,
            b"\0" * 64,
            (4,),
            (1,),
            (2, 32, 1),
            False,
            dl.zeros((1,), "int64", shared=True),
        )


# -- Dask: the cuda family (UCX's, device to device) and the dask family (TCP) -------------


@pytest.fixture
def dask_protocol():
    return pytest.importorskip("distributed.protocol")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "complex128"])
def test_dask_cuda_family_frames_stay_on_the_device(dask_protocol, dtype):
    t = dl.full((4, 6), 2, dtype, device="cuda")[:, ::2]  # not C order: copied on the device
    header, frames = dask_protocol.serialize(t, serializers=["cuda"])
    assert header["serializer"] == "cuda"
    (frame,) = frames
    assert frame.device == t.device  # a device frame, no host copy
    back = dask_protocol.deserialize(header, frames, deserializers=["cuda"])
    assert back.device == t.device and back.shape == (4, 3) and back.dtype == t.dtype
    assert (
        back.to("cpu").__reduce_ex__(5)[1][0].raw().tobytes()
        == t.to("cpu").__reduce_ex__(5)[1][0].raw().tobytes()
    )


@pytest.mark.parametrize("shape", [[1000], [2**40], [5]])
def test_dask_cuda_family_checks_the_header_against_the_device_frame(dask_protocol, shape):
    # Regression: an empty device frame gave an uninitialised Tensor of whatever shape the
    # header named (or an allocation of that size).
    header, _frames = dask_protocol.serialize(
        dl.zeros((4,), "float32", device="cuda"), serializers=["cuda"]
    )
    crafted = dict(header, **{"sub-header": dict(header["sub-header"], shape=shape)})
    for frame in (dl.empty((0,), "uint8", device="cuda"), dl.zeros((16,), "uint8", device="cuda")):
        with pytest.raises(ValueError, match="bytes do not hold"):
            dask_protocol.deserialize(crafted, [frame], deserializers=["cuda"])


def test_dask_cuda_family_takes_a_cupy_frame(dask_protocol, cupy):
    t = dl.full((3, 5), 7, "int32", device="cuda")
    header, (frame,) = dask_protocol.serialize(t, serializers=["cuda"])
    as_cupy = cupy.asarray(frame)  # what UCX may hand over
    back = dask_protocol.deserialize(header, [as_cupy], deserializers=["cuda"])
    assert back.shape == (3, 5) and cupy.asarray(back).sum().item() == 7 * 15


def test_dask_family_sends_a_cuda_tensor_through_the_host_and_back(dask_protocol, torch):
    x = torch.arange(12, device="cuda", dtype=torch.float32).reshape(3, 4)
    t = dl.from_dlpack(x)
    header, frames = dask_protocol.serialize(t, serializers=["dask"])
    assert header["serializer"] == "dask"
    back = dask_protocol.deserialize(header, frames, deserializers=["dask"])
    assert back.device == t.device
    assert torch.equal(torch.from_dlpack(back), x)
