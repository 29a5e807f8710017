# The kernel author's way out, at C level (README "Cython API"): outputs allocated by the
# caller's framework and handed back as that framework's type, borrowed nogil views of
# inputs, and argument checks that name the argument.
#
#     from dlinterop.frameworks cimport ArgSpec, borrow, check_arg, empty_like_c, to_framework_c
#
# What this module uses of the core is declared in dlinterop/_core.pxd (to_managed,
# exchange_api_of, order_for_consumer, zero_fill, device_from_object, borrow_dltensor,
# tensor_from_managed, tensor_from_object, empty_tensor).
from libc.stdint cimport int64_t

from dlinterop.dlpack cimport DLDataType, DLDevice, DLTensor
from dlinterop._core cimport Tensor


# What check_arg requires of an argument. -1 in ndim, dtype_code or device_type leaves that
# property unchecked; dtype_bits is checked with dtype_code. Fill one with arg_spec().
ctypedef struct ArgSpec:
    int ndim
    int dtype_code
    int dtype_bits
    int device_type
    bint c_contiguous
    bint writable


cdef ArgSpec arg_spec() noexcept nogil

# Raises TypeError (dtype), ValueError (ndim, device, C-contiguity) or BufferError
# (writability), each naming the argument; 0 when `dl` meets `spec`. Needs the GIL only to
# raise.
cdef int check_arg(const DLTensor* dl, bint readonly, const char* name,
                   const ArgSpec* spec) except -1

# Fills `out` with a view of obj's tensor that needs no Tensor or capsule where obj's type
# publishes dltensor_from_py_object_no_sync (PyTorch; dl.Tensor itself), and through the
# ordinary import otherwise. Returns the object that keeps `out` valid: hold it (and obj)
# for as long as `out` is used, with or without the GIL. readonly[0] is set when the memory
# must not be written.
cdef object borrow(object obj, DLTensor* out, bint* readonly)

# A new C-contiguous Tensor allocated by like's framework where its type publishes
# managed_tensor_allocator (PyTorch: its caching allocator), else by dlinterop's allocator.
# `like` is an array of that framework (a type or a module name are not enough to allocate).
cdef Tensor empty_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device)
cdef Tensor zeros_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device)

# An object of like's framework sharing t's memory (see dl.to_framework).
cdef object to_framework_c(Tensor t, object like)
