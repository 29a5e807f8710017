"""Property tests: a DLPack export followed by an import preserves every field and every value
and leaks nothing, over dtype x shape x strides x byte_offset x read-only x version, for
dl -> NumPy and NumPy -> dl (DLPack's export and import rules).

Sources are forged with tests/support/forge/ (dl -> dl, dl -> NumPy: any layout a producer could
hand over) or built as NumPy views over a byte buffer (NumPy -> dl). Element values are the
bytes of a fixed pattern, so "every value" is checked byte for byte, for every data type.
Hypothesis's profiles: tests/support/property_cases.py.
"""

import ctypes
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import dlinterop as dl

from forge import (
    c_strides,
    capsule_strides,
    same_layout,
)
from property_cases import (
    _counters,
    _expected_bytes,
    _fill_pattern,
    _forged_source,
    _itemsize,
    _tensor_bytes,
    layouts,
)

NUMPY_DTYPES = {
    (0, 8, 1): "i1",
    (0, 16, 1): "i2",
    (0, 32, 1): "i4",
    (0, 64, 1): "i8",
    (1, 8, 1): "u1",
    (1, 16, 1): "u2",
    (1, 32, 1): "u4",
    (1, 64, 1): "u8",
    (2, 16, 1): "f2",
    (2, 32, 1): "f4",
    (2, 64, 1): "f8",
    (5, 64, 1): "c8",
    (5, 128, 1): "c16",
    (6, 8, 1): "?",
}


# --------------------------------------------------------------------------------------
# dl -> NumPy
# --------------------------------------------------------------------------------------


@given(layout=layouts(dtypes=list(NUMPY_DTYPES)), readonly=st.booleans(), versioned=st.booleans())
def test_dl_to_numpy_preserves_fields_and_values(layout, readonly, versioned):
    dtype, shape, strides, byte_offset = layout
    before = _counters()
    f = _forged_source(dtype, shape, strides, byte_offset, readonly, (1, 3), versioned)
    element0 = f.data_ptr + byte_offset
    t = dl.from_dlpack(f.capsule)
    itemsize = _itemsize(dtype)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(NUMPY_DTYPES[dtype])
    assert a.shape == shape
    assert a.strides == tuple(s * itemsize for s in t.strides)
    if a.size:
        assert a.ctypes.data == element0  # shared, not copied
    assert a.flags.writeable == (not t.readonly)
    assert a.tobytes() == _expected_bytes(ctypes.string_at, element0, dtype, shape, strides)
    del a
    del t
    assert f.deleter_calls == 1
    f.release()
    assert _counters() == before


# --------------------------------------------------------------------------------------
# NumPy -> dl
# --------------------------------------------------------------------------------------


def _numpy_view(dtype, shape, strides, byte_offset, readonly):
    """A NumPy view with exactly this layout over a pattern-filled bytearray."""
    itemsize = _itemsize(dtype)
    if strides is None:
        strides = c_strides(shape)
    if 0 in shape:
        low = high = 0
    else:
        low = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0)
        high = sum((d - 1) * s for d, s in zip(shape, strides) if s > 0)
    count = high - low + 1
    buffer = bytearray(byte_offset + count * itemsize)
    _fill_pattern((ctypes.c_char * len(buffer)).from_buffer(buffer), len(buffer))
    flat = np.frombuffer(buffer, dtype=NUMPY_DTYPES[dtype], count=count, offset=byte_offset)
    view = as_strided(flat[-low:], shape=shape, strides=[s * itemsize for s in strides])
    if readonly:
        view.flags.writeable = False
    return view


@given(
    layout=layouts(dtypes=list(NUMPY_DTYPES)),
    readonly=st.booleans(),
    route=st.sampled_from(["object", "legacy capsule", "versioned capsule"]),
)
def test_numpy_to_dl_preserves_fields_and_values(layout, readonly, route):
    dtype, shape, strides, byte_offset = layout
    before = _counters()
    a = _numpy_view(dtype, shape, strides, byte_offset, readonly)
    base = sys.getrefcount(a)
    itemsize = _itemsize(dtype)
    if route == "object":
        source = a
    elif route == "legacy capsule":
        if readonly:
            with pytest.raises(BufferError):
                a.__dlpack__()
            return
        source = a.__dlpack__()
    else:
        source = a.__dlpack__(max_version=(1, 0))
    if route == "object":
        exported = capsule_strides(a.__dlpack__(max_version=(1, 0)))
    else:
        exported = capsule_strides(source)
    t = dl.from_dlpack(source)
    del source
    assert t.shape == shape
    # NumPy versions differ in the strides they export for dimensions of size 0 or 1.
    assert t.strides == exported
    assert same_layout(shape, t.strides, tuple(s // itemsize for s in a.strides))
    assert t.dtype == dl.dtype(a.dtype)
    assert t.dtype.__dlpack_data_type__() == dtype
    assert t.data_ptr == a.ctypes.data
    assert t.readonly == (readonly or route == "legacy capsule")
    assert _tensor_bytes(t) == a.tobytes()
    np.testing.assert_array_equal(np.asarray(t), a)
    back = np.from_dlpack(t)  # and back: the same memory, layout and values
    assert back.ctypes.data == a.ctypes.data
    assert back.strides == tuple(s * itemsize for s in t.strides)
    assert same_layout(shape, back.strides, a.strides)
    assert back.tobytes() == a.tobytes()
    del back, t
    assert sys.getrefcount(a) == base
    del a
    assert _counters() == before
