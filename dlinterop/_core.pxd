# The C-level ABI of dlinterop's core module. Every field and every cdef signature that
# another module (ours or a downstream extension) may use lives here; changing a class
# layout below is an ABI change that downstream extensions must be rebuilt for.
# dlinterop/tensor.pxd names what the same-build tier offers downstream (one release only).
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t

from dlinterop.dlpack cimport (
    DLPACK_FLAG_BITMASK_READ_ONLY, DLDataType, DLDevice, DLManagedTensor,
    DLManagedTensorVersioned, DLPackExchangeAPI, DLTensor,
)


cdef class DType:
    # Interned: one instance per (code, bits, lanes); compare with `is` inside the core.
    cdef DLDataType dl
    cdef readonly str name
    cdef readonly int itemsize    # bytes per element rounded up (1 for float6/float4)
    cdef const char* buffer_format  # struct-module format, NULL when none can express it


cdef class Device:
    cdef DLDevice dl


# The most dimensions whose shape and strides a Tensor keeps inline, without a malloc: 4,
# unless a test build shifted the layout (dlinterop/tensor_layout.h, under get_include()).
cdef extern from "dlinterop/tensor_layout.h":
    enum:
        INLINE_NDIM "DLINTEROP_INLINE_NDIM"


cdef class Tensor:
    # dl is the view every consumer sees. Its shape and strides always point at
    # shape_strides (ndim shape entries, then ndim strides in elements, never NULL when
    # ndim > 0), which is inline_storage up to INLINE_NDIM dimensions and malloc'd past it.
    cdef DLTensor dl
    cdef int64_t* shape_strides
    cdef int64_t inline_storage[2 * INLINE_NDIM]
    # Owned buffer, from dli_host_alloc or the CUDA layer (base pointer and size for the
    # free), or NULL.
    cdef void* alloc_base
    cdef size_t alloc_nbytes
    # Imported managed tensor, at most one of the two set; its deleter runs exactly once,
    # when this Tensor dies.
    cdef DLManagedTensorVersioned* managed_versioned
    cdef DLManagedTensor* managed_legacy
    # DLPACK_FLAG_BITMASK_READ_ONLY / IS_COPIED as they apply to this Tensor, and
    # dlinterop's own bits (below): 63, READ_ONLY was assumed for a legacy capsule (see
    # Tensor.readonly_reason); 62, the packed copy of padded sub-byte data.
    cdef uint64_t flags
    # The Python object keeping the memory alive (capsule, buffer holder, source Tensor),
    # or None for an owned buffer.
    cdef object owner_ref
    # weakref.ref(t) works (one pointer, cleared when the Tensor dies).
    cdef object __weakref__

    cdef DLTensor* dltensor(self) noexcept nogil


# dlinterop's own bits in Tensor.flags, beside DLPack's (never exported, and masked off
# producers' flags): READ_ONLY was assumed because a legacy capsule could not say; the
# Tensor is the packed copy dlinterop made of padded sub-byte data (copy=False refuses it).
cdef enum:
    FLAG_READ_ONLY_ASSUMED_BIT = 63
    FLAG_REPACKED_BIT = 62


cdef inline bint read_only_by_flag(Tensor t) noexcept:
    """Read-only because its producer said so (DLPack's READ_ONLY flag, a read-only buffer
    or array) or dlinterop made it so, not only assumed for a legacy capsule: such memory
    must never be handed out writable."""
    return (t.flags & (DLPACK_FLAG_BITMASK_READ_ONLY
                       | ((<uint64_t>1) << FLAG_READ_ONLY_ASSUMED_BIT))
            ) == DLPACK_FLAG_BITMASK_READ_ONLY


cdef DType dtype_from_dl(DLDataType dt)   # None when dlinterop has no DType for dt
cdef str dtype_text(DLDataType dt)         # its name, or "(code, bits, lanes)"; never None
cdef Device device_from_dl(DLDevice dev)

cdef Tensor empty_tensor(int ndim, const int64_t* shape, DLDataType dtype, DLDevice device)
cdef Tensor tensor_from_managed(DLManagedTensorVersioned* m, bint readonly)
cdef Tensor tensor_from_object(object obj)
# The capsule obj.__dlpack__ returns, imported: never through a table on obj's type (the
# exchange tables dlinterop may publish on a type import through this).
cdef Tensor tensor_from_producer(object obj)
cdef object to_capsule(Tensor t, bint versioned)

# Used by dlinterop.frameworks (the way out: outputs in the caller's framework); not part of
# the stable downstream API, which dlinterop/tensor.pxd and dlinterop/frameworks.pxd name.
cdef DLManagedTensorVersioned* to_managed(Tensor t) except NULL
cdef const DLPackExchangeAPI* exchange_api_of(type cls) except? NULL
cdef int order_for_consumer(Tensor t, const DLPackExchangeAPI* api) except -1
cdef int zero_fill(Tensor t) except -1
cdef int check_copy_arg(object copy) except -1
cdef DLDevice device_from_object(object device) except *
cdef int borrow_dltensor(object obj, DLTensor* out, bint sharing) except -1
cdef int raise_pending_error() except -1
cdef int64_t checked_nbytes(int ndim, const int64_t* shape, DLDataType dt,
                            DLDevice device) except -1
cdef object numpy_array_from(Tensor t)
# Shape then strides (2 * ndim values) kept at least as long as `owner`: interned for the
# process (one block per distinct layout), else a block of the owner's: the non-owning
# views of the exchange tables point into it.
cdef const int64_t* keep_layout(object owner, const int64_t* layout, int ndim) except NULL
cdef Tensor offset_in_pointer(Tensor t)
# Owning exports of another framework's object by an exchange table (the NumPy table's and
# dlinterop.frameworks' torch table): one block, the object referenced, and a deleter that
# takes any thread, with or without the GIL.
cdef DLManagedTensorVersioned* owned_export_block(PyObject* owner, int ndim) noexcept nogil
# PyTorch's native bit readers (core/torch_bits.pxi) for dlinterop.frameworks' exchange
# table: where the at::Tensor sits in torch.Tensor objects (below 0: not read natively) and
# the readers, as void pointers (bool f(const void*)).
cdef struct TorchNativeReads:
    Py_ssize_t offset
    void* is_neg
    void* is_conj
    void* requires_grad
cdef int torch_native_reads(TorchNativeReads* out) except -1
# BufferError for a PyTorch tensor whose memory must not be shared (requires grad, a lazily
# conjugated or negated view); 0 for any other.
cdef int refuse_torch_tensor(object tensor) except -1
# dl.from_dlpack's own body (device, copy and stream as it takes them): the stable ABI's
# from_dlpack entry (dlinterop._capi).
cdef Tensor _from_dlpack(object obj, object device, object copy, object stream)
