"""What the exchange-API tests share: the table's ABI in ctypes (the checker's structs,
dlinterop.testing._tables; the functions' prototypes on top of forge's DLPack structs),
dlinterop's own table and its functions as ctypes callables, and forged producers (managed
tensors, tables, producer types).

ctypes prototypes: the functions that touch Python objects are called through PYFUNCTYPE,
so the GIL is held and an exception the callee leaves set is raised by ctypes, as a C
consumer would find it with PyErr_Occurred. The allocator and the stream query are pure C
and are called through CFUNCTYPE (GIL released), as a consumer on any thread would.
"""

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    PYFUNCTYPE,
    byref,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_void_p,
)

import numpy as np

import dlinterop as dl

# The table's ABI (include/dlpack/dlpack.h): the checker's (dlinterop.testing._tables); the
# function prototypes below take forge's DLPack structs.
from dlinterop.testing._tables import (  # noqa: F401  (names the tests import from here)
    API_NAME,
    FUNCTIONS,
    DLPackExchangeAPI,
    _capsule_pointer,
    take_object,
)

from forge import (
    DELETER_VERSIONED,
    DLManagedTensorVersioned,
    DLTensor,
    capsule_name,
    make_capsule,
)

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")

CPU, CUDA = 1, 2
assert ctypes.sizeof(DLPackExchangeAPI) == 16 + 5 * 8

MANAGED_OUT = POINTER(POINTER(DLManagedTensorVersioned))
SET_ERROR = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p)
ALLOCATOR = CFUNCTYPE(c_int, POINTER(DLTensor), MANAGED_OUT, c_void_p, SET_ERROR)
FROM_PY = PYFUNCTYPE(c_int, c_void_p, MANAGED_OUT)
TO_PY = PYFUNCTYPE(c_int, POINTER(DLManagedTensorVersioned), POINTER(c_void_p))
VIEW = PYFUNCTYPE(c_int, c_void_p, POINTER(DLTensor))
CURRENT_STREAM = CFUNCTYPE(c_int, c_int32, c_int32, POINTER(c_void_p))
# A producer's from_py implemented in Python, for forged tables.
FROM_PY_CALLBACK = CFUNCTYPE(c_int, c_void_p, MANAGED_OUT)


def table_address(cls):
    return _capsule_pointer(cls.__dlpack_c_exchange_api__, API_NAME.encode())


def table_of(cls):
    return DLPackExchangeAPI.from_address(table_address(cls))


DL_API = table_of(dl.Tensor)
allocator = ALLOCATOR(DL_API.managed_tensor_allocator)
from_py = FROM_PY(DL_API.managed_tensor_from_py_object_no_sync)
to_py = TO_PY(DL_API.managed_tensor_to_py_object_no_sync)
view = VIEW(DL_API.dltensor_from_py_object_no_sync)
current_stream = CURRENT_STREAM(DL_API.current_work_stream)


def dltensor_layout(dl_tensor):
    """(shape, strides) of a ctypes DLTensor; None for NULL arrays."""
    n = dl_tensor.ndim
    shape = tuple(dl_tensor.shape[:n]) if dl_tensor.shape else None
    strides = tuple(dl_tensor.strides[:n]) if dl_tensor.strides else None
    return shape, strides


def readonly_tensor():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    array.flags.writeable = False
    t = dl.from_dlpack(array)
    assert t.readonly
    return t


# Every forged table and managed tensor a test hands to dlinterop stays alive here: a
# producer's exchange table must outlive every import made through it.
_KEEP = []


class ManagedFactory:
    """Versioned managed tensors over ctypes float32 buffers; counts deleter calls."""

    def __init__(self, version=(1, 3)):
        self.version = version
        self.deleted = 0
        self.made = []
        self.deleter = DELETER_VERSIONED(self._delete)
        _KEEP.append(self)

    def _delete(self, _managed):
        self.deleted += 1

    def make(self):
        data = (c_float * 4)(1, 2, 3, 4)
        shape = (c_int64 * 1)(4)
        m = DLManagedTensorVersioned()
        m.version.major, m.version.minor = self.version
        m.deleter = self.deleter
        t = m.dl_tensor
        t.data = ctypes.addressof(data)
        t.device.device_type, t.device.device_id = CPU, 0
        t.ndim = 1
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.shape = ctypes.cast(shape, POINTER(c_int64))
        self.made.append((m, data, shape))
        return m


class ForgedTable:
    """A producer's exchange table built with ctypes; its from_py counts its calls and hands
    out a fresh managed tensor. Other functions are NULL unless given."""

    def __init__(self, version=(1, 3), *, from_py=True, name=API_NAME):
        self.calls = 0
        self.factory = ManagedFactory()
        self._callback = FROM_PY_CALLBACK(self._export)
        self.api = DLPackExchangeAPI()
        self.api.header.version.major, self.api.header.version.minor = version
        if from_py:
            self.api.managed_tensor_from_py_object_no_sync = ctypes.cast(
                self._callback, c_void_p
            ).value
        self.address = ctypes.addressof(self.api)
        self.capsule = make_capsule(self.address, name)
        _KEEP.append(self)

    def _export(self, _py_object, out):
        self.calls += 1
        out[0] = ctypes.pointer(self.factory.make())
        return 0

    def last_data(self):
        return ctypes.addressof(self.factory.made[-1][1])


def producer_type(**attributes):
    """A Python DLPack producer over a NumPy array that counts its __dlpack__ calls; the
    keyword arguments become class attributes (the exchange-table spellings)."""

    def __init__(self, array=None):
        self.array = np.arange(4, dtype=np.float32) if array is None else array

    def __dlpack__(self, **kwargs):
        type(self).dlpack_calls += 1
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (CPU, 0)

    namespace = {
        "__init__": __init__,
        "__dlpack__": __dlpack__,
        "__dlpack_device__": __dlpack_device__,
        "dlpack_calls": 0,
        **attributes,
    }
    cls = type("Producer", (), namespace)
    _KEEP.append(cls)
    return cls


# The allocations every allocator test makes (dlinterop's table and the C consumer's).
ALLOCATIONS = {
    "0-d float32": ((), (2, 32, 1)),
    "zero-size float32": ((3, 0, 2), (2, 32, 1)),
    "3-d float32": ((2, 3, 4), (2, 32, 1)),
    "int8": ((5, 7), (0, 8, 1)),
    "bfloat16": ((3, 5), (4, 16, 1)),
    "float4_e2m1fn_x2": ((3, 5), (17, 4, 2)),
    "complex128 1-d": ((9,), (5, 128, 1)),
}


# --------------------------------------------------------------------------------------
# The tables of dl.exchange_api_for, and what their views are checked against
# --------------------------------------------------------------------------------------


class ExchangeTable:
    """A table in a "dlpack_exchange_api" capsule (dl.exchange_api_for's), its functions as
    ctypes callables and the calls a test makes, checked to succeed."""

    def __init__(self, capsule):
        assert capsule_name(capsule) == API_NAME
        self.address = _capsule_pointer(capsule, API_NAME.encode())
        self.api = DLPackExchangeAPI.from_address(self.address)
        self.from_py = FROM_PY(self.api.managed_tensor_from_py_object_no_sync)
        self.to_py = TO_PY(self.api.managed_tensor_to_py_object_no_sync)
        self.view_of = VIEW(self.api.dltensor_from_py_object_no_sync)
        self.current_stream = CURRENT_STREAM(self.api.current_work_stream)

    def managed(self, obj):
        out = POINTER(DLManagedTensorVersioned)()
        assert self.from_py(id(obj), byref(out)) == 0
        return out

    def view(self, obj):
        out = DLTensor()
        assert self.view_of(id(obj), byref(out)) == 0
        return out

    def to_object(self, managed):
        out = c_void_p()
        assert self.to_py(managed, byref(out)) == 0
        return take_object(out.value)


def element_bytes(dl_tensor, itemsize, index):
    """The bytes of one element of a DLTensor, read at the address its strides give."""
    offset = sum(i * s for i, s in zip(index, dl_tensor.strides[: dl_tensor.ndim]))
    address = dl_tensor.data + dl_tensor.byte_offset + offset * itemsize
    return ctypes.string_at(address, itemsize)


DLPACK_CODES = {"b": 6, "i": 0, "u": 1, "f": 2, "c": 5}  # include/dlpack/dlpack.h


def assert_values(dl_tensor, values):
    """dl_tensor has the layout, dtype and every element of the array `values`."""
    assert dl_tensor.device.device_type == CPU
    assert bool(dl_tensor.shape) and bool(dl_tensor.strides), "shape and strides filled"
    shape, strides = dltensor_layout(dl_tensor)
    assert shape == values.shape
    assert len(strides) == values.ndim
    dtype = (dl_tensor.dtype.code, dl_tensor.dtype.bits, dl_tensor.dtype.lanes)
    assert dtype == (DLPACK_CODES[values.dtype.kind], 8 * values.itemsize, 1)
    for index in np.ndindex(*values.shape):
        assert element_bytes(dl_tensor, values.itemsize, index) == values[index].tobytes()


def assert_describes(dl_tensor, array):
    """dl_tensor is a view of `array`: same memory, strides, dtype and every element."""
    assert dl_tensor.data == array.ctypes.data
    assert_values(dl_tensor, array)
    assert dltensor_layout(dl_tensor)[1] == tuple(s // array.itemsize for s in array.strides)
