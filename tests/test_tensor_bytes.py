"""A Tensor's bytes handed out: the buffer protocol and pickling."""

import copy
import ctypes
import pickle

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core

from tensor_cases import (
    ALL_NAMES,
    LAYOUTS,
    ML_NAMES,
    PACKED_NAMES,
    _base,
    _raw,
    _write_pattern,
)

NO_BUFFER_FORMAT = ["bfloat16", "complex32"] + ML_NAMES[1:] + PACKED_NAMES


BUFFER_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "Zf",
    "complex128": "Zd",
}


# -- buffer protocol --------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUFFER_FORMATS))
def test_memoryview_format_shape_strides(name):
    t = dl.zeros((2, 3), name)
    m = memoryview(t)
    assert m.format == BUFFER_FORMATS[name]
    assert m.shape == (2, 3)
    assert m.itemsize == t.itemsize
    assert m.strides == (3 * t.itemsize, t.itemsize)
    assert m.readonly is False
    assert m.nbytes == t.nbytes
    assert m.obj is t


def test_memoryview_is_writable_and_shares_memory():
    t = dl.zeros((2, 3), "int32")
    m = memoryview(t)
    m[1, 2] = 42
    assert np.from_dlpack(t)[1, 2] == 42


def test_memoryview_of_zero_d_tensor():
    m = memoryview(dl.full((), 3, "int64"))
    assert m.ndim == 0 and m.shape == () and m[()] == 3


def test_memoryview_of_strided_view_has_byte_strides():
    a = _base().transpose(2, 0, 1)[::2]
    m = memoryview(dl.from_dlpack(a))
    assert m.shape == a.shape
    assert m.strides == a.strides
    assert m.tolist() == a.tolist()


def test_readonly_tensor_gives_readonly_memoryview():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    m = memoryview(t)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 1.0
    with pytest.raises((TypeError, BufferError)):
        (ctypes.c_char * t.nbytes).from_buffer(t)


def test_np_asarray_is_zero_copy():
    t = dl.zeros((4, 5), "float64")
    a = np.asarray(t)
    assert a.ctypes.data == t.data_ptr
    assert a.flags.writeable
    a[2, 3] = 1.5
    assert memoryview(t)[2, 3] == 1.5


def test_np_asarray_of_readonly_tensor_is_readonly():
    a = np.broadcast_to(np.arange(3.0), (2, 3))
    t = dl.from_dlpack(a)
    b = np.asarray(t)
    assert b.ctypes.data == a.ctypes.data
    assert not b.flags.writeable
    assert b.strides == a.strides


@pytest.mark.parametrize("name", NO_BUFFER_FORMAT)
def test_buffer_protocol_refuses_types_without_a_format(name):
    with pytest.raises(BufferError):
        memoryview(dl.zeros(4, name))


# -- pickle -----------------------------------------------------------------------------

PROTOCOLS = [2, 3, 4, 5]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ALL_NAMES)
def test_pickle_round_trips_bytes_shape_dtype(name, protocol):
    t = dl.empty((3, 4), name)
    pattern = _write_pattern(t)
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert type(u) is dl.Tensor
    assert u.shape == (3, 4) and u.dtype is t.dtype and u.device == "cpu"
    assert not u.readonly
    assert _raw(u) == pattern


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1)])
def test_pickle_zero_d_and_zero_size(shape, protocol):
    t = dl.full(shape, 3, "int16")
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.shape == shape
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float4_e2m1fn", "complex128"])
def test_pickle_protocol_5_out_of_band_is_zero_copy(name):
    t = dl.empty((8, 8), name)
    pattern = _write_pattern(t)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert isinstance(buffers[0], pickle.PickleBuffer)
    raw = buffers[0].raw()
    assert raw.nbytes == t.nbytes
    assert np.frombuffer(raw, np.uint8).ctypes.data == t.data_ptr
    assert pattern not in data  # the bytes travelled out of band
    u = pickle.loads(data, buffers=buffers)
    assert u.data_ptr == t.data_ptr
    assert _raw(u) == pattern


def test_pickle_protocol_5_in_band_copies():
    t = dl.full((4, 4), 2.5, "float64")
    data = pickle.dumps(t, protocol=5)
    assert len(data) > t.nbytes
    u = pickle.loads(data)
    assert u.data_ptr != t.data_ptr
    assert not u.readonly
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


def _address(b):
    return np.frombuffer(b, np.uint8).ctypes.data if len(b) else 0


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("elements", [3, 1 << 18, 1 << 22])
def test_pickle_in_band_bytes_give_an_aligned_writable_tensor(protocol, elements):
    t = dl.full((elements,), 1.5, "float32")
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.data_ptr % 256 == 0
    assert not u.readonly
    np.from_dlpack(u)[-1] = 7
    assert np.from_dlpack(t)[-1] == 1.5 and np.from_dlpack(u)[-1] == 7
    assert np.from_dlpack(u)[:-1].tolist() == [1.5] * (elements - 1)


@pytest.mark.parametrize("readonly", [False, True])
def test_rebuild_from_bytes_wraps_a_large_payload_whose_bytes_are_aligned(readonly):
    # The bytes object pickle made for this load, its tensor's bytes on a 256-byte boundary
    # after the padding: wrapped, not copied. A padding that misses the boundary: one copy.
    payload = bytes((1 << 20) + 256)
    pad = -_address(payload) % 256
    pattern = np.arange(len(payload) - pad, dtype=np.uint64).astype(np.uint8)
    ctypes.memmove(_address(payload) + pad, pattern.ctypes.data, pattern.nbytes)
    u = _core._rebuild_tensor_from_bytes(payload, (pattern.size,), (1, 8, 1), readonly, pad)
    assert u.data_ptr == _address(payload) + pad and u.owner is payload
    assert u.readonly is readonly
    assert np.array_equal(np.from_dlpack(u), pattern)
    missed = (pad + 1) % 256
    v = _core._rebuild_tensor_from_bytes(
        payload, (len(payload) - missed,), (1, 8, 1), readonly, missed
    )
    assert v.data_ptr % 256 == 0 and v.owner is not payload and v.readonly is readonly
    assert np.from_dlpack(v).tobytes() == payload[missed:]


def _readonly_tensor():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    return t


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_readonly_survives_pickling(protocol):
    t = _readonly_tensor()
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.readonly
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


def test_readonly_survives_out_of_band_pickling():
    t = _readonly_tensor()
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert buffers[0].raw().readonly
    u = pickle.loads(data, buffers=buffers)
    assert u.readonly
    assert u.data_ptr == t.data_ptr


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("layout", ["transposed", "negative", "broadcast", "step"])
def test_pickle_of_strided_view_gives_contiguous_copy(layout, protocol):
    a = LAYOUTS[layout][0]()
    u = pickle.loads(pickle.dumps(dl.from_dlpack(a), protocol=protocol))
    assert u.is_contiguous()
    assert np.array_equal(np.from_dlpack(u), a)


def test_deepcopy_makes_an_independent_tensor():
    t = dl.full((2, 2), 1, "int8")
    u = copy.deepcopy(t)
    assert u.data_ptr != t.data_ptr
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))
