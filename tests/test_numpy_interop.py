"""Zero-copy interchange with NumPy, and DLPack's export rules on the CPU."""

import ctypes
import gc
import math
import sys

import numpy as np
import pytest

import dlinterop as dl
from forge import capsule_strides, same_layout

READ_ONLY = 1
IS_COPIED = 2
NUMPY_ROUTE_BUILT = dl.build_info()["numpy_route_built"]


def _numpy_route_usable():
    """Whether the native route passes its set-up probes against this NumPy."""
    previous = dl._core._set_numpy_route(True)
    dl.from_dlpack(np.zeros(1))
    usable = dl._core._numpy_route()
    dl._core._set_numpy_route(previous)
    return usable


def numpy_exports_raw_strides():
    """Whether this NumPy's __dlpack__ exports a zero-size or size-one array's strides as
    they are (NumPy 2.2 exports C-order ones for zero-size arrays; 2.4 and later do not)."""
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    probes = [base[:0, :, ::2], base[:1, 1:2, ::4]]
    return all(capsule_strides(p.__dlpack__(max_version=(1, 0)))
               == tuple(s // p.itemsize for s in p.strides) for p in probes)


NUMPY_ROUTE_USABLE = _numpy_route_usable()


def test_native_route_is_used_exactly_where_numpy_exports_strides_as_they_are():
    # The route describes arrays as they are; where NumPy normalises strides the route's
    # probes disagree with NumPy and __dlpack__ stays in charge.
    assert NUMPY_ROUTE_USABLE == (NUMPY_ROUTE_BUILT and numpy_exports_raw_strides())


@pytest.fixture(autouse=True, params=["native", "dlpack"])
def numpy_route(request):
    """Every test here runs twice: exact ndarrays imported through the native NumPy route
    (NumPy's C API, no Python call) and through NumPy's own __dlpack__. The two must be
    observably identical."""
    native = request.param == "native"
    if native and not NUMPY_ROUTE_BUILT:
        pytest.skip("built without NumPy's headers: the native route is absent")
    if native and not NUMPY_ROUTE_USABLE:
        pytest.skip("this NumPy's __dlpack__ normalises strides: the native route is off")
    previous = dl._core._set_numpy_route(native)
    dl.from_dlpack(np.zeros(1))   # decides the route now
    assert dl._core._numpy_route() is native
    yield request.param
    dl._core._set_numpy_route(previous)

NUMPY_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
               "uint64", "float16", "float32", "float64", "complex64", "complex128"]

# Private function objects: setting restype/argtypes on ctypes.pythonapi.<name> would leak
# into every other user of ctypes.pythonapi in the process.
_PyCapsule_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def capsule_name(capsule):
    return _PyCapsule_GetName(capsule).decode()


def _read_dltensor(address):
    """The fields of the DLTensor at `address` (DLPack 1.3 ABI, 64-bit)."""
    u64 = ctypes.c_uint64.from_address
    i32 = ctypes.c_int32.from_address
    data, ndim = u64(address).value, i32(address + 16).value
    shape_ptr, strides_ptr = u64(address + 24).value, u64(address + 32).value
    return {
        "data_ptr": data + u64(address + 40).value,
        "device": (i32(address + 8).value, i32(address + 12).value),
        "ndim": ndim,
        "dtype": (ctypes.c_uint8.from_address(address + 20).value,
                  ctypes.c_uint8.from_address(address + 21).value,
                  ctypes.c_uint16.from_address(address + 22).value),
        "shape": None if not shape_ptr else tuple((ctypes.c_int64 * ndim).from_address(shape_ptr)),
        "strides": None if not strides_ptr else tuple(
            (ctypes.c_int64 * ndim).from_address(strides_ptr)),
    }


def inspect_capsule(capsule):
    """(version or None, flags or None, DLTensor fields) of an unconsumed capsule."""
    name = capsule_name(capsule)
    address = _PyCapsule_GetPointer(capsule, name.encode())
    if name == "dltensor_versioned":
        version = (ctypes.c_uint32.from_address(address).value,
                   ctypes.c_uint32.from_address(address + 4).value)
        flags = ctypes.c_uint64.from_address(address + 24).value
        return version, flags, _read_dltensor(address + 32)
    assert name == "dltensor"
    return None, None, _read_dltensor(address)


def _sample(name, shape):
    n = math.prod(shape)
    if name == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    values = (np.arange(n) * 7 % 101).reshape(shape)
    if name.startswith("complex"):
        return (values - 1j * values).astype(name)
    return values.astype(name)


def _live_exports():
    gc.collect()
    return dl.memory_stats()["live_exports"]


# -- round trips ------------------------------------------------------------------------

@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_numpy_to_dlinterop_to_numpy_is_zero_copy(name):
    a = _sample(name, (3, 4))
    t = dl.from_dlpack(a)
    assert t.data_ptr == a.ctypes.data
    assert t.dtype is dl.dtype(a.dtype)
    assert t.shape == a.shape
    assert not t.readonly
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    assert b.dtype == a.dtype
    assert np.array_equal(b, a)
    assert b.flags.writeable


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_dlinterop_to_numpy_to_dlinterop_is_zero_copy(name):
    t = dl.from_dlpack(_sample(name, (2, 5))).copy()   # an owned buffer with known values
    a = np.from_dlpack(t)
    assert a.ctypes.data == t.data_ptr
    assert a.dtype == np.dtype(name)
    assert a.flags.writeable
    assert np.array_equal(a, _sample(name, (2, 5)))
    u = dl.from_dlpack(a)
    assert u.data_ptr == t.data_ptr
    assert u.dtype is t.dtype


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_writes_are_visible_both_ways(name):
    t = dl.zeros(4, name)
    a = np.from_dlpack(t)
    a[2] = 1
    assert np.from_dlpack(t)[2] == 1
    np.asarray(t)[3] = 1           # through the buffer protocol
    assert a[3] == 1


def test_numpy_array_outlives_dlinterop_tensor():
    t = dl.full(1000, 3, "int32")
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert (a == 3).all()


def test_dlinterop_tensor_outlives_numpy_array():
    a = np.full(1000, 3, np.int32)
    t = dl.from_dlpack(a)
    del a
    gc.collect()
    assert (np.from_dlpack(t) == 3).all()


# -- layouts ----------------------------------------------------------------------------

def _arange(shape, dtype=np.float32):
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


LAYOUTS = {
    "zero_d": lambda: np.array(2.5, np.float32),
    "zero_size_1d": lambda: np.empty((0,), np.float32),
    "zero_size_3x0": lambda: np.empty((3, 0), np.float32),
    "zero_size_2x0x1": lambda: np.empty((2, 0, 1), np.float32),
    "size_one_odd_strides": lambda: np.lib.stride_tricks.as_strided(
        _arange((64,)), (1, 3, 1), (4 * 7, 4, 4 * 13)),
    "ndim_5": lambda: _arange((2, 1, 3, 1, 2)),
    "ndim_32": lambda: _arange((1,) * 28 + (2, 3, 1, 2)),
    "ndim_64": lambda: _arange((1,) * 62 + (2, 3)),
    "transposed": lambda: _arange((3, 4, 5)).T,
    "sliced": lambda: _arange((6, 8))[1:5, 2:7:2],
    "negative_stride": lambda: _arange((4, 5))[::-1, ::-2],
    "broadcast": lambda: np.broadcast_to(_arange((5,)), (3, 4, 5)),
    "broadcast_middle": lambda: np.broadcast_to(_arange((3, 1, 2)), (3, 4, 2)),
    "int16_transposed": lambda: _arange((4, 6), np.int16).T[::2],
    "complex_sliced": lambda: _arange((4, 4), np.complex128)[:, 1:3],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_imports_zero_copy_with_element_strides(layout):
    a = LAYOUTS[layout]()
    t = dl.from_dlpack(a)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == a.shape
    assert t.ndim == a.ndim
    assert t.size == a.size
    # What NumPy's capsule says, which for dimensions of size 0 or 1 differs between NumPy
    # versions (some export C-order strides there): the same elements either way.
    assert t.strides == capsule_strides(a.__dlpack__(max_version=(1, 3)))
    assert same_layout(a.shape, t.strides, tuple(s // a.itemsize for s in a.strides))
    assert t.readonly is (not a.flags.writeable)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_round_trips_back_to_numpy(layout):
    a = LAYOUTS[layout]()
    t = dl.from_dlpack(a)
    b = np.from_dlpack(t)
    assert b.ctypes.data == a.ctypes.data
    assert b.shape == a.shape
    assert b.strides == tuple(s * a.itemsize for s in t.strides)
    assert same_layout(a.shape, b.strides, a.strides)
    assert b.dtype == a.dtype
    assert b.flags.writeable == a.flags.writeable
    assert np.array_equal(b, a)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_copy_matches_numpy_values(layout):
    a = LAYOUTS[layout]()
    c = np.from_dlpack(dl.from_dlpack(a).copy())
    assert c.flags.c_contiguous
    assert np.array_equal(c, a)


def test_broadcast_view_has_zero_strides_and_is_read_only():
    a = np.broadcast_to(np.arange(3, dtype=np.int64), (4, 3))
    t = dl.from_dlpack(a)
    assert t.strides == (0, 1)
    assert t.readonly
    b = np.from_dlpack(t)
    assert b.strides == (0, 8)
    assert not b.flags.writeable


def test_strides_convert_between_bytes_and_elements():
    a = np.zeros((4, 6), np.int32)[::2, ::3]
    assert a.strides == (48, 12)
    assert dl.from_dlpack(a).strides == (12, 3)
    t = dl.empty((2, 3, 4), "float64")
    assert t.strides == (12, 4, 1)
    assert np.from_dlpack(t).strides == (96, 32, 8)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1), (1,) * 32, (1,) * 64])
def test_owned_tensor_of_any_shape_exports_to_numpy(shape):
    t = dl.zeros(shape, "float32")
    a = np.from_dlpack(t)
    assert a.shape == shape
    assert a.ctypes.data == t.data_ptr
    assert a.strides == tuple(4 * s for s in t.strides)


# -- read-only --------------------------------------------------------------------------

@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_readonly_numpy_imports_readonly_and_exports_readonly(name):
    a = _sample(name, (2, 3))
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    assert t.data_ptr == a.ctypes.data
    b = np.from_dlpack(t)
    assert not b.flags.writeable
    assert b.ctypes.data == a.ctypes.data
    assert np.array_equal(b, a)


def test_readonly_export_sets_read_only_flag():
    a = np.arange(3.0)
    a.flags.writeable = False
    _, flags, _ = inspect_capsule(dl.from_dlpack(a).__dlpack__(max_version=(1, 0)))
    assert flags & READ_ONLY
    assert not flags & IS_COPIED


def test_readonly_tensor_legacy_export_is_buffer_error():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    with pytest.raises(BufferError):
        t.__dlpack__()
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(0, 8))
    with pytest.raises(BufferError):
        dl.to_dlpack(t)


def test_readonly_tensor_legacy_export_with_copy_true_works():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    capsule = t.__dlpack__(copy=True)
    assert capsule_name(capsule) == "dltensor"
    _, _, info = inspect_capsule(capsule)
    assert info["data_ptr"] != t.data_ptr
    u = dl.from_dlpack(capsule)
    assert np.array_equal(np.from_dlpack(u), a)


def test_versioned_to_dlpack_of_readonly_tensor_works():
    a = np.arange(3.0)
    a.flags.writeable = False
    _, flags, _ = inspect_capsule(dl.to_dlpack(dl.from_dlpack(a), versioned=True))
    assert flags & READ_ONLY


# -- __dlpack__ keyword rules (DLPack) ----------------------------------------------------

@pytest.fixture
def tensor():
    return dl.from_dlpack(_arange((2, 3))).copy()


def test_dlpack_device_is_cpu_zero(tensor):
    assert tensor.__dlpack_device__() == (dl.DeviceType.CPU, 0)
    assert type(tensor.__dlpack_device__()[0]) is dl.DeviceType


@pytest.mark.parametrize("args", [(None,), (None, (1, 0)), ((1, 0),)])
def test_dlpack_positional_arguments_are_type_error(tensor, args):
    with pytest.raises(TypeError):
        tensor.__dlpack__(*args)


@pytest.mark.parametrize("kwargs", [{"foo": 1}, {"device": (1, 0)}, {"version": (1, 0)},
                                    {"max_version": (1, 0), "streams": None}])
def test_dlpack_unknown_keyword_is_type_error(tensor, kwargs):
    with pytest.raises(TypeError):
        tensor.__dlpack__(**kwargs)


@pytest.mark.parametrize("max_version", [(1,), [1, 0], "1.0", (1, "0"), (1, 0, 0), 1,
                                         (1.0, 0), ("1", "0")])
def test_dlpack_malformed_max_version_is_type_error(tensor, max_version):
    with pytest.raises(TypeError):
        tensor.__dlpack__(max_version=max_version)


@pytest.mark.parametrize("max_version, expected", [
    (None, None), ((0, 0), None), ((0, 9), None),
    ((1, 0), (1, 0)), ((1, 1), (1, 1)), ((1, 2), (1, 2)), ((1, 3), (1, 3)),
    ((1, 99), (1, 3)), ((2, 0), (1, 3)),
])
def test_dlpack_max_version_negotiation(tensor, max_version, expected):
    capsule = tensor.__dlpack__(max_version=max_version)
    version, flags, info = inspect_capsule(capsule)
    assert capsule_name(capsule) == ("dltensor" if expected is None else "dltensor_versioned")
    assert version == expected
    if expected is not None:
        assert flags == 0
    assert info["data_ptr"] == tensor.data_ptr
    assert info["shape"] == (2, 3)
    assert info["strides"] == (3, 1)
    assert info["dtype"] == (2, 32, 1)
    assert info["device"] == (1, 0)


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_zero_d_has_null_shape_and_strides(max_version):
    t = dl.full((), 1.0)
    _, _, info = inspect_capsule(t.__dlpack__(max_version=max_version))
    assert info["ndim"] == 0
    assert info["shape"] is None and info["strides"] is None


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_strides_are_always_filled(max_version):
    a = _arange((3, 4)).T
    _, _, info = inspect_capsule(dl.from_dlpack(a).__dlpack__(max_version=max_version,
                                                              copy=False))
    assert info["strides"] == (1, 4)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("stream", [None, -1])
def test_dlpack_cpu_stream_none_or_minus_one_is_fine(tensor, stream, max_version):
    capsule = tensor.__dlpack__(stream=stream, max_version=max_version)
    assert inspect_capsule(capsule)[2]["data_ptr"] == tensor.data_ptr


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("stream", [0, 1, 2, 3, -2, 2**40])
def test_dlpack_cpu_stream_other_int_is_value_error(tensor, stream, max_version):
    with pytest.raises(ValueError):
        tensor.__dlpack__(stream=stream, max_version=max_version)


@pytest.mark.parametrize("stream", ["0", 1.5, object(), (1,), True])
def test_dlpack_stream_not_int_is_type_error(tensor, stream):
    with pytest.raises(TypeError):
        tensor.__dlpack__(stream=stream)


@pytest.mark.parametrize("copy", ["yes", 1, 0])
def test_dlpack_copy_not_bool_is_type_error(tensor, copy):
    with pytest.raises(TypeError):
        tensor.__dlpack__(copy=copy)


@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 3)])
def test_dlpack_copy_true_makes_a_new_buffer(tensor, max_version):
    capsule = tensor.__dlpack__(copy=True, max_version=max_version)
    _, flags, info = inspect_capsule(capsule)
    assert info["data_ptr"] != tensor.data_ptr
    if max_version is not None:
        assert flags & IS_COPIED
    u = dl.from_dlpack(capsule)
    assert np.array_equal(np.from_dlpack(u.copy()), np.from_dlpack(tensor))
    assert u.is_copied is (max_version is not None)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_dlpack_copy_false_shares(tensor, max_version):
    _, flags, info = inspect_capsule(tensor.__dlpack__(copy=False, max_version=max_version))
    assert info["data_ptr"] == tensor.data_ptr
    assert not (flags or 0) & IS_COPIED


@pytest.mark.parametrize("dl_device", [(1, 0), (dl.DeviceType.CPU, 0)])
@pytest.mark.parametrize("copy", [None, False])
def test_dlpack_dl_device_cpu_shares(tensor, dl_device, copy):
    capsule = tensor.__dlpack__(dl_device=dl_device, copy=copy, max_version=(1, 3))
    _, flags, info = inspect_capsule(capsule)
    assert info["data_ptr"] == tensor.data_ptr
    assert flags == 0


def test_dlpack_dl_device_cpu_with_copy_true_copies(tensor):
    _, flags, info = inspect_capsule(
        tensor.__dlpack__(dl_device=(1, 0), copy=True, max_version=(1, 3)))
    assert info["data_ptr"] != tensor.data_ptr
    assert flags & IS_COPIED


@pytest.mark.parametrize("max_version", [None, (1, 3)])
@pytest.mark.parametrize("dl_device", [(2, 0), (10, 0), (99, 0)])
def test_dlpack_unreachable_dl_device_is_buffer_error(tensor, dl_device, max_version):
    if dl_device[0] == 2 and dl.cuda.is_available():
        pytest.skip("a GPU is present: the CPU tensor can be copied to it")
    with pytest.raises(BufferError):
        tensor.__dlpack__(dl_device=dl_device, max_version=max_version)


def test_dlpack_other_dl_device_with_copy_false_is_copy_error(tensor):
    with pytest.raises(dl.CopyError) as info:
        tensor.__dlpack__(dl_device=(2, 0), copy=False, max_version=(1, 3))
    assert isinstance(info.value, BufferError)
    assert isinstance(info.value, ValueError)


def test_copy_error_is_buffer_error_and_value_error():
    assert issubclass(dl.CopyError, BufferError)
    assert issubclass(dl.CopyError, ValueError)


# -- capsules ---------------------------------------------------------------------------

def test_to_dlpack_default_is_legacy_capsule(tensor):
    capsule = dl.to_dlpack(tensor)
    assert capsule_name(capsule) == "dltensor"
    assert inspect_capsule(capsule)[2]["data_ptr"] == tensor.data_ptr


def test_to_dlpack_versioned_capsule(tensor):
    capsule = dl.to_dlpack(tensor, versioned=True)
    assert capsule_name(capsule) == "dltensor_versioned"
    version, flags, info = inspect_capsule(capsule)
    assert version == (1, 3)
    assert flags == 0
    assert info["data_ptr"] == tensor.data_ptr


@pytest.mark.parametrize("versioned", [False, True])
def test_capsule_is_renamed_when_consumed_and_only_once(tensor, versioned):
    capsule = dl.to_dlpack(tensor, versioned=versioned)
    u = dl.from_dlpack(capsule)
    assert u.data_ptr == tensor.data_ptr
    assert capsule_name(capsule) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert u.readonly is (not versioned)   # a legacy capsule cannot say it is writable
    with pytest.raises(ValueError, match="consumed"):
        dl.from_dlpack(capsule)


def test_to_dlpack_rejects_non_tensors():
    with pytest.raises(TypeError):
        dl.to_dlpack(np.zeros(3))


def test_numpy_consumer_releases_the_export(tensor):
    before_exports = _live_exports()
    before_refs = sys.getrefcount(tensor)
    a = np.from_dlpack(tensor)
    assert _live_exports() == before_exports + 1
    del a
    assert _live_exports() == before_exports
    assert sys.getrefcount(tensor) == before_refs


# -- dl.from_dlpack ---------------------------------------------------------------------

def test_from_dlpack_copy_true_from_numpy_makes_new_buffer():
    a = _arange((3, 4))
    t = dl.from_dlpack(a, copy=True)
    assert t.data_ptr != a.ctypes.data
    assert t.is_copied
    assert np.array_equal(np.from_dlpack(t), a)


@pytest.mark.parametrize("source", ["tensor", "capsule", "versioned_capsule"])
def test_from_dlpack_copy_true_from_dlinterop_makes_new_buffer(tensor, source):
    obj = {"tensor": tensor, "capsule": dl.to_dlpack(tensor),
           "versioned_capsule": dl.to_dlpack(tensor, versioned=True)}[source]
    u = dl.from_dlpack(obj, copy=True)
    assert u.data_ptr != tensor.data_ptr
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(tensor))


@pytest.mark.parametrize("kwargs", [{"copy": False}, {"device": "cpu"},
                                    {"device": "cpu", "copy": False}, {"stream": -1}])
def test_from_dlpack_numpy_shares_when_no_copy_is_needed(kwargs):
    a = _arange((3, 4))
    t = dl.from_dlpack(a, **kwargs)
    assert t.data_ptr == a.ctypes.data


def test_from_dlpack_of_numpy_legacy_capsule_is_readonly_and_shared():
    a = _arange((2, 2))
    t = dl.from_dlpack(a.__dlpack__())
    assert t.data_ptr == a.ctypes.data
    assert t.readonly


def test_from_dlpack_of_tensor_shares_memory(tensor):
    u = dl.from_dlpack(tensor)
    assert u is not tensor
    assert u.data_ptr == tensor.data_ptr
    assert u.owner is tensor
    assert u.shape == tensor.shape and u.strides == tensor.strides
    assert u.readonly is tensor.readonly
    memoryview(u)[1, 2] = 99.0
    assert memoryview(tensor)[1, 2] == 99.0


def test_from_dlpack_of_readonly_tensor_stays_readonly():
    a = np.arange(3.0)
    a.flags.writeable = False
    assert dl.from_dlpack(dl.from_dlpack(a)).readonly


@pytest.mark.parametrize("obj", [[1, 2, 3], 1.5, None, b"abc", object()])
def test_from_dlpack_of_non_dlpack_object_is_type_error(obj):
    with pytest.raises(TypeError):
        dl.from_dlpack(obj)


# -- NumPy as the consumer, with its own keywords ---------------------------------------

@pytest.mark.parametrize("kwargs, shares", [({}, True), ({"copy": False}, True),
                                            ({"device": "cpu"}, True), ({"copy": True}, False)])
def test_numpy_from_dlpack_keywords(tensor, kwargs, shares):
    a = np.from_dlpack(tensor, **kwargs)
    assert (a.ctypes.data == tensor.data_ptr) is shares
    assert a.flags.writeable
    assert np.array_equal(a, _arange((2, 3)))


def test_numpy_copy_of_readonly_tensor_is_writable():
    a = np.arange(3.0)
    a.flags.writeable = False
    b = np.from_dlpack(dl.from_dlpack(a), copy=True)
    assert b.ctypes.data != a.ctypes.data
    assert b.flags.writeable


# -- the native route itself --------------------------------------------------------------

def test_native_route_owner_is_the_array_and_dlpack_route_owner_a_capsule(numpy_route):
    a = np.arange(6.0)
    t = dl.from_dlpack(a)
    if numpy_route == "native":
        assert t.owner is a
    else:
        assert capsule_name(t.owner) == "used_dltensor_versioned"
    del a
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]   # kept alive


@pytest.mark.parametrize("make, error", [
    (lambda: np.arange(4, dtype=">i4"), "native byte order"),
    (lambda: np.zeros(3, np.longdouble), "IEEE"),
    (lambda: np.zeros(2, "i4,f8"), "DLPack only supports"),
], ids=["byte-swapped", "longdouble", "structured"])
def test_arrays_the_native_route_leaves_to_numpy_behave_as_numpy_says(make, error):
    a = make()
    with pytest.raises(BufferError, match=error):
        a.__dlpack__(max_version=(1, 3))
    with pytest.raises(BufferError, match=error):
        dl.from_dlpack(a)


def test_strides_that_are_not_whole_items_are_numpy_s_refusal():
    a = np.lib.stride_tricks.as_strided(np.zeros(32, np.uint8).view(np.int32), (3,), (6,))
    with pytest.raises(BufferError, match="multiple of itemsize"):
        dl.from_dlpack(a)


def test_subclasses_take_the_dlpack_route():
    class Sub(np.ndarray):
        pass

    s = np.arange(3.0).view(Sub)
    t = dl.from_dlpack(s)
    assert t.data_ptr == s.ctypes.data and t.owner is not s


def test_array_numpy_imported_from_a_capsule_reports_numpy_s_device():
    t = dl.zeros((3,))
    a = np.from_dlpack(t)   # its base chain ends in NumPy's own capsule
    u = dl.from_dlpack(a)
    assert u.device == "cpu" and u.data_ptr == t.data_ptr


def test_native_route_is_set_up_only_once_numpy_is_imported():
    import subprocess

    code = ("import sys, dlinterop as dl\n"
            "dl.from_dlpack(dl.zeros(3))\n"
            "assert 'numpy' not in sys.modules and dl._core._numpy_route() is None\n"
            "import numpy as np\n"
            "t = dl.from_dlpack(np.arange(3.0))\n"
            "print(dl._core._numpy_route(), t.owner is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(NUMPY_ROUTE_USABLE), "True"]
