"""Property tests: a DLPack export followed by an import preserves every field and every value
and leaks nothing, over dtype x shape x strides (negative and zero included) x byte_offset x
read-only x version, dl -> dl (with and without a copy; dl -> NumPy and NumPy -> dl:
test_properties_numpy.py); and the fuzzer's corpus, replayed.

Sources are forged with tests/support/forge/ (dl -> dl, dl -> NumPy: any layout a producer could
hand over) or built as NumPy views over a byte buffer (NumPy -> dl). Element values are the
bytes of a fixed pattern, so "every value" is checked byte for byte, for every data type.
Hypothesis's profiles: tests/support/property_cases.py.
"""

import ctypes
import math
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlinterop as dl

from forge import (
    IS_COPIED,
    READ_ONLY,
    DLManagedTensor,
    DLManagedTensorVersioned,
    c_strides,
    capsule_name,
    managed_pointer,
)
from property_cases import (
    _counters,
    _expected_bytes,
    _forged_source,
    _tensor_bytes,
    layouts,
)

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
