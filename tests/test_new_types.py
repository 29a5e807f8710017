"""The types and the device DLPack added last cross exactly: the packed sub-byte integers,
bcomplex32 and the Ascend device (carried, never computed on); the Cython API's dtype check
knows them. ml_dtypes' own decoding is the reference for every value."""

import numpy as np
import pytest

import dlinterop as dl

from bit_cases import (
    INT_RANGES,
    forge_padded,
    ml_dtypes,
    needs_ml_dtypes,
)
from forge import (
    CountingProducer,
    forge,
)

# -- packed sub-byte integers --------------------------------------------------------------


@pytest.mark.parametrize("name", INT_RANGES)
def test_sub_byte_integers_hold_their_whole_range(name):
    low, high = INT_RANGES[name]
    values = list(range(low, high + 1)) * 3 + [low]
    t = dl.tensor(values, dtype=name)
    assert t.dtype == name and t.itemsize == 1
    assert t.nbytes == (len(values) * t.dtype.bits + 7) // 8
    assert t.tolist() == values
    assert dl.full((5,), high, name).tolist() == [high] * 5
    assert dl.zeros((3,), name).tolist() == [0] * 3
    assert t[0].item() == values[0]
    with pytest.raises(ValueError, match="byte boundary"):
        t[1]  # a view must start on a byte; t.tolist()[1] reads the value
    with pytest.raises(OverflowError, match=name):
        dl.tensor([high + 1], dtype=name)


@pytest.mark.parametrize("name", INT_RANGES)
def test_sub_byte_integers_to_numpy_and_back_through_ml_dtypes(name):
    needs_ml_dtypes()
    low, high = INT_RANGES[name]
    values = [low, high, 0, low, high, high, low][:7]
    t = dl.tensor(values, dtype=name)
    a = np.asarray(t)
    assert a.dtype == np.dtype(getattr(ml_dtypes, name)) and a.tolist() == values
    assert np.dtype(getattr(dl, name)) == a.dtype
    back = dl.asarray(a)
    assert back.dtype == name and back.tolist() == values
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(t, copy=False)


def test_sub_byte_views_keep_rows_on_bytes():
    t = dl.arange(16, dtype="uint4").reshape((4, 4))
    expected = np.arange(16).reshape(4, 4)
    assert t[1:3].tolist() == expected[1:3].tolist()
    assert t[::-1].tolist() == expected[::-1].tolist()
    assert t[::2].tolist() == expected[::2].tolist()
    with pytest.raises(ValueError, match="byte"):
        t[:, 1:2]
    with pytest.raises(ValueError, match="byte boundary|last axis contiguous"):
        t.T
    assert (
        repr(dl.tensor([-1, 1], dtype="int2"))
        == "Tensor([-1, 1], shape=(2,), dtype=int2, device=cpu:0)"
    )


@pytest.mark.parametrize("name", ["uint4", "int2", "float6_e3m2fn", "float4_e2m1fn"])
def test_strided_sub_byte_copies_are_exact(name):
    needs_ml_dtypes()
    values = np.arange(48).reshape(4, 12) % 4 - (2 if name == "int2" else 0)
    if name.startswith("float"):
        values = values / 2
    u = dl.tensor(values.tolist(), dtype=name)
    expected = np.asarray(u).astype(np.float64)
    for view, ref in (
        (u[::-1], expected[::-1]),
        (u[::2], expected[::2]),
        (u[1:3, 4:], expected[1:3, 4:]),
        (u[::-3, 8:], expected[::-3, 8:]),
    ):
        copy = view.contiguous()
        assert copy.is_contiguous() and copy.tolist() == ref.tolist()
        assert np.asarray(view).astype(np.float64).tolist() == ref.tolist()


def test_torch_exports_its_sub_byte_integers_as_whole_bytes():
    # PyTorch's int1..int7/uint1..uint7 hold one element per byte and export as int8/uint8
    # (a lossless widening); it refuses DLPack's packed sub-byte integers.
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "int4"):
        pytest.skip("this PyTorch has no int4")
    t = dl.from_dlpack(torch.empty(3, dtype=torch.int4))
    assert t.dtype == dl.int8
    with pytest.raises(BufferError, match="bits 4"):
        torch.from_dlpack(dl.zeros(4, "int4"))


# -- bcomplex32 --------------------------------------------------------------------------


def test_bcomplex32_values_and_text():
    needs_ml_dtypes()
    t = dl.tensor([1 + 2j, 0.1j, -3.5], dtype="bcomplex32")
    assert t.dtype.__dlpack_data_type__() == (18, 32, 1) and t.itemsize == 4
    b = np.array([1 + 2j, 0.1j, -3.5], dtype=ml_dtypes.bcomplex32)
    assert t.tolist() == b.astype(np.complex64).tolist()
    assert (
        repr(t) == "Tensor([(1+2j), 0.1j, (-3.5+0j)], shape=(3,), dtype=bcomplex32, device=cpu:0)"
    )
    assert dl.full((2,), 1j, "bcomplex32").tolist() == [1j, 1j]


def test_bcomplex32_through_numpy_and_ml_dtypes_both_ways():
    needs_ml_dtypes()
    b = np.array([[1 + 2j, 3], [0.5j, -1]], dtype=ml_dtypes.bcomplex32)
    t = dl.asarray(b)
    assert t.dtype == dl.bcomplex32 and t.data_ptr == b.ctypes.data  # shared
    a = np.asarray(t)
    assert a.dtype == b.dtype and np.shares_memory(a, b)
    assert np.dtype(dl.bcomplex32) == b.dtype
    assert t.T.tolist() == b.T.astype(np.complex64).tolist()
    assert t.view(dl.bfloat16).shape == (2, 4)
    assert t.view(dl.bfloat16)[0, :2].tolist() == [1.0, 2.0]


def test_bcomplex32_through_dlpack():
    t = dl.tensor([1 + 1j], dtype="bcomplex32")
    u = dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert u.dtype == dl.bcomplex32 and u.tolist() == [1 + 1j]
    f = forge(shape=(2,), dtype=(18, 32, 1))
    assert dl.from_dlpack(f.capsule).tolist() == [0j, 0j]


# -- the Ascend device -----------------------------------------------------------------------


def test_ascend_metadata_round_trips():
    f = forge(shape=(2, 3), device=(21, 1))
    t = dl.from_dlpack(f.capsule)
    assert t.device == dl.Device("ascend:1") and t.__dlpack_device__() == (21, 1)
    assert t.T.shape == (3, 2) and t[1].shape == (3,)
    u = dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert u.device.type == "ascend" and u.data_ptr == t.data_ptr
    assert dl.DeviceType.ASCEND == 21 and dl.DeviceType(21).name == "ASCEND"


@pytest.mark.parametrize(
    "operation",
    [
        lambda t: t.tolist(),
        lambda t: t.to("cpu"),
        lambda t: memoryview(t),
        lambda t: np.asarray(t),
        lambda t: dl.tensor(t),
        lambda t: t.T.contiguous(),
    ],
)
def test_ascend_operations_say_dlinterop_only_carries_it(operation):
    f = forge(shape=(2, 3), device=(21, 0))
    t = dl.from_dlpack(f.capsule)
    with pytest.raises((BufferError, TypeError), match="ascend"):
        operation(t)


@pytest.mark.parametrize("name", ["int4", "uint2", "float4_e2m1fn", "bcomplex32"])
def test_the_cython_apis_dtype_check_knows_the_new_types(name):
    # check_tensor is check_arg (dlinterop/frameworks.pxd) with a Python face.
    t = dl.zeros((4,), name)
    assert dl.check_tensor(t, "x", dtype=name) is t
    other = "uint4" if name != "uint4" else "int4"
    with pytest.raises(TypeError, match=f"x.*{name}|{name}.*x"):
        dl.check_tensor(t, "x", dtype=other)
    f, expected = forge_padded("int4", shape=(3,)) if name == "int4" else (None, None)
    if f is not None:  # a padded producer's tensor is checked as the packed copy
        checked = dl.check_tensor(CountingProducer(f), "x", dtype="int4")
        assert checked.tolist() == expected
