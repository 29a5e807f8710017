"""dlinterop's own DLPack 1.3 exchange table, published on dl.Tensor, called through ctypes:
its allocator, owning export, import, non-owning view and current work stream."""

import builtins
import ctypes
import gc
import sys
from ctypes import POINTER, byref, c_int64, c_void_p

import numpy as np
import pytest

import dlinterop as dl
from exchange_api.helpers import (
    ALLOCATIONS,
    API_NAME,
    CPU,
    CUDA,
    DL_API,
    FUNCTIONS,
    SET_ERROR,
    ManagedFactory,
    allocator,
    current_stream,
    dltensor_layout,
    from_py,
    readonly_tensor,
    table_address,
    take_object,
    to_py,
    view,
)

from forge import READ_ONLY, DLManagedTensorVersioned, DLTensor, c_strides, capsule_name


def test_table_is_a_capsule_on_the_type():
    assert "__dlpack_c_exchange_api__" in vars(dl.Tensor)
    capsule = dl.Tensor.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    assert capsule_name(capsule) == API_NAME
    assert dl.Tensor.__dlpack_c_exchange_api__ is capsule
    assert dl.zeros((2,)).__dlpack_c_exchange_api__ is capsule


def test_dlpack_1_2_spelling_is_the_same_table_as_an_int():
    address = dl.Tensor.__c_dlpack_exchange_api__
    assert type(address) is int
    assert address == table_address(dl.Tensor) != 0


def test_table_header_is_1_3_with_all_five_functions():
    assert (DL_API.header.version.major, DL_API.header.version.minor) == (1, 3)
    assert not DL_API.header.prev_api
    for name in FUNCTIONS:
        assert getattr(DL_API, name), f"{name} is NULL"


# ---- managed_tensor_allocator ---------------------------------------------------------


def call_allocator(shape, dtype, device=(CPU, 0), *, ndim=None, null_shape=False, strides=None):
    """Calls the allocator; returns (rc, managed pointer or None, SetError calls)."""
    errors = []
    error_ctx = 0x5EED

    def record(ctx, kind, message):
        errors.append((ctx, kind.decode(), message.decode()))

    set_error = SET_ERROR(record)
    shape_array = (c_int64 * max(len(shape), 1))(*shape)
    strides_array = None if strides is None else (c_int64 * len(strides))(*strides)
    prototype = DLTensor()
    prototype.device.device_type, prototype.device.device_id = device
    prototype.ndim = len(shape) if ndim is None else ndim
    prototype.dtype.code, prototype.dtype.bits, prototype.dtype.lanes = dtype
    if not null_shape:
        prototype.shape = ctypes.cast(shape_array, POINTER(c_int64))
    if strides_array is not None:
        prototype.strides = ctypes.cast(strides_array, POINTER(c_int64))
    out = POINTER(DLManagedTensorVersioned)()
    rc = allocator(byref(prototype), byref(out), error_ctx, set_error)
    for ctx, _, _ in errors:
        assert ctx == error_ctx, "SetError must receive the caller's error_ctx"
    return rc, (out if out else None), [(kind, message) for _, kind, message in errors]


def packed_nbytes(shape, dtype):
    count = int(np.prod(shape, dtype=np.int64))
    return -(-count * dtype[1] * dtype[2] // 8)


@pytest.mark.parametrize("shape, dtype", ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_allocator_gives_aligned_c_contiguous_tensor(shape, dtype, live_counters):
    before = live_counters()
    rc, out, errors = call_allocator(shape, dtype)
    assert (rc, errors) == (0, [])
    m = out.contents
    t = m.dl_tensor
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    assert (t.device.device_type, t.device.device_id) == (CPU, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == dtype
    assert t.ndim == len(shape)
    if shape:
        assert dltensor_layout(t) == (shape, c_strides(shape))
    else:
        assert dltensor_layout(t) == (None, None)
    assert t.byte_offset == 0
    assert t.data % 256 == 0
    nbytes = packed_nbytes(shape, dtype)
    ctypes.memset(t.data, 0x5A, nbytes)  # the whole extent is writable
    now = live_counters()
    assert now["live_buffers"] == before["live_buffers"] + 1
    assert now["live_bytes"] == before["live_bytes"] + nbytes
    assert m.deleter
    m.deleter(out)
    assert live_counters() == before


def test_allocator_ignores_prototype_strides():
    rc, out, errors = call_allocator((4, 3), (2, 32, 1), strides=(1, 4))
    assert (rc, errors) == (0, [])
    assert dltensor_layout(out.contents.dl_tensor) == ((4, 3), (3, 1))
    out.contents.deleter(out)


def test_allocated_tensor_imports_as_an_owning_writable_tensor(live_counters):
    before = live_counters()
    rc, out, _ = call_allocator((2, 3), (2, 32, 1))
    assert rc == 0
    data = out.contents.dl_tensor.data
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    t = take_object(address.value)
    assert type(t) is dl.Tensor
    assert (t.shape, t.dtype, t.data_ptr, t.readonly) == ((2, 3), "float32", data, False)
    np.asarray(t)[...] = 7
    assert np.asarray(t).sum() == 42
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    del t
    assert live_counters() == before


ALLOCATION_ERRORS = {
    "opaque handle dtype": (dict(shape=(2, 3), dtype=(3, 8, 1)), "ValueError"),
    "lanes 4": (dict(shape=(2, 3), dtype=(2, 32, 4)), "ValueError"),
    "negative dim": (dict(shape=(2, -1), dtype=(2, 32, 1)), "ValueError"),
    "ndim 65": (dict(shape=(1,) * 65, dtype=(2, 32, 1)), "ValueError"),
    "ndim -1": (dict(shape=(2,), dtype=(2, 32, 1), ndim=-1), "ValueError"),
    "NULL shape": (dict(shape=(2, 3), dtype=(2, 32, 1), null_shape=True), "ValueError"),
    "overflowing shape": (dict(shape=(2**62, 2**62), dtype=(2, 32, 1)), "ValueError"),
}


@pytest.mark.parametrize("kwargs, kind", ALLOCATION_ERRORS.values(), ids=ALLOCATION_ERRORS.keys())
def test_allocator_reports_bad_prototypes_through_set_error(kwargs, kind):
    rc, out, errors = call_allocator(**kwargs)
    assert rc == -1
    assert out is None
    assert len(errors) == 1
    assert errors[0][0] == kind
    assert "dlinterop" in errors[0][1]


@pytest.mark.skipif(dl.cuda.is_available(), reason="needs a machine without a usable GPU")
@pytest.mark.parametrize("device", [(CUDA, 0), (7, 0)], ids=["cuda", "vulkan"])
def test_allocator_reports_unreachable_device_through_set_error(device):
    rc, out, errors = call_allocator((2, 3), (2, 32, 1), device)
    assert rc == -1
    assert out is None
    assert len(errors) == 1
    kind, message = errors[0]
    assert issubclass(getattr(builtins, kind), Exception)
    assert "device" in message


# ---- managed_tensor_from_py_object_no_sync --------------------------------------------


def export(obj):
    out = POINTER(DLManagedTensorVersioned)()
    rc = from_py(id(obj), byref(out))
    return rc, out


def test_owning_export_takes_a_reference_until_deleted(live_counters):
    t = dl.from_dlpack(np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2])
    refs = sys.getrefcount(t)
    before = live_counters()
    rc, out = export(t)
    assert rc == 0
    m = out.contents
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    assert m.dl_tensor.data + m.dl_tensor.byte_offset == t.data_ptr
    assert dltensor_layout(m.dl_tensor) == (t.shape, t.strides)
    assert (m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits) == (0, 16)
    assert sys.getrefcount(t) == refs + 1
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    m.deleter(out)
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_owning_export_of_read_only_tensor_sets_read_only():
    t = readonly_tensor()
    rc, out = export(t)
    assert rc == 0
    assert out.contents.flags & READ_ONLY
    out.contents.deleter(out)


def test_owning_export_of_0d_tensor_has_null_shape_and_strides():
    t = dl.full((), 3.5, dtype="float64")
    rc, out = export(t)
    assert rc == 0
    assert out.contents.dl_tensor.ndim == 0
    assert dltensor_layout(out.contents.dl_tensor) == (None, None)
    out.contents.deleter(out)


@pytest.mark.parametrize("obj", [[1, 2], np.arange(3)], ids=["list", "ndarray"])
def test_owning_export_of_other_objects_sets_type_error(obj):
    out = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        from_py(id(obj), byref(out))
    assert not out


def test_owning_export_of_other_objects_fails_without_output():
    # The part of the contract that holds today (see the strict xfail above): -1, no crash.
    obj = [1, 2]
    out = POINTER(DLManagedTensorVersioned)()
    try:
        rc = from_py(id(obj), byref(out))
    except TypeError:
        rc = -1
    assert rc == -1
    assert not out


# ---- managed_tensor_to_py_object_no_sync ----------------------------------------------


def test_import_steals_and_returns_a_new_tensor_on_the_same_memory(live_counters):
    t = dl.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3).T)
    refs = sys.getrefcount(t)
    before = live_counters()
    rc, out = export(t)
    assert rc == 0
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    u = take_object(address.value)
    assert sys.getrefcount(u) == 2, "the import must return exactly one new reference"
    assert type(u) is dl.Tensor and u is not t
    assert (u.data_ptr, u.shape, u.strides, u.dtype) == (t.data_ptr, t.shape, t.strides, t.dtype)
    assert not u.readonly
    # dlinterop's own export made back into a Tensor: released at once, and u holds what
    # keeps t's memory alive: the NumPy array where t only views it (the native route),
    # else t itself (it holds the managed tensor of NumPy's capsule).
    holds_t = u.owner is t
    assert holds_t or u.owner is t.owner
    assert sys.getrefcount(t) == refs + holds_t
    assert live_counters() == before
    del u
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_import_keeps_read_only():
    t = readonly_tensor()
    rc, out = export(t)
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    assert take_object(address.value).readonly


def test_import_of_foreign_tensor_calls_its_deleter_once():
    factory = ManagedFactory()
    m = factory.make()
    address = c_void_p()
    assert to_py(ctypes.pointer(m), byref(address)) == 0
    u = take_object(address.value)
    assert u.data_ptr == ctypes.addressof(factory.made[-1][1])
    assert list(np.asarray(u)) == [1, 2, 3, 4]
    assert factory.deleted == 0
    del u
    gc.collect()
    assert factory.deleted == 1


def _import_rejected(version):
    factory = ManagedFactory(version=version)
    m = factory.make()
    address = c_void_p()
    return factory, address, (lambda: to_py(ctypes.pointer(m), byref(address)))


def test_import_steals_a_tensor_it_rejects():
    factory, address, call = _import_rejected((2, 0))
    try:
        rc = call()
    except BufferError:
        rc = -1
    assert rc == -1
    assert not address.value
    assert factory.deleted == 1


def test_import_of_unsupported_version_sets_buffer_error():
    factory, _, call = _import_rejected((2, 0))
    with pytest.raises(BufferError, match="major version"):
        call()
    assert factory.deleted == 1


# ---- dltensor_from_py_object_no_sync --------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: dl.from_dlpack(np.arange(24, dtype=np.float64).reshape(2, 3, 4)[:, 1:, ::2]),
        lambda: dl.full((), 1, dtype="int32"),
        lambda: dl.empty((0, 5), dtype="uint8"),
        readonly_tensor,
    ],
    ids=["strided", "0-d", "zero-size", "read-only"],
)
def test_view_fills_a_non_owning_dltensor(make, live_counters):
    t = make()
    refs = sys.getrefcount(t)
    before = live_counters()
    out = DLTensor()
    assert view(id(t), byref(out)) == 0
    assert out.data + out.byte_offset == t.data_ptr
    assert (out.device.device_type, out.device.device_id) == (CPU, 0)
    assert (out.dtype.code, out.dtype.bits, out.dtype.lanes) == t.dtype.__dlpack_data_type__()
    assert out.ndim == t.ndim
    shape, strides = dltensor_layout(out)
    if t.ndim:
        assert (shape, strides) == (t.shape, t.strides)
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_view_of_other_objects_sets_type_error():
    obj = [1, 2]
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        view(id(obj), byref(DLTensor()))


# ---- current_work_stream --------------------------------------------------------------


def test_current_work_stream_for_cpu_is_null():
    stream = c_void_p(0xDEAD)
    assert current_stream(CPU, 0, byref(stream)) == 0
    assert stream.value is None
