"""Zero-copy interchange with NumPy. (DLPack's export and import rules, on the CPU, are in
tests/test_export_protocol.py and tests/test_import_protocol.py.)"""

import gc
import math
import sys

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

from forge import capsule_strides, same_layout
from numpy_route import (  # noqa: F401 (numpy_route and tensor are fixtures)
    NUMPY_ROUTE_BUILT,
    NUMPY_ROUTE_USABLE,
    _arange,
    capsule_name,
    numpy_route,
    tensor,
)


def numpy_exports_raw_strides():
    """Whether this NumPy's __dlpack__ exports a zero-size or size-one array's strides as
    they are (NumPy 2.2 exports C-order ones for zero-size arrays; 2.4 and later do not)."""
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    probes = [base[:0, :, ::2], base[:1, 1:2, ::4]]
    return all(
        capsule_strides(p.__dlpack__(max_version=(1, 0)))
        == tuple(s // p.itemsize for s in p.strides)
        for p in probes
    )


def test_native_route_is_used_exactly_where_numpy_exports_strides_as_they_are():
    # The route describes arrays as they are; where NumPy normalises strides the route's
    # probes disagree with NumPy and __dlpack__ stays in charge.
    assert NUMPY_ROUTE_USABLE == (NUMPY_ROUTE_BUILT and numpy_exports_raw_strides())


NUMPY_NAMES = list(numpy_shared_dtypes())


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
    t = dl.from_dlpack(_sample(name, (2, 5))).copy()  # an owned buffer with known values
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
    np.asarray(t)[3] = 1  # through the buffer protocol
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

LAYOUTS = {
    "zero_d": lambda: np.array(2.5, np.float32),
    "zero_size_1d": lambda: np.empty((0,), np.float32),
    "zero_size_3x0": lambda: np.empty((3, 0), np.float32),
    "zero_size_2x0x1": lambda: np.empty((2, 0, 1), np.float32),
    "size_one_odd_strides": lambda: np.lib.stride_tricks.as_strided(
        _arange((64,)), (1, 3, 1), (4 * 7, 4, 4 * 13)
    ),
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


# -- capsules ---------------------------------------------------------------------------


def test_numpy_consumer_releases_the_export(tensor):
    before_exports = _live_exports()
    before_refs = sys.getrefcount(tensor)
    a = np.from_dlpack(tensor)
    assert _live_exports() == before_exports + 1
    del a
    assert _live_exports() == before_exports
    assert sys.getrefcount(tensor) == before_refs


# -- NumPy as the consumer, with its own keywords ---------------------------------------


@pytest.mark.parametrize(
    "kwargs, shares",
    [({}, True), ({"copy": False}, True), ({"device": "cpu"}, True), ({"copy": True}, False)],
)
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
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # kept alive


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: np.arange(4, dtype=">i4"), "native byte order"),
        (lambda: np.zeros(3, np.longdouble), "IEEE"),
        (lambda: np.zeros(2, "i4,f8"), "DLPack only supports"),
    ],
    ids=["byte-swapped", "longdouble", "structured"],
)
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
    a = np.from_dlpack(t)  # its base chain ends in NumPy's own capsule
    u = dl.from_dlpack(a)
    assert u.device == "cpu" and u.data_ptr == t.data_ptr


def test_native_route_is_set_up_only_once_numpy_is_imported():
    import subprocess

    code = (
        "import sys, dlinterop as dl\n"
        "dl.from_dlpack(dl.zeros(3))\n"
        "assert 'numpy' not in sys.modules and dl._core._numpy_route() is None\n"
        "import numpy as np\n"
        "t = dl.from_dlpack(np.arange(3.0))\n"
        "print(dl._core._numpy_route(), t.owner is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(NUMPY_ROUTE_USABLE), "True"]
