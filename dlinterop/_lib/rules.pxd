# Small rules that dlinterop's core and dlinterop.frameworks both apply (_cuda: MAX_NDIM),
# each written once. Inline: compiled into each module that cimports this file; no module of
# its own (as threadsafe.pxd). Rules only the core applies, with their messages, live in the
# core (the copy= rule in placement.pxi, the legacy read-only refusal in export.pxi).
from cpython.number cimport PyNumber_Index
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t

from dlinterop.dlpack cimport DLDataType, DLDevice, DLTensor


cdef extern from "runtime.h":
    # The most dimensions dlinterop handles (DLI_MAX_NDIM, shared with the C runtime and
    # the CUDA layer): DLPack sets no limit; this bounds stack arrays and rejects garbage.
    enum: MAX_NDIM "DLI_MAX_NDIM"


cdef inline int refuse_ndim(Py_ssize_t ndim, object error) except -1:
    """The one refusal of a tensor with more dimensions than MAX_NDIM (or fewer than 0), as
    `error` (ValueError for a shape asked for, BufferError for memory offered, IndexError
    for an index)."""
    if ndim < 0:
        raise error(f"a tensor cannot have {ndim} dimensions")
    raise error(f"a tensor has at most {MAX_NDIM} dimensions, got {ndim}")


cdef inline bint same_device(DLDevice a, DLDevice b) noexcept nogil:
    return a.device_type == b.device_type and a.device_id == b.device_id


cdef inline int64_t element_count_of(int ndim, const int64_t* shape) noexcept nogil:
    """The product of a valid shape."""
    cdef int64_t n = 1
    cdef int i
    for i in range(ndim):
        n *= shape[i]
    return n


cdef inline int64_t element_count(const DLTensor* dl) noexcept nogil:
    """The product of a valid DLTensor's shape."""
    return element_count_of(dl.ndim, dl.shape)


cdef extern from "dtype_bits.h":
    # Bits to bytes, said once for the C files and the Cython modules (by a shift, in C: no
    # sign test on every import, where item_bytes is in the DLTensor check).
    int64_t dli_bytes_of_bits(int64_t bits) noexcept nogil
    int64_t dli_item_bytes(DLDataType dt) noexcept nogil


cdef inline int64_t item_bytes(DLDataType dt) noexcept nogil:
    """Bytes one element takes, rounded up: 1 for the packed sub-byte types (which share
    bytes: storage_bytes counts those)."""
    return dli_item_bytes(dt)


cdef inline int64_t storage_bytes(int64_t count, DLDataType dt) noexcept nogil:
    """Bytes `count` elements take: packed sub-byte data takes ceil(count * bits * lanes / 8)."""
    return dli_bytes_of_bits(count * dt.bits * dt.lanes)


cdef inline bint is_c_contiguous(const DLTensor* dl) noexcept nogil:
    """Elements in C order (NULL strides mean C order; a zero-size tensor always is)."""
    cdef int64_t expected = 1
    cdef int i
    if dl.strides == NULL:
        return True
    for i in range(dl.ndim):
        if dl.shape[i] == 0:
            return True
    for i in range(dl.ndim - 1, -1, -1):
        if dl.shape[i] != 1 and dl.strides[i] != expected:
            return False
        expected *= dl.shape[i]
    return True


cdef inline int dims_from_python(object shape, int64_t* dims, bint exact) except -1:
    """Fills `dims` (room for MAX_NDIM) from a shape and returns its ndim: an int or a
    sequence of ints (anything with __index__: NumPy integers), or with `exact` a tuple of
    ints only (a pickle's state). The values themselves are checked where the size is
    computed (allocator.pxi's _buffer_size)."""
    cdef Py_ssize_t ndim, i
    if exact:
        if type(shape) is not tuple or not all([type(d) is int for d in shape]):
            raise TypeError(f"shape must be a tuple of ints, got {shape!r}")
    else:
        if isinstance(shape, int):
            shape = (shape,)
        elif hasattr(type(shape), "__index__"):
            # One int-like (np.int64(3)), as NumPy takes it; an array-like that only
            # converts when it holds one element is read as a sequence instead.
            try:
                shape = (PyNumber_Index(shape),)
            except TypeError:
                pass
        try:
            shape = tuple([PyNumber_Index(d) for d in shape])
        except TypeError:
            raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    ndim = len(shape)
    if ndim > MAX_NDIM:
        refuse_ndim(ndim, ValueError)
    for i in range(ndim):
        if not (INT64_MIN <= shape[i] <= INT64_MAX):
            raise ValueError(f"dimension {shape[i]} is out of range")
        dims[i] = shape[i]
    return <int>ndim
