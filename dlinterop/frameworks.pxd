# The kernel author's way out, at C level (docs/cython.md): outputs allocated by the
# caller's framework and handed back as that framework's type, borrowed nogil views of
# inputs, and argument checks that name the argument.
#
#     from dlinterop.frameworks cimport ArgSpec, borrow, check_arg, empty_like_c, to_framework_c
#
# What this module uses of the core, all declared in dlinterop/_core.pxd: the classes DType,
# Device and Tensor; borrow_dltensor, check_copy_arg, checked_nbytes, device_from_dl,
# device_from_object, dtype_text, empty_tensor, exchange_api_of, numpy_array_from,
# offset_in_pointer, order_for_consumer, raise_pending_error, read_only_by_flag,
# tensor_from_managed, tensor_from_object, to_managed and zero_fill; and the shared rules of
# dlinterop/_lib/rules.pxd (MAX_NDIM, dims_from_python, is_c_contiguous), the reads of
# dlinterop/_lib/threadsafe.pxd (dict_get, type_version) and the per-type cache of
# dlinterop/_lib/type_cache.pxd.
from libc.stdint cimport int64_t

# A module built on this file runs only with the dlinterop release it was built against.
cimport dlinterop._same_build

from dlinterop.dlpack cimport DLDataType, DLDevice, DLTensor
from dlinterop._core cimport Tensor


# What check_arg requires of an argument: the stable ABI's struct (dlinterop/abi.h), so
# that check_arg is the ABI table's entry as it is. -1 in ndim, dtype_code, dtype_bits or
# device_type leaves that property unchecked (dtype_code alone: any width of that type code;
# dtype_bits alone: any type of that width); c_contiguous and writable (ints) are asked when
# non-zero. Fill one with arg_spec(), which checks nothing.
from dlinterop.abi cimport ArgSpec


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

# An object of like's framework sharing the Tensor's memory (see dl.to_framework);
# BufferError for a Tensor that is read-only by flag where that framework cannot hold
# read-only memory (PyTorch, CuPy, any exchange-table hand-back); TypeError for a `tensor`
# that is no dlinterop Tensor (this is also the stable ABI's entry, dlinterop/abi.h).
cdef object to_framework_c(object tensor, object like)
