# The table of dlinterop/abi.h as dlinterop._capi fills it (the downstream surface is
# dlinterop/abi.pxd, which calls through it).
from cpython.object cimport PyTypeObject
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from dlinterop.dlpack cimport (
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPackExchangeAPI, DLTensor,
)
from dlinterop.abi cimport ArgSpec


# The types of the entries dlinterop._capi fills with the core's functions themselves
# (which return a Tensor: to C, the same PyObject*).
ctypedef object (*dli_make_fn)(object obj)
ctypedef object (*dli_managed_fn)(DLManagedTensorVersioned* managed, bint readonly)
ctypedef object (*dli_new_fn)(int32_t ndim, const int64_t* shape, DLDataType dtype,
                              DLDevice device)
ctypedef object (*dli_new_like_fn)(object like, int32_t ndim, const int64_t* shape,
                                   DLDataType dtype, DLDevice device)


cdef extern from "dlinterop/abi.h":
    const char* DLINTEROP_ABI_CAPSULE

    ctypedef struct DLInteropABI:
        uint32_t major
        uint32_t minor
        uint64_t size
        const char* version
        dli_make_fn tensor_from_object
        int (*is_tensor)(object obj) noexcept
        DLTensor* (*dltensor)(object tensor) except NULL
        dli_managed_fn tensor_from_managed
        object (*to_capsule)(object tensor, int versioned)
        dli_new_fn empty
        object (*borrow)(object obj, DLTensor* out, bint* readonly)
        int (*check_arg)(const DLTensor* dl, bint readonly, const char* name,
                         const ArgSpec* spec) except -1
        dli_new_like_fn empty_like
        dli_new_like_fn zeros_like
        object (*to_framework)(object tensor, object like)
        object (*dtype_object)(DLDataType dtype)
        int (*parse_dtype)(object obj, DLDataType* out) except -1
        object (*device_object)(DLDevice device)
        int (*parse_device)(object obj, DLDevice* out) except -1
        void* copy_error
        # 1.1
        object (*from_dlpack)(object obj, const DLDevice* device, int copy)
        int (*tensor_flags)(object tensor, uint64_t* flags) except -1
        const DLPackExchangeAPI* (*exchange_api_for)(PyTypeObject* type) except NULL


cdef extern from "abi_storage.h":
    ctypedef struct dli_abi_storage:
        DLInteropABI table
    void dli_abi_finish(dli_abi_storage* storage) noexcept nogil
