# The table of dlinterop/abi.h as dlinterop._capi fills it (the downstream surface is
# dlinterop/abi.pxd, which calls through it).
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from dlinterop.dlpack cimport DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor
from dlinterop.abi cimport ArgSpec


cdef extern from "dlinterop/abi.h":
    const char* DLINTEROP_ABI_CAPSULE

    ctypedef struct DLInteropABI:
        uint32_t major
        uint32_t minor
        uint64_t size
        const char* version
        object (*tensor_from_object)(object obj)
        int (*is_tensor)(object obj) noexcept
        DLTensor* (*dltensor)(object tensor) except NULL
        object (*tensor_from_managed)(DLManagedTensorVersioned* managed, int readonly)
        object (*to_capsule)(object tensor, int versioned)
        object (*empty)(int32_t ndim, const int64_t* shape, DLDataType dtype, DLDevice device)
        object (*borrow)(object obj, DLTensor* out, int* readonly)
        int (*check_arg)(const DLTensor* dl, int readonly, const char* name,
                         const ArgSpec* spec) except -1
        object (*empty_like)(object like, int32_t ndim, const int64_t* shape, DLDataType dtype,
                             DLDevice device)
        object (*zeros_like)(object like, int32_t ndim, const int64_t* shape, DLDataType dtype,
                             DLDevice device)
        object (*to_framework)(object tensor, object like)
        object (*dtype_object)(DLDataType dtype)
        int (*parse_dtype)(object obj, DLDataType* out) except -1
        object (*device_object)(DLDevice device)
        int (*parse_device)(object obj, DLDevice* out) except -1
        void* copy_error


cdef extern from "abi_storage.h":
    ctypedef struct dli_abi_storage:
        DLInteropABI table
    void dli_abi_finish(dli_abi_storage* storage) noexcept nogil
