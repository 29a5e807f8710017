"""Assignment, t[key] = value: every key indexing takes, values from numbers, Python data,
Tensors and arrays, broadcast and cast as NumPy assigns; NumPy's own assignment of the same
values to the same key is the reference. Read-only memory and memory the host cannot write
are refused, and a refused value leaves the Tensor as it was."""

import re
import warnings

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the version matrix's environments have no PyTorch: its cases drop out
    torch = None

import dlinterop as dl

# ml_dtypes has no wheel for free-threaded CPython 3.13: these tests need its types
ml_dtypes = pytest.importorskip("ml_dtypes")

from forge import forge  # noqa: E402

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "float32"]
DTYPES += ["float64", "complex64", "complex128", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
DTYPES += ["int4", "uint2", "uint1", "float6_e3m2fn", "float4_e2m1fn"]

# (key, value) pairs for a (4, 6) destination, values that every type above holds
ASSIGNMENTS = [
    ((1, 2), 1),
    ((-1, -1), True),
    (0, [1, 0, 1, 1, 0, 1]),
    ((slice(None), 3), 1.0),
    ((slice(1, 3), slice(None, None, 2)), [[1, 0, 1], [0, 1, 1]]),
    ((slice(None, None, -1), 1), (1, 0, 0, 1)),
    (Ellipsis, 0),
    ((Ellipsis, slice(2, 4)), [[1], [0], [1], [1]]),
    ((None, 2), [[0, 1, 1, 0, 1, 0]]),
    ((slice(None), slice(4, 4)), 1),
    ((2, slice(5, 0, -2)), np.array([1, 0, 1], dtype=np.int8)),
]


def numpy_and_tensor(name, shape=(4, 6)):
    """A NumPy array of varied small values of `name` and a writable Tensor holding them."""
    np_dtype = dl.dtype(name).to_numpy()
    a = (np.arange(np.prod(shape)).reshape(shape) % 2).astype(np_dtype)
    t = dl.tensor(a)
    return a, t


def assert_equal(t, a):
    got = np.asarray(t)
    assert got.dtype == a.dtype and got.shape == a.shape
    assert got.astype(np.complex128).tolist() == a.astype(np.complex128).tolist()


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("key,value", ASSIGNMENTS, ids=[repr(k) for k, _ in ASSIGNMENTS])
def test_assignment_gives_numpys_result(name, key, value):
    a, t = numpy_and_tensor(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a[key] = np.asarray(value).astype(a.dtype)
    t[key] = value
    assert_equal(t, a)


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize(
    "source", ["int8", "int64", "float32", "float64", "bool", "bfloat16", "int4"]
)
def test_assignment_casts_an_array_as_numpy(name, source):
    a, t = numpy_and_tensor(name)
    values = (np.arange(6) % 3 == 0).astype(dl.dtype(source).to_numpy())
    a[1:3] = values
    t[1:3] = dl.asarray(values)
    assert_equal(t, a)
    t[3] = values  # the array itself, read through dl.asarray
    a[3] = values
    assert_equal(t, a)


@pytest.mark.parametrize(
    "value",
    [
        np.float32(3),
        np.int64(-2),
        np.bool_(True),
        np.array(5.0),
        *([torch.tensor(4), torch.tensor([1.0, 2.0, 3.0])] if torch is not None else []),
        ml_dtypes.bfloat16(1.5),
        bytearray(b"\x01\x02\x03"),
    ],
    ids=type,
)
def test_assignment_takes_numpy_scalars_tensors_and_buffers(value):
    a = np.zeros(3, np.float64)
    t = dl.tensor(a)
    t[:] = value
    is_torch = torch is not None and isinstance(value, torch.Tensor)
    a[:] = value.numpy() if is_torch else np.asarray(value)
    assert t.tolist() == a.tolist()


OVERLAPS = {
    "right": (slice(1, None), lambda t: t[:-1]),
    "left": (slice(None, -1), lambda t: t[1:]),
    "reversed": (slice(None, None, -1), lambda t: t),
    "from-reversed": (Ellipsis, lambda t: t[::-1]),
    "stepped": (slice(None, None, 2), lambda t: t[:5]),
}
# Packed sub-byte elements have views only where each starts on a byte and rows are packed:
# a source such as t[1:] of int4 does not exist (the key of a destination always does).
PACKED_OVERLAPS = ["right", "stepped"]


@pytest.mark.parametrize(
    "name,case",
    [(n, c) for n in ("int16", "float64", "bool") for c in OVERLAPS]
    + [(n, c) for n in ("int4", "uint1", "float6_e2m3fn") for c in PACKED_OVERLAPS],
)
def test_overlapping_source_gives_numpys_result(name, case):
    key, source = OVERLAPS[case]
    np_dtype = dl.dtype(name).to_numpy()
    a = (np.arange(10) % 3).astype(np_dtype)
    t = dl.tensor(a)
    a[key] = source(a).copy()  # NumPy's result: the source read before any write
    t[key] = source(t)
    assert_equal(t, a)


def test_overlap_through_another_framework_over_the_same_memory():
    t = dl.arange(8, dtype="int32")
    view = np.from_dlpack(t)  # another object, the same memory
    t[2:] = view[:-2]
    assert t.tolist() == [0, 1, 0, 1, 2, 3, 4, 5]
    t[:4] = np.from_dlpack(t).view(np.int16)[:4]  # another type over the same bytes
    assert t.tolist() == [0, 0, 1, 0, 2, 3, 4, 5]


def test_overlap_through_a_transpose():
    a = np.arange(16.0).reshape(4, 4)
    t = dl.tensor(a)
    t[...] = t.T
    a[...] = a.T.copy()
    assert_equal(t, a)


def test_setitem_on_a_view_writes_the_shared_memory():
    a = np.zeros((3, 4), np.int32)
    t = dl.asarray(a)
    t[1, 1:3] = [7, 8]
    row = t[2]
    row[::3] = -1
    assert a.tolist() == [[0, 0, 0, 0], [0, 7, 8, 0], [-1, 0, 0, -1]]


def test_assignment_broadcasts_and_drops_leading_ones():
    t = dl.zeros((2, 3), "int64")
    t[...] = [1, 2, 3]
    t[0] = np.full((1, 1, 3), 9)
    assert t.tolist() == [[9, 9, 9], [1, 2, 3]]
    t[:, :1] = [[5], [6]]
    assert t.tolist() == [[5, 9, 9], [6, 2, 3]]


@pytest.mark.parametrize("value", [[1, 2], [[1, 2, 3]] * 3, np.ones((2, 1, 3))])
def test_assignment_that_does_not_broadcast_is_numpys_value_error(value):
    t = dl.zeros((2, 3))
    with pytest.raises(ValueError, match="could not broadcast input array from shape"):
        t[...] = value
    with pytest.raises(ValueError, match="could not broadcast"):
        np.zeros((2, 3))[...] = value


def test_zero_dimensional_assignment():
    t = dl.tensor(1.5)
    t[()] = 4
    assert t.item() == 4.0
    t[...] = dl.tensor([[7.0]])
    assert t.item() == 7.0


@pytest.mark.parametrize(
    "name,value,error",
    [
        ("int8", 300, OverflowError),
        ("uint8", -1, OverflowError),
        ("int32", float("nan"), ValueError),
        ("int32", float("inf"), OverflowError),
        ("float32", 1 + 2j, TypeError),
    ],
)
def test_python_values_follow_numpys_rules_for_them(name, value, error):
    t = dl.zeros(3, name)
    with pytest.raises(error):
        t[1] = value
    with pytest.raises(error):
        np.zeros(3, name)[1] = value
    assert t.tolist() == [0, 0, 0]


@pytest.mark.parametrize("name,value", [("int4", 8), ("uint2", 4), ("int1", 1)])
def test_a_python_value_out_of_a_sub_byte_range_is_refused(name, value):
    t = dl.zeros(3, name)
    with pytest.raises(OverflowError, match=f"does not fit in {name}"):
        t[0] = value
    assert t.tolist() == [0, 0, 0]


def test_strings_are_no_values():
    t = dl.zeros(3, "int8")
    with pytest.raises(TypeError, match="str"):
        t[0] = "3"  # NumPy parses it; dlinterop holds numbers


def test_python_reals_truncate_into_integers_as_numpy():
    t = dl.zeros(3, "int16")
    t[:] = [1.9, -1.9, 2.0]
    assert t.tolist() == [1, -1, 2]


def test_a_refused_array_value_leaves_the_tensor_as_it_was():
    t = dl.tensor([1, 2, 3], dtype="int8")
    with pytest.raises(ValueError, match="NaN"):
        t[:] = np.array([4.0, 5.0, np.nan])
    with pytest.raises(OverflowError, match="int8"):
        t[:] = dl.tensor([4.0, 1e10, 6.0])
    assert t.tolist() == [1, 2, 3]


def test_complex_into_real_warns_as_numpy():
    t = dl.zeros(2)
    with pytest.warns(np.exceptions.ComplexWarning):
        t[:] = np.array([1 + 1j, 2 - 1j])
    assert t.tolist() == [1.0, 2.0]


def test_read_only_destination_is_numpys_value_error():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dl.asarray(a)
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        t[0] = 1.0
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        t[1:][0] = 1.0
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        a[0] = 1.0
    legacy = dl.from_dlpack(forge(shape=(2,), dtype=(2, 64, 1), versioned=False).capsule)
    with pytest.raises(ValueError, match="legacy DLPack capsule"):
        legacy[0] = 1.0
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_memory_the_host_cannot_write_is_refused():
    t = dl.from_dlpack(forge(shape=(2, 3), device=(21, 0)).capsule)
    with pytest.raises(BufferError, match="ascend"):
        t[0] = 1.0


@pytest.mark.parametrize("key", [[0, 1], np.array([True, False, True]), 1.5, "a"])
def test_keys_indexing_refuses_are_refused_alike(key):
    t = dl.zeros(3)
    with pytest.raises((IndexError, TypeError)) as refused:
        t[key]
    with pytest.raises(refused.type, match=re.escape(str(refused.value))):
        t[key] = 1
    assert t.tolist() == [0.0, 0.0, 0.0]


def test_objects_that_are_no_values_are_refused():
    t = dl.zeros(3)
    with pytest.raises(TypeError, match="cannot make a tensor from object"):
        t[0] = object()


def test_vector_type_elements_are_assigned_from_their_own_type():
    t = dl.full((3,), 1.5, "float4_e2m1fn_x2")
    t[1] = dl.full((), -2.0, "float4_e2m1fn_x2")
    assert t.tolist() == [(1.5, 1.5), (-2.0, -2.0), (1.5, 1.5)]
    with pytest.raises(TypeError, match="vector type"):
        t[0] = dl.tensor(1.0)
