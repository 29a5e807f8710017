"""What the NumPy interop tests (tests/interop/test_numpy_interop.py) and the DLPack protocol
tests (tests/test_export_protocol.py, tests/test_import_protocol.py) share: the autouse
`numpy_route` fixture, which runs each of their tests twice (NumPy's arrays imported through
the native route and through NumPy's own __dlpack__), the `tensor` fixture, and capsules read
in place with ctypes.

A test module takes the fixtures by importing them (pytest finds fixtures among a module's
names); `numpy_route` is autouse, so importing it is all a module does to run twice.
"""

import ctypes
import math

import numpy as np
import pytest

import dlinterop as dl

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


NUMPY_ROUTE_USABLE = _numpy_route_usable()


@pytest.fixture(autouse=True, params=["native", "dlpack"])
def numpy_route(request):
    """Every test of a module that imports this runs twice: exact ndarrays imported through
    the native NumPy route (NumPy's C API, no Python call) and through NumPy's own
    __dlpack__. The two must be observably identical."""
    native = request.param == "native"
    if native and not NUMPY_ROUTE_BUILT:
        pytest.skip("built without NumPy's headers: the native route is absent")
    if native and not NUMPY_ROUTE_USABLE:
        pytest.skip("this NumPy's __dlpack__ normalises strides: the native route is off")
    previous = dl._core._set_numpy_route(native)
    dl.from_dlpack(np.zeros(1))  # decides the route now
    assert dl._core._numpy_route() is native
    yield request.param
    dl._core._set_numpy_route(previous)


# Private function objects: setting restype/argtypes on ctypes.pythonapi.<name> would leak
# into every other user of ctypes.pythonapi in the process.
_PyCapsule_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi)
)
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


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
        "dtype": (
            ctypes.c_uint8.from_address(address + 20).value,
            ctypes.c_uint8.from_address(address + 21).value,
            ctypes.c_uint16.from_address(address + 22).value,
        ),
        "shape": None if not shape_ptr else tuple((ctypes.c_int64 * ndim).from_address(shape_ptr)),
        "strides": None
        if not strides_ptr
        else tuple((ctypes.c_int64 * ndim).from_address(strides_ptr)),
    }


def inspect_capsule(capsule):
    """(version or None, flags or None, DLTensor fields) of an unconsumed capsule."""
    name = capsule_name(capsule)
    address = _PyCapsule_GetPointer(capsule, name.encode())
    if name == "dltensor_versioned":
        version = (
            ctypes.c_uint32.from_address(address).value,
            ctypes.c_uint32.from_address(address + 4).value,
        )
        flags = ctypes.c_uint64.from_address(address + 24).value
        return version, flags, _read_dltensor(address + 32)
    assert name == "dltensor"
    return None, None, _read_dltensor(address)


def _arange(shape, dtype=np.float32):
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


@pytest.fixture
def tensor():
    return dl.from_dlpack(_arange((2, 3))).copy()
