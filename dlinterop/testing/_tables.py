"""The C exchange table (include/dlpack/dlpack.h's DLPackExchangeAPI) in ctypes, for the
rules on exchange tables (dlinterop.testing._table_rules): its structs, its functions as
ctypes callables, and managed tensors forged with a deleter that counts its calls.

Functions that touch Python objects are called through PYFUNCTYPE (the GIL held, an
exception the callee leaves set raised by ctypes, as a C consumer finds it with
PyErr_Occurred); the allocator and the stream query, pure C, through CFUNCTYPE."""

import ctypes
from ctypes import (
    CFUNCTYPE,
    POINTER,
    PYFUNCTYPE,
    Structure,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
    py_object,
)

API_NAME = "dlpack_exchange_api"
CPU = 1
DLPACK_MAJOR_VERSION = 1
FIRST_MINOR = 3  # the DLPack release that introduced the exchange table


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensorVersioned(Structure):
    pass


DELETER = CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]


class DLPackExchangeAPIHeader(Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [
    ("version", DLPackVersion),
    ("prev_api", POINTER(DLPackExchangeAPIHeader)),
]


class DLPackExchangeAPI(Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", c_void_p),
        ("managed_tensor_from_py_object_no_sync", c_void_p),
        ("managed_tensor_to_py_object_no_sync", c_void_p),
        ("dltensor_from_py_object_no_sync", c_void_p),
        ("current_work_stream", c_void_p),
    ]


FUNCTIONS = [field[0] for field in DLPackExchangeAPI._fields_[1:]]
MANAGED_OUT = POINTER(POINTER(DLManagedTensorVersioned))
SET_ERROR = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p)
ALLOCATOR = CFUNCTYPE(c_int, POINTER(DLTensor), MANAGED_OUT, c_void_p, SET_ERROR)
FROM_PY = PYFUNCTYPE(c_int, c_void_p, MANAGED_OUT)
TO_PY = PYFUNCTYPE(c_int, POINTER(DLManagedTensorVersioned), POINTER(c_void_p))
VIEW = PYFUNCTYPE(c_int, c_void_p, POINTER(DLTensor))
CURRENT_STREAM = CFUNCTYPE(c_int, c_int32, c_int32, POINTER(c_void_p))
PROTOTYPES = dict(zip(FUNCTIONS, (ALLOCATOR, FROM_PY, TO_PY, VIEW, CURRENT_STREAM)))

# Private function objects: no one else's argtypes on ctypes.pythonapi matter.
_capsule_pointer = PYFUNCTYPE(c_void_p, py_object, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_py_decref = PYFUNCTYPE(None, c_void_p)(("Py_DecRef", ctypes.pythonapi))


class Table:
    """The table in a "dlpack_exchange_api" capsule; function(name) its function as a ctypes
    callable, or None where the pointer is NULL."""

    def __init__(self, capsule):
        self.capsule = capsule  # keeps the table alive
        self.address = _capsule_pointer(capsule, API_NAME.encode())
        self.api = DLPackExchangeAPI.from_address(self.address)

    def function(self, name):
        pointer = getattr(self.api, name)
        return PROTOTYPES[name](pointer) if pointer else None


def take_object(address):
    """The object behind a new reference returned as a void*, owning that reference."""
    obj = ctypes.cast(address, py_object).value
    _py_decref(address)
    return obj


def delete(managed):
    """Calls a managed tensor's deleter (a NULL deleter: nothing to call)."""
    if managed and managed.contents.deleter:
        managed.contents.deleter(managed)


class CountedTensor:
    """A versioned managed tensor over four float32 values whose deleter counts its calls;
    everything it points to lives as long as this object."""

    def __init__(self, device_type=CPU):
        self.deleted = 0
        self.data = (c_float * 4)(1, 2, 3, 4)
        self.shape = (c_int64 * 1)(4)
        self.deleter = DELETER(self._delete)
        m = self.managed = DLManagedTensorVersioned()
        m.version.major, m.version.minor = DLPACK_MAJOR_VERSION, FIRST_MINOR
        m.deleter = self.deleter
        t = m.dl_tensor
        t.data = ctypes.addressof(self.data)
        t.device.device_type, t.device.device_id = device_type, 0
        t.ndim = 1
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.shape = ctypes.cast(self.shape, POINTER(c_int64))

    def _delete(self, _managed):
        self.deleted += 1

    def pointer(self):
        return ctypes.pointer(self.managed)
