"""Property tests: a DLPack export followed by an import preserves every field and every value
and leaks nothing, over dtype x shape x strides (negative and zero included) x byte_offset x
read-only x version, for dl -> dl, dl -> NumPy and NumPy -> dl (DLPack's export and import rules).

Sources are forged with tests/support/forge/ (dl -> dl, dl -> NumPy: any layout a producer could
hand over) or built as NumPy views over a byte buffer (NumPy -> dl). Element values are the
bytes of a fixed pattern, so "every value" is checked byte for byte, for every data type.

Profiles (HYPOTHESIS_PROFILE=name; CI=true picks "ci"):
  default   200 examples per property, the suite's everyday run
  ci        the same count, derandomized and without the example database
  thorough  5,000 examples per property: HYPOTHESIS_PROFILE=thorough pytest tests/test_properties.py
"""

import ctypes
import math
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import dlinterop as dl

from forge import (
    IS_COPIED,
    READ_ONLY,
    DLManagedTensor,
    DLManagedTensorVersioned,
    c_strides,
    capsule_name,
    capsule_strides,
    forge,
    managed_pointer,
    same_layout,
)

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("default", max_examples=200, **_COMMON)
settings.register_profile(
    "ci", max_examples=200, derandomize=True, database=None, print_blob=True, **_COMMON
)
settings.register_profile("thorough", max_examples=5_000, **_COMMON)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)

# Every (code, bits, lanes) DLPack 1.3 defines.
DTYPES = [
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (4, 16, 1),
    (5, 32, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
    *((code, 8, 1) for code in range(7, 15)),
    (15, 6, 1),
    (16, 6, 1),
    (17, 4, 1),
    (17, 4, 2),
]
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
# max_version a consumer asks for -> the capsule it gets: None (legacy) or the 1.x minor.
MAX_VERSIONS = {
    None: None,
    (0, 5): None,
    (1, 0): 0,
    (1, 1): 1,
    (1, 2): 2,
    (1, 3): 3,
    (1, 99): 3,
    (2, 0): 3,
}
DLPACK_FIELDS = ("live_buffers", "live_bytes", "live_exports")


def _counters():
    stats = dl.memory_stats()
    return {key: stats[key] for key in DLPACK_FIELDS}


def _packed(dtype):
    return dtype[1] * dtype[2] < 8


def _itemsize(dtype):
    return (dtype[1] * dtype[2] + 7) // 8


@st.composite
def layouts(draw, dtypes=DTYPES):
    """(dtype, shape, strides or None, byte_offset)."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(0, 6))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    kind = draw(st.sampled_from(["null", "c", "any"]))
    if kind == "null":
        strides = None
    elif kind == "c" or _packed(dtype):
        # Packed sub-byte elements have no address of their own: only compact layouts.
        strides = c_strides(shape)
    else:
        strides = tuple(draw(st.lists(st.integers(-6, 6), min_size=ndim, max_size=ndim)))
    byte_offset = draw(st.sampled_from([0, 0, 1, 3, 8, 64, 255]))
    return dtype, shape, strides, byte_offset


def _fill_pattern(address, size, seed=7):
    pattern = ((np.arange(size, dtype=np.int64) * 37 + seed) % 251).astype(np.uint8)
    ctypes.memmove(address, pattern.ctypes.data, size)


def _expected_bytes(read, element0, dtype, shape, strides):
    """The tensor's bytes in C order, gathered by hand: read(address, n) -> bytes."""
    count = math.prod(shape)
    if count == 0:
        return b""
    if _packed(dtype):
        return read(element0, (count * dtype[1] * dtype[2] + 7) // 8)
    itemsize = _itemsize(dtype)
    if strides is None:
        strides = c_strides(shape)
    out = bytearray()
    for index in np.ndindex(*shape):
        offset = sum(i * s for i, s in zip(index, strides)) * itemsize
        out += read(element0 + offset, itemsize)
    return bytes(out)


def _tensor_bytes(t):
    """The values of `t` in C order, through dlinterop's own strided copy."""
    copied = t.copy()
    assert copied.is_contiguous()
    return ctypes.string_at(copied.data_ptr, copied.nbytes)


def _forged_source(dtype, shape, strides, byte_offset, readonly, version, versioned):
    f = forge(
        shape=shape,
        dtype=dtype,
        strides=strides,
        byte_offset=byte_offset,
        versioned=versioned,
        readonly=readonly and versioned,
        version=version if versioned else (1, 3),
    )
    _fill_pattern(ctypes.addressof(f.data), len(f.data))
    return f


def _assert_fields(t, *, dtype, shape, strides, element0, readonly, device=(1, 0)):
    assert t.shape == shape
    assert t.ndim == len(shape)
    assert t.strides == (strides if strides is not None else c_strides(shape))
    assert t.dtype.__dlpack_data_type__() == dtype
    assert t.__dlpack_device__() == device
    assert t.data_ptr == element0
    assert t.readonly == readonly
    assert t.size == math.prod(shape)


def _managed(capsule):
    name = capsule_name(capsule)
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return struct.from_address(managed_pointer(capsule))


# --------------------------------------------------------------------------------------
# dl -> dl
# --------------------------------------------------------------------------------------


@given(
    layout=layouts(),
    readonly=st.booleans(),
    versioned=st.booleans(),
    source_minor=st.sampled_from([0, 1, 2, 3, 99]),
    max_version=st.sampled_from(list(MAX_VERSIONS)),
    export_copy=st.sampled_from([None, True]),
)
def test_dl_to_dl_preserves_fields_and_values(
    layout, readonly, versioned, source_minor, max_version, export_copy
):
    dtype, shape, strides, byte_offset = layout
    before = _counters()
    f = _forged_source(dtype, shape, strides, byte_offset, readonly, (1, source_minor), versioned)
    element0 = f.data_ptr + byte_offset
    t = dl.from_dlpack(f.capsule)
    # A legacy capsule cannot say its memory is writable: dlinterop imports it read-only.
    t_readonly = readonly or not versioned
    _assert_fields(
        t, dtype=dtype, shape=shape, strides=strides, element0=element0, readonly=t_readonly
    )
    expected = _expected_bytes(ctypes.string_at, element0, dtype, shape, strides)
    assert _tensor_bytes(t) == expected

    minor = MAX_VERSIONS[max_version]
    # Read-only by flag never goes out as a legacy capsule; read-only only because the
    # source was legacy may (readonly_reason "legacy").
    assert t.readonly_reason == (None if not t_readonly else "flag" if versioned else "legacy")
    if readonly and versioned and minor is None and export_copy is None:
        with pytest.raises(BufferError, match="read-only"):
            t.__dlpack__(max_version=max_version)
    else:
        capsule = t.__dlpack__(max_version=max_version, copy=export_copy)
        m = _managed(capsule)
        copied = export_copy is True
        if minor is None:
            assert capsule_name(capsule) == "dltensor"
        else:
            assert capsule_name(capsule) == "dltensor_versioned"
            assert (m.version.major, m.version.minor) == (1, minor)
            assert m.flags == (
                (READ_ONLY if t_readonly and not copied else 0) | (IS_COPIED if copied else 0)
            )
        raw = m.dl_tensor
        assert (raw.dtype.code, raw.dtype.bits, raw.dtype.lanes) == dtype
        assert (raw.device.device_type, raw.device.device_id) == (1, 0)
        assert raw.ndim == len(shape)
        if shape:
            assert [raw.shape[i] for i in range(raw.ndim)] == list(shape)
            assert raw.strides  # always filled for ndim > 0
        else:
            assert not raw.shape and not raw.strides
        if not copied:
            assert raw.data + raw.byte_offset == element0
            assert [raw.strides[i] for i in range(raw.ndim)] == list(t.strides)
        u = dl.from_dlpack(capsule)
        assert capsule_name(capsule).startswith("used_")
        _assert_fields(
            u,
            dtype=dtype,
            shape=shape,
            strides=u.strides if copied else t.strides,
            element0=u.data_ptr if copied else element0,
            readonly=(t_readonly and not copied) or minor is None,
        )
        if copied:
            assert u.is_contiguous() and u.data_ptr != element0 or u.size == 0
            assert u.is_copied == (minor is not None)
        assert _tensor_bytes(u) == expected
        del u, capsule, m, raw
    assert f.deleter_calls == 0
    del t
    assert f.deleter_calls == 1
    f.release()
    assert f.deleter_calls == 1
    assert _counters() == before


@given(layout=layouts(), readonly=st.booleans())
def test_dl_to_dl_import_with_copy_preserves_values(layout, readonly):
    dtype, shape, strides, byte_offset = layout
    before = _counters()
    f = _forged_source(dtype, shape, strides, byte_offset, readonly, (1, 3), True)
    element0 = f.data_ptr + byte_offset
    expected = _expected_bytes(ctypes.string_at, element0, dtype, shape, strides)
    t = dl.from_dlpack(f.capsule, copy=True)
    # The forged source is consumed and released at once; the copy is dlinterop's own.
    assert f.deleter_calls == 1
    assert t.shape == shape and t.dtype.__dlpack_data_type__() == dtype
    assert t.is_contiguous() and not t.readonly
    assert _tensor_bytes(t) == expected
    del t
    f.release()
    assert f.deleter_calls == 1
    assert _counters() == before


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


# --------------------------------------------------------------------------------------
# The fuzzer's corpus, replayed (tests/fuzz)
# --------------------------------------------------------------------------------------


def test_fuzz_corpus_replays_cleanly():
    """Every input of tests/fuzz/corpus through the fuzz harness and its model of
    from_dlpack's rules."""
    here = os.path.dirname(os.path.abspath(__file__))
    corpus = os.path.join(here, "fuzz", "corpus")
    sys.path.insert(0, os.path.join(here, "fuzz"))
    try:
        import fuzz_from_dlpack
    finally:
        sys.path.remove(os.path.join(here, "fuzz"))
    assert fuzz_from_dlpack.replay([corpus]) >= 10
    for data in fuzz_from_dlpack.random_inputs(2_000, seed=1):
        fuzz_from_dlpack.check_one(data)
