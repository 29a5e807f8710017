"""Tensors in shared memory (dl.share, shared=True) and the handles they cross process
boundaries as: what a shared Tensor is, and what its handle rebuilds."""

import os
import pickle
import sys

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="shared-memory Tensors are built on Linux memfds"
)


def values(t):
    return np.from_dlpack(t).tolist()


@pytest.mark.parametrize(
    "make",
    [
        lambda: dl.empty((3, 4), shared=True),
        lambda: dl.zeros((3, 4), "int16", shared=True),
        lambda: dl.full((3, 4), 2.5, shared=True),
        lambda: dl.full((5,), 1, dl.float4_e2m1fn, shared=True),
        lambda: dl.zeros((), shared=True),
        lambda: dl.zeros((0, 3), shared=True),
    ],
)
def test_shared_tensors_are_page_aligned_and_shared(make):
    t = make()
    assert t.is_shared and t.owner is not None and not t.readonly
    assert t.data_ptr % 4096 == 0 and t.is_contiguous()


def test_zeros_and_full_hold_their_values():
    assert values(dl.zeros((2, 3), shared=True)) == [[0.0] * 3] * 2
    assert values(dl.full((2, 2), 7, "int32", shared=True)) == [[7, 7], [7, 7]]


def test_a_larger_alignment_is_honoured():
    t = dl.zeros(10, shared=True, alignment=1 << 16)
    assert t.data_ptr % (1 << 16) == 0 and t.is_shared


def test_shared_memory_is_host_or_cuda_device_memory():
    with pytest.raises(ValueError, match="shared=True makes host or CUDA device memory"):
        dl.zeros(3, device="cuda_managed:0", shared=True)


@pytest.mark.skipif(dl.cuda.is_available(), reason="tests/gpu covers shared CUDA Tensors")
def test_shared_cuda_memory_without_a_gpu_is_a_cuda_error():
    with pytest.raises(dl.cuda.CUDAError):
        dl.zeros(3, device="cuda:0", shared=True)


def test_ordinary_tensors_are_not_shared():
    assert not dl.zeros(3).is_shared
    assert not dl.from_dlpack(np.arange(3.0)).is_shared


def test_share_copies_anything_into_shared_memory():
    a = np.arange(6.0).reshape(2, 3)[:, ::2]  # strided
    t = dl.share(a)
    assert t.is_shared and t.data_ptr != a.ctypes.data
    assert values(t) == a.tolist() and t.is_contiguous()
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert not dl.share(ro).readonly  # a copy: writable


def test_share_of_a_shared_tensor_is_that_tensor():
    t = dl.zeros(4, shared=True)
    assert dl.share(t) is t


def test_views_of_a_shared_tensor_are_shared():
    t = dl.zeros(4, shared=True)
    assert dl.from_dlpack(t).is_shared
    assert dl.from_dlpack(dl.to_dlpack(t, versioned=True)).is_shared
    u = dl.from_dlpack(t)
    del t
    assert u.is_shared and values(u) == [0.0] * 4


def test_share_refuses_device_memory():
    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("not reachable")

    with pytest.raises(BufferError):
        dl.share(OnGpu())


def test_shared_memory_is_counted_and_released():
    before = dl.memory_stats()
    t = dl.zeros(1000, shared=True)
    during = dl.memory_stats()
    assert during["live_buffers"] == before["live_buffers"] + 1
    assert during["live_bytes"] >= before["live_bytes"] + 4000
    del t
    assert dl.memory_stats()["live_buffers"] == before["live_buffers"]


def test_ordinary_pickle_goes_by_value():
    t = dl.full((4,), 3.0, shared=True)
    for protocol in (2, 4, 5):
        u = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert not u.is_shared and values(u) == [3.0] * 4


# -- handles ------------------------------------------------------------------------------


def test_a_handle_rebuilds_a_tensor_over_the_same_memory():
    t = dl.full((2, 3), 1.0, shared=True)
    segment, *layout = _core._shared_handle(t)
    u = _core._tensor_from_shared(os.dup(segment.fd), segment.length, *layout)
    assert u.is_shared and (u.shape, u.strides, u.dtype) == (t.shape, t.strides, t.dtype)
    np.from_dlpack(u)[1, 2] = 9.0
    assert values(t)[1][2] == 9.0


def test_a_handle_keeps_the_offset_and_strides_of_a_view():
    t = dl.full((16,), 1.0, shared=True)
    segment, offset, shape, strides, triple, readonly = _core._shared_handle(t)
    view = _core._tensor_from_shared(
        os.dup(segment.fd), segment.length, 8, (3,), (2,), triple, readonly
    )
    np.from_dlpack(view)[:] = [5.0, 6.0, 7.0]
    assert values(t)[2:7] == [5.0, 1.0, 6.0, 1.0, 7.0]
    again = _core._shared_handle(dl.from_dlpack(view))
    assert again[0].length == segment.length
    assert again[1:] == (8, (3,), (2,), triple, readonly)


def test_a_read_only_handle_gives_a_read_only_tensor():
    t = dl.zeros(4, shared=True)
    segment, offset, shape, strides, triple, _ = _core._shared_handle(t)
    u = _core._tensor_from_shared(
        os.dup(segment.fd), segment.length, offset, shape, strides, triple, True
    )
    assert u.readonly and u.readonly_reason == "flag"


def test_a_shared_handle_names_its_fields_and_rebuilds_its_view():
    t = dl.full((2, 3), 1.0, shared=True)[:, 1:]
    handle = _core._shared_handle(t)
    assert type(handle).__name__ == "SharedHandle"
    assert (handle.offset, handle.shape, handle.strides) == (4, (2, 2), (3, 1))
    assert (handle.dtype, handle.readonly) == ((2, 32, 1), False)
    u = _core._tensor_in_segment(*handle)
    assert (u.data_ptr, u.shape, u.strides) == (t.data_ptr, t.shape, t.strides)


def test_a_cuda_ipc_handle_is_checked_by_the_core_before_the_driver():
    from dlinterop._integrations import cuda_ipc
    from dlinterop._lib.handles import CudaIpcHandle

    layout = (bytes(64), 0, 0, bytes(64), (4,), (1,), (2, 32, 1))
    with pytest.raises(TypeError, match="a counter is a writable int64 Tensor in shared"):
        cuda_ipc.receive(CudaIpcHandle(*layout, False, dl.zeros((1,), "int64")))
    counter = dl.zeros((1,), "int64", shared=True)
    with pytest.raises(TypeError, match="readonly is a bool"):
        cuda_ipc.receive(CudaIpcHandle(*layout, 0, counter))


def test_no_handle_for_memory_that_is_not_shared():
    assert _core._shared_handle(dl.zeros(3)) is None
