# Provides: outputs allocated by the caller's framework, through its exchange table's
# allocator where its type publishes one: empty_like_c and zeros_like_c (the C level),
# empty_like and zeros_like.
# Uses: borrow.pxi (the layout of `like`).

ctypedef struct _AllocError:
    char kind[64]
    char message[512]
    bint set


cdef void _set_alloc_error(void* ctx, const char* kind, const char* message) noexcept nogil:
    cdef _AllocError* error = <_AllocError*>ctx
    if kind == NULL:
        kind = "RuntimeError"
    if message == NULL:
        message = ""
    strncpy(error.kind, kind, 63)
    error.kind[63] = 0
    strncpy(error.message, message, 511)
    error.message[511] = 0
    error.set = True


cdef dict _ERROR_KINDS = {
    "MemoryError": MemoryError, "ValueError": ValueError, "TypeError": TypeError,
    "RuntimeError": RuntimeError, "BufferError": BufferError,
    "NotImplementedError": NotImplementedError, "OverflowError": OverflowError,
}


cdef Tensor empty_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device):
    cdef const DLPackExchangeAPI* api = NULL
    cdef DLTensor prototype
    cdef DLManagedTensorVersioned* m = NULL
    cdef _AllocError error
    cdef type cls = type(like)
    checked_nbytes(ndim, shape, dtype, device)
    if cls is not Tensor:
        api = exchange_api_of(cls)
    if api == NULL or api.managed_tensor_allocator == NULL:
        return empty_tensor(ndim, shape, dtype, device)
    prototype.data = NULL
    prototype.device = device
    prototype.ndim = ndim
    prototype.dtype = dtype
    prototype.shape = <int64_t*>shape
    prototype.strides = NULL
    prototype.byte_offset = 0
    error.set = False
    if api.managed_tensor_allocator(&prototype, &m, &error, _set_alloc_error) != 0 or m == NULL:
        if PyErr_Occurred() != NULL:
            # A table whose allocator is there only to say "not supported" (cuda.core's
            # StridedMemoryView, which views memory and owns none): dlinterop's allocator.
            if PyErr_ExceptionMatches(NotImplementedError):
                PyErr_Clear()
                return empty_tensor(ndim, shape, dtype, device)
            raise_pending_error()
        if error.set:
            kind = (<bytes>error.kind).decode(errors="replace")
            message = (<bytes>error.message).decode(errors="replace")
            raise _ERROR_KINDS.get(kind, RuntimeError)(
                message if kind in _ERROR_KINDS else f"{kind}: {message}")
        raise RuntimeError(f"{cls.__name__}'s DLPack allocator failed without saying why")
    return tensor_from_managed(m, False)


cdef Tensor zeros_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device):
    cdef Tensor t = empty_like_c(like, ndim, shape, dtype, device)
    zero_fill(t)
    return t


cdef Tensor _like(object x, object shape, object dtype, object device, bint zero):
    cdef DLTensor view
    cdef bint readonly = False
    cdef int64_t dims[MAX_NDIM]
    cdef int ndim
    cdef Py_ssize_t i
    cdef DLDataType dt
    cdef DLDevice dev
    cdef DType parsed
    keeper = _borrow(x, &view, &readonly, False)
    if shape is None:
        ndim = view.ndim
        for i in range(ndim):
            dims[i] = view.shape[i]
    else:
        ndim = dims_from_python(shape, dims, False)
    if dtype is None:
        dt = view.dtype
    else:
        parsed = _core.dtype(dtype)
        dt = parsed.dl
    dev = view.device if device is None else device_from_object(device)
    if zero:
        return zeros_like_c(x, ndim, dims, dt, dev)
    return empty_like_c(x, ndim, dims, dt, dev)


def empty_like(x, *, shape=None, dtype=None, device=None):
    """A new uninitialised, C-contiguous dl.Tensor shaped like `x` (or `shape`), of x's dtype
    (or `dtype`), on x's device (or `device`). Its memory comes from x's framework where x's
    type publishes the DLPack C exchange API (PyTorch: its caching allocator on CUDA), else
    from dlinterop's allocator. Hand it back with to_framework(t, like=x)."""
    return _like(x, shape, dtype, device, False)


def zeros_like(x, *, shape=None, dtype=None, device=None):
    """empty_like, filled with zeros."""
    return _like(x, shape, dtype, device, True)
