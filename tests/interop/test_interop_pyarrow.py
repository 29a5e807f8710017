"""Interop with Apache Arrow (pyarrow), both directions: every type Arrow's DLPack export and
import know, slices and layouts, zero-length arrays, read-only memory, lifetimes, the way
out, and Arrow's own refusals.

What Arrow does (asked of pyarrow itself, docs/frameworks.md): `pa.Array` and `pa.Tensor`
export versioned capsules when asked with max_version (unversioned ones with a
DeprecationWarning), arrays always READ_ONLY (Arrow arrays are immutable), tensors READ_ONLY
only when their memory is; booleans (bit-packed), arrays with nulls and non-numeric types
are refused with `ArrowTypeError`, a `TypeError` where DLPack says `BufferError`.
`pa.Array.from_dlpack` takes contiguous 1-D data only, `pa.Tensor.from_dlpack` any strides
but negative ones; both share memory and refuse bool, complex and bfloat16 with
`ArrowInvalid` (a `ValueError`).
"""

import gc
import warnings

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
from peer_values import STANDARD, values_of  # noqa: E402

pa = pytest.importorskip("pyarrow")

# The DLPack types Arrow exports and imports (int, uint and float of every width it has).
ARROW_DTYPES = [name for name in STANDARD if name != "bool" and not name.startswith("complex")]


def arrow_address(array):
    """Where an Arrow array's first element lies."""
    return array.buffers()[1].address + array.offset * array.type.byte_width


@pytest.mark.parametrize("name", ARROW_DTYPES)
def test_an_arrow_array_imports_without_copying_and_read_only(name):
    values = values_of(name, 7)
    array = pa.array(values)
    t = dl.from_dlpack(array)
    assert t.dtype == dl.dtype(name) and t.shape == (7,)
    assert t.data_ptr == arrow_address(array)
    assert np.array_equal(np.from_dlpack(t), values)
    # Arrow arrays are immutable and say so with DLPack's READ_ONLY flag.
    assert t.readonly_reason == "flag"
    assert not np.from_dlpack(t).flags.writeable


@pytest.mark.parametrize("name", ARROW_DTYPES)
def test_a_tensor_becomes_an_arrow_array_and_tensor_sharing_memory(name):
    values = values_of(name, 6)
    t = dl.asarray(values)
    array = pa.Array.from_dlpack(t)
    assert arrow_address(array) == t.data_ptr
    assert array.to_numpy(zero_copy_only=True).tolist() == values.tolist()
    tensor = pa.Tensor.from_dlpack(t.reshape((2, 3)))
    assert tensor.to_numpy().tolist() == values.reshape(2, 3).tolist()
    assert tensor.to_numpy().ctypes.data == t.data_ptr


def test_sliced_and_zero_length_arrays():
    array = pa.array(np.arange(10, dtype=np.int32))
    window = array.slice(3, 4)
    t = dl.from_dlpack(window)
    assert t.tolist() == [3, 4, 5, 6]
    assert t.data_ptr == arrow_address(array) + 3 * 4
    empty = dl.from_dlpack(array.slice(5, 0))
    assert empty.shape == (0,) and empty.tolist() == []
    # and back: a zero-size Tensor is a zero-length Arrow array
    assert len(pa.Array.from_dlpack(dl.empty((0,), "float32"))) == 0


def test_an_arrow_tensor_keeps_its_strides_and_its_writability():
    base = np.arange(12.0).reshape(3, 4)
    tensor = pa.Tensor.from_numpy(base.T)
    t = dl.from_dlpack(tensor)
    assert t.shape == (4, 3) and t.strides == (1, 4)
    assert t.tolist() == base.T.tolist()
    assert not t.readonly  # writable NumPy memory: Arrow's tensor does not flag it
    frozen = base.copy()
    frozen.flags.writeable = False
    assert dl.from_dlpack(pa.Tensor.from_numpy(frozen)).readonly_reason == "flag"


def test_layouts_arrow_refuses_are_its_own_errors():
    reversed_view = dl.arange(4, dtype="float32")[::-1]
    with pytest.raises(pa.ArrowInvalid, match="negative strides"):
        pa.Tensor.from_dlpack(reversed_view)
    with pytest.raises(pa.ArrowInvalid, match="contiguous one dimensional"):
        pa.Array.from_dlpack(dl.arange(8, dtype="float32")[::2])
    # any positive strides are fine for pa.Tensor, sharing the memory
    strided = dl.arange(12, dtype="float32").reshape((3, 4))[:, ::2]
    assert pa.Tensor.from_dlpack(strided).to_numpy().tolist() == strided.tolist()


@pytest.mark.parametrize("name", ["bool", "complex64", "bfloat16"])
def test_types_arrow_cannot_import_are_refused_by_arrow(name):
    with pytest.raises(pa.ArrowInvalid, match="unsupported DLPack type"):
        pa.Array.from_dlpack(dl.zeros((3,), name))


@pytest.mark.parametrize(
    "array, message",
    [
        (lambda: pa.array([True, False]), "Bit-packed boolean"),
        (lambda: pa.array([1, None]), "no nulls"),
        (lambda: pa.array(["text"]), "not compatible with DLPack"),
    ],
)
def test_arrays_arrow_cannot_export_raise_arrows_type_error(array, message):
    # ArrowTypeError is a TypeError (DLPack asks for BufferError), which a consumer reads as
    # "no max_version keyword": dlinterop, as NumPy, retries unversioned, and pyarrow then
    # warns that unversioned export is deprecated before raising the same error.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(pa.ArrowTypeError, match=message):
            dl.from_dlpack(array())
    assert any("unversioned DLPack capsule" in str(w.message) for w in caught)


def test_read_only_tensors_reach_arrow_read_only():
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    t = dl.from_dlpack(frozen)
    assert t.readonly_reason == "flag"
    array = pa.Array.from_dlpack(t)
    assert not array.buffers()[1].is_mutable
    assert arrow_address(array) == t.data_ptr
    tensor = pa.Tensor.from_dlpack(t)
    assert not tensor.is_mutable


def test_a_copy_of_an_arrow_array_is_writable_and_apart():
    array = pa.array(np.arange(5, dtype=np.int64))
    t = dl.from_dlpack(array, copy=True)
    assert not t.readonly and t.data_ptr != arrow_address(array)
    np.from_dlpack(t)[0] = 99
    assert t.tolist()[0] == 99 and array[0].as_py() == 0


def test_lifetimes_either_side_dropped_first():
    array = pa.array(np.arange(1000, dtype=np.float64))
    t = dl.from_dlpack(array)
    del array
    gc.collect()
    assert t.tolist() == list(map(float, range(1000)))
    source = dl.arange(1000, dtype="int64")
    out = pa.Array.from_dlpack(source)
    del source
    gc.collect()
    assert out.to_pylist() == list(range(1000))


def test_arrow_publishes_no_exchange_table():
    for cls in (type(pa.array([1.0])), pa.Tensor):
        assert not hasattr(cls, "__dlpack_c_exchange_api__")
        assert not hasattr(cls, "__c_dlpack_exchange_api__")


def test_the_way_out_hands_back_arrow_arrays_and_tensors():
    t = dl.arange(6, dtype="float32")
    for like in ("pyarrow", pa, pa.array([1.0]), pa.FloatArray):
        out = dl.to_framework(t, like=like)
        assert isinstance(out, pa.Array) and arrow_address(out) == t.data_ptr
    tensor = dl.to_framework(t.reshape((2, 3)), like=pa.Tensor)
    assert isinstance(tensor, pa.Tensor) and tensor.shape == (2, 3)
    assert tensor.to_numpy().ctypes.data == t.data_ptr


def test_the_way_out_copies_what_arrow_cannot_hold_unless_forbidden():
    t = dl.arange(8, dtype="float32")
    for view, like in ((t[::2], "pyarrow"), (t[::-1], "pyarrow"), (t[::-1], pa.Tensor)):
        out = dl.to_framework(view, like=like)
        assert dl.from_dlpack(out).tolist() == view.tolist()
        assert dl.from_dlpack(out).data_ptr != t.data_ptr
        with pytest.raises(dl.CopyError, match="copy=False"):
            dl.to_framework(view, like=like, copy=False)
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    # Arrow keeps read-only memory read-only: no copy, no refusal
    out = dl.to_framework(dl.from_dlpack(frozen), like="pyarrow")
    assert arrow_address(out) == frozen.ctypes.data
