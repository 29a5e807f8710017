# cython: language_level=3, freethreading_compatible=True, auto_pickle=False
"""dlinterop's C door: the stable ABI's table, `abi_table`, a capsule holding the versioned
table of dlinterop/abi.h. C and C++ extensions include that header (under
dl.get_include()) and call DLInterop_Import(); Cython extensions cimport dlinterop.abi and
call import_dlinterop(). Either way every call goes through the table, so nothing they
compile in depends on the layout of dlinterop's objects (docs/cython.md).

The older `cdef api` functions (dlinterop/_capi_api.h, import_dlinterop___capi()) were retired
in 0.2.0: each has its entry in the table (docs/cython.md, "Plain C and C++")."""

from cpython.object cimport PyObject, PyTypeObject
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.type cimport PyType_Check
from libc.stdint cimport uint64_t

from dlinterop.dlpack cimport (
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_READ_ONLY, DLDataType, DLDevice,
    DLPackExchangeAPI, DLTensor,
)
from dlinterop._core cimport (
    DType, Tensor, _from_dlpack, device_from_object, empty_tensor, tensor_from_managed,
    tensor_from_object, to_capsule,
)
from dlinterop.abi cimport DLINTEROP_ABI_MAJOR, DLINTEROP_ABI_MINOR
from dlinterop._abi_table cimport (
    DLINTEROP_ABI_CAPSULE, DLInteropABI, dli_abi_finish, dli_abi_storage, dli_make_fn,
    dli_managed_fn, dli_new_fn, dli_new_like_fn,
)
from dlinterop._lib.threadsafe cimport type_version
from dlinterop._lib.type_cache cimport (
    dli_type_cache, type_cache_fetch, type_cache_forget, type_cache_last,
)
from dlinterop.frameworks cimport borrow, check_arg, empty_like_c, to_framework_c, zeros_like_c

from dlinterop import __version__
from dlinterop._core import CopyError, Device, dtype as _dtype, exchange_api_for


cdef inline Tensor _as_tensor(object obj):
    # Not <Tensor?>obj: that lets None through, and a C caller's None would then crash.
    if not isinstance(obj, Tensor):
        raise TypeError(f"expected a dlinterop Tensor, got {type(obj).__name__}")
    return <Tensor>obj


# The table is filled once, at import, and never changes.

cdef int _abi_is_tensor(object obj) noexcept:
    return isinstance(obj, Tensor)


cdef DLTensor* _abi_dltensor(object tensor) except NULL:
    return &_as_tensor(tensor).dl


cdef object _abi_to_capsule(object tensor, int versioned):
    return to_capsule(_as_tensor(tensor), versioned != 0)


cdef object _abi_dtype_object(DLDataType dtype):
    # dl.dtype((code, bits, lanes)): the DType, or ValueError for a triple with none.
    return _dtype((dtype.code, dtype.bits, dtype.lanes))


cdef int _abi_parse_dtype(object obj, DLDataType* out) except -1:
    cdef DType found = _dtype(obj)
    out[0] = found.dl
    return 0


cdef object _abi_device_object(DLDevice device):
    # dl.Device(type, index): ValueError for a type DLPack does not define or a negative
    # index, the devices no import would take.
    return Device(<int>device.device_type, device.device_id)


cdef int _abi_parse_device(object obj, DLDevice* out) except -1:
    out[0] = device_from_object(obj)
    return 0


cdef object _abi_from_dlpack(object obj, const DLDevice* device, int copy):
    if copy < -1 or copy > 1:
        raise ValueError(f"copy must be -1 (None), 0 (False) or 1 (True), got {copy}")
    return _from_dlpack(obj, None if device == NULL else _abi_device_object(device[0]),
                        None if copy < 0 else copy == 1, None)


cdef int _abi_tensor_flags(object tensor, uint64_t* flags) except -1:
    cdef Tensor t = _as_tensor(tensor)
    if flags == NULL:
        raise ValueError("tensor_flags needs somewhere to write the flags, got NULL")
    # DLPack's bits only: dlinterop keeps bits of its own in the high end of Tensor.flags.
    flags[0] = t.flags & (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED)
    return 0


# type -> the capsule of dl.exchange_api_for(type), without keeping the type alive
# (src/type_cache.h); the capsules are the core's, made once, and refer to no type.
cdef dli_type_cache _exchange_cache


def _forget_exchange_type(ref):
    """The weak-reference callback of the exchange-table cache: the type died."""
    type_cache_forget(&_exchange_cache, <PyObject*>ref)


cdef object _describe_exchange(type cls, unsigned int* tag):
    capsule = exchange_api_for(cls)
    getattr(cls, "__dlpack__", None)   # a type lookup assigns the version tag if it has none
    tag[0] = type_version(cls)
    return capsule


cdef const DLPackExchangeAPI* _abi_exchange_api_for(PyTypeObject* cls) except NULL:
    if cls == NULL or not PyType_Check(<object>cls):
        raise TypeError("exchange_api_for takes a type, got "
                        + ("NULL" if cls == NULL else type(<object>cls).__name__))
    cdef PyObject* last = type_cache_last(&_exchange_cache, <PyObject*>cls,
                                          type_version(<object>cls))
    if last != NULL:
        capsule = <object>last
    else:
        capsule = type_cache_fetch(&_exchange_cache, <type>cls, _describe_exchange,
                                   _forget_exchange_type)
    return <const DLPackExchangeAPI*>PyCapsule_GetPointer(capsule, "dlpack_exchange_api")


cdef bytes _version = __version__.encode()   # the table's version string points into it
cdef dli_abi_storage _storage
cdef DLInteropABI* _table = &_storage.table
_table.major = DLINTEROP_ABI_MAJOR
_table.minor = DLINTEROP_ABI_MINOR
_table.version = _version
# The entries whose code takes any object as it is are that code itself, no call between;
# those that need a Tensor are the wrappers above, which check the type (a TypeError, not
# a crash, for anything else). A Tensor is a PyObject* to C, whatever Cython calls it.
_table.tensor_from_object = <dli_make_fn>tensor_from_object
_table.is_tensor = _abi_is_tensor
_table.dltensor = _abi_dltensor
_table.tensor_from_managed = <dli_managed_fn>tensor_from_managed
_table.to_capsule = _abi_to_capsule
_table.empty = <dli_new_fn>empty_tensor
_table.borrow = borrow
_table.check_arg = check_arg
_table.empty_like = <dli_new_like_fn>empty_like_c
_table.zeros_like = <dli_new_like_fn>zeros_like_c
_table.to_framework = to_framework_c
_table.dtype_object = _abi_dtype_object
_table.parse_dtype = _abi_parse_dtype
_table.device_object = _abi_device_object
_table.parse_device = _abi_parse_device
_table.copy_error = <void*>CopyError   # the module holds CopyError (imported above)
_table.from_dlpack = _abi_from_dlpack
_table.tensor_flags = _abi_tensor_flags
_table.exchange_api_for = _abi_exchange_api_for
dli_abi_finish(&_storage)                # the size (and, in a test build, what it appends)

abi_table = PyCapsule_New(_table, DLINTEROP_ABI_CAPSULE, NULL)
"""The stable ABI's table (dlinterop/abi.h), for DLInterop_Import() and import_dlinterop()."""


def abi_version():
    """The (major, minor) version of the stable ABI's table this dlinterop publishes."""
    return (_table.major, _table.minor)
