# cython: language_level=3, freethreading_compatible=True, auto_pickle=False
"""The C API of dlinterop: dlinterop.tensor's entry points as `cdef api` functions, for
plain C/C++ extensions. Cython writes their declarations to dlinterop/_capi_api.h, which
the build installs under dl.get_include(). A C extension includes dlpack/dlpack.h and then
that header, and calls import_dlinterop___capi() once (in its module init) before any
dlinterop_* function. Cython code cimports dlinterop.tensor instead.

Every function needs the GIL and follows the CPython convention: NULL (or -1) with an
exception set on failure. Tensors cross as plain PyObject*; a returned object is a new
reference."""

from libc.stdint cimport int64_t

from dlinterop.dlpack cimport DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor
from dlinterop.tensor cimport (
    Tensor, empty_tensor, tensor_from_managed, tensor_from_object, to_capsule,
)


cdef inline Tensor _as_tensor(object obj):
    # Not <Tensor?>obj: that lets None through, and a C caller's None would then crash.
    if not isinstance(obj, Tensor):
        raise TypeError(f"expected a dlinterop Tensor, got {type(obj).__name__}")
    return <Tensor>obj


cdef api DLTensor* dlinterop_dltensor(object tensor) except NULL:
    """The Tensor's DLTensor, borrowed: valid while `tensor` lives. TypeError for anything
    that is not a dlinterop Tensor."""
    return _as_tensor(tensor).dltensor()


cdef api int dlinterop_is_tensor(object obj) noexcept:
    """1 when `obj` is a dlinterop Tensor (or a subclass), else 0; never fails."""
    return isinstance(obj, Tensor)


cdef api object dlinterop_tensor_from_object(object obj):
    """dl.from_dlpack(obj): a Tensor sharing the memory of a capsule or a __dlpack__ object."""
    return tensor_from_object(obj)


cdef api object dlinterop_tensor_from_managed(DLManagedTensorVersioned* managed, int readonly):
    """A Tensor that owns `managed` and calls its deleter once when it dies. Ownership moves
    even on failure: the deleter has already run when NULL is returned."""
    return tensor_from_managed(managed, readonly)


cdef api object dlinterop_to_capsule(object tensor, int versioned):
    """A "dltensor_versioned" (versioned != 0) or "dltensor" capsule sharing the memory of
    `tensor`, which must be a dlinterop Tensor."""
    return to_capsule(_as_tensor(tensor), versioned)


cdef api object dlinterop_empty_tensor(int ndim, const int64_t* shape, DLDataType dtype,
                                       DLDevice device):
    """A new owned, C-contiguous, uninitialised Tensor (256-byte aligned)."""
    return empty_tensor(ndim, shape, dtype, device)
