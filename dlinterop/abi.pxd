# dlinterop's stable ABI for downstream Cython code (docs/cython.md, "The stable ABI").
#     from dlinterop.abi cimport import_dlinterop, tensor_from_object, dltensor, ...
#     import_dlinterop()      # once, at module level
# Every call goes through the versioned table of dlinterop/abi.h (under
# dlinterop.get_include()), so nothing compiled in depends on the layout of dlinterop's
# objects: an extension built on this needs no rebuild when dlinterop is upgraded, and can
# be an abi3 wheel. Tensors are plain objects here; their DLTensor comes from dltensor().
from cpython.object cimport PyTypeObject
from libc.stdint cimport int32_t, int64_t, uint64_t

from dlinterop.dlpack cimport (
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPackExchangeAPI, DLTensor,
)


cdef extern from "dlinterop/abi.h":
    enum:
        DLINTEROP_ABI_MAJOR
        DLINTEROP_ABI_MINOR
        DLINTEROP_TARGET_MINOR

    # What check_arg checks: -1 (0 for the two flags) leaves a property unchecked.
    ctypedef struct ArgSpec "DLInteropArgSpec":
        int32_t ndim
        int32_t dtype_code
        int32_t dtype_bits
        int32_t device_type
        int32_t c_contiguous
        int32_t writable

    # Imports and checks the installed dlinterop's table: ImportError naming both versions
    # when it is of another major version or older than this extension targets.
    int import_dlinterop "DLInterop_Import"() except -1

    # dl.from_dlpack(obj): a Tensor sharing the memory of a capsule or __dlpack__ object.
    object tensor_from_object "DLInterop_TensorFromObject"(object obj)
    # 1 for a dlinterop Tensor (or a subclass), else 0.
    int is_tensor "DLInterop_IsTensor"(object obj) except -1
    # The Tensor's DLTensor, borrowed: valid while the Tensor lives (strides always filled).
    DLTensor* dltensor "DLInterop_DLTensor"(object tensor) except NULL
    # A Tensor owning `managed`: its deleter runs once, when the Tensor dies (already run
    # when this raises).
    object tensor_from_managed "DLInterop_TensorFromManaged"(
        DLManagedTensorVersioned* managed, bint readonly)
    # A "dltensor_versioned" or "dltensor" capsule sharing the Tensor.
    object to_capsule "DLInterop_ToCapsule"(object tensor, bint versioned)
    # A new owned, C-contiguous, uninitialised Tensor, 256-byte aligned.
    object empty_tensor "DLInterop_Empty"(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                          DLDevice device)

    # The way out (dlinterop.frameworks): a view of any framework's tensor in *out, the
    # returned object keeping it valid; the argument check; outputs from the caller's
    # framework's allocator; the result as the caller's type.
    object borrow "DLInterop_Borrow"(object obj, DLTensor* out, bint* readonly)
    ArgSpec arg_spec "DLInterop_ArgSpec"() noexcept nogil
    int check_arg "DLInterop_CheckArg"(const DLTensor* dl, bint readonly, const char* name,
                                       const ArgSpec* spec) except -1
    object empty_like "DLInterop_EmptyLike"(object like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device)
    object zeros_like "DLInterop_ZerosLike"(object like, int32_t ndim, const int64_t* shape,
                                            DLDataType dtype, DLDevice device)
    object to_framework "DLInterop_ToFramework"(object tensor, object like)

    # Data types and devices: dl.DType / dl.Device objects, and parsing what dl.dtype()
    # and a device= argument take.
    object dtype_object "DLInterop_DTypeObject"(DLDataType dtype)
    int parse_dtype "DLInterop_ParseDType"(object obj, DLDataType* out) except -1
    object device_object "DLInterop_DeviceObject"(DLDevice device)
    int parse_device "DLInterop_ParseDevice"(object obj, DLDevice* out) except -1

    # dl.CopyError, the exception for a copy that copy=False forbids.
    object copy_error "DLInterop_CopyError"()

    # The minor version of the installed table.
    int abi_minor "DLInterop_ABIMinor"() except -1

    # -- 1.1: declared by dlinterop/abi.h only for DLINTEROP_TARGET_MINOR >= 1 (or with
    # DLINTEROP_ALLOW_NEWER_ENTRIES, raising NotImplementedError on an older table): a
    # module that calls one with a lower target does not compile.
    # dl.from_dlpack(obj, device=device[0] or None when NULL, copy=None/False/True for
    # copy -1/0/1).
    object from_dlpack "DLInterop_FromDLPack"(object obj, const DLDevice* device, int copy)
    # The DLPack flags (READ_ONLY, IS_COPIED) that apply to the Tensor's memory.
    int tensor_flags "DLInterop_TensorFlags"(object tensor, uint64_t* flags) except -1
    # The DLPack 1.3 exchange table for objects of `cls` (dl.exchange_api_for's), borrowed
    # for the process and cached per type: pass <PyTypeObject*>type(obj). TypeError for a
    # type whose objects have no __dlpack__.
    const DLPackExchangeAPI* exchange_api_for "DLInterop_ExchangeAPIFor"(
        PyTypeObject* cls) except NULL
