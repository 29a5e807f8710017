"""tvm-ffi both ways: it consumes dl.Tensors through dlinterop's table, dlinterop imports
tvm-ffi tensors, and through tvm-ffi's table."""

import numpy as np
import pytest

import dlinterop as dl
from exchange_api.helpers import readonly_tensor


def _tvm_ffi():
    return pytest.importorskip("tvm_ffi")


def test_tvm_ffi_imports_dl_tensor_through_the_table(live_counters):
    tvm_ffi = _tvm_ffi()
    t = dl.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:])
    before = live_counters()
    y = tvm_ffi.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr
    assert tuple(y.shape) == t.shape
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del y
    assert live_counters() == before


def test_tvm_ffi_imports_read_only_dl_tensor_through_the_table():
    # tvm-ffi's only other route is the legacy __dlpack__(), which dlinterop refuses for
    # read-only tensors: success proves the exchange table was used.
    tvm_ffi = _tvm_ffi()
    t = readonly_tensor()
    with pytest.raises(BufferError):
        t.__dlpack__()
    assert tvm_ffi.from_dlpack(t).data_ptr() == t.data_ptr


def test_dl_imports_tvm_ffi_tensor():
    tvm_ffi = _tvm_ffi()
    array = np.arange(10, dtype=np.int32)
    y = tvm_ffi.from_dlpack(array)
    t = dl.from_dlpack(y)
    assert t.data_ptr == y.data_ptr() == array.ctypes.data
    assert np.asarray(t).tolist() == list(range(10))


def test_dl_imports_through_tvm_ffi_table():
    tvm_ffi = _tvm_ffi()
    wrapper_type = getattr(tvm_ffi.core, "DLTensorTestWrapper", None)
    if wrapper_type is None:
        pytest.skip("this tvm-ffi has no DLTensorTestWrapper")
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    wrapper = wrapper_type(tvm_ffi.from_dlpack(array))

    def refuse(**kwargs):
        raise AssertionError("__dlpack__ was called")

    wrapper.__dlpack__ = refuse
    t = dl.from_dlpack(wrapper)
    assert t.data_ptr == array.ctypes.data
    assert (t.shape, t.strides) == ((2, 3), (3, 1))


def test_round_trip_dl_tvm_ffi_dl():
    tvm_ffi = _tvm_ffi()
    t = dl.from_dlpack(np.arange(8, dtype=np.uint16))
    back = dl.from_dlpack(tvm_ffi.from_dlpack(t))
    assert back.data_ptr == t.data_ptr
