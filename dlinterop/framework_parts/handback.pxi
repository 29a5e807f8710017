# Provides: handing a Tensor back as the caller's type: to_framework_c (the C level) and
# to_framework (copy= checked by the core's rule; copy=False refused where the framework
# would need a copy).
# Uses: adapters.pxi (_Adapter, _resolve).

cdef object _through_table(Tensor t, const DLPackExchangeAPI* api):
    cdef DLManagedTensorVersioned* m
    cdef void* out = NULL
    order_for_consumer(t, api)
    m = to_managed(t)
    # The table steals m, on failure too.
    if api.managed_tensor_to_py_object_no_sync(m, &out) != 0 or out == NULL:
        if PyErr_Occurred() != NULL:
            raise_pending_error()
        raise RuntimeError("the framework's DLPack exchange table failed without saying why")
    result = <object>out
    Py_DECREF(result)   # <object> took a new reference; the table's is the one we keep
    return result


cdef int _refuse_read_only(Tensor t, _Adapter a) except -1:
    raise BufferError(f"the tensor is read-only and {a.name} cannot hold read-only memory: "
                      "it would be handed over writable; pass copy=True for a writable copy")


cdef bint _has_negative_stride(Tensor t) noexcept:
    cdef int i
    for i in range(t.dl.ndim):
        if t.dl.strides[i] < 0 and t.dl.shape[i] > 1:
            return True
    return False


cdef str _copy_needed(Tensor t, _Adapter a):
    """Why `a`'s framework cannot take t's memory as it is (it takes a copy), or None."""
    if a.always_copies:
        return "copies whatever it imports"
    if a.no_negative_strides and _has_negative_stride(t):
        return "cannot hold negative strides"
    if a.contiguous_only and not is_c_contiguous(&t.dl):
        return "takes C-contiguous data only"
    return None


cdef object to_framework_c(object tensor, object like):
    # Any object: C callers of the stable ABI's entry (this function) hold whatever they hold.
    if type(tensor) is not Tensor and not isinstance(tensor, Tensor):
        raise TypeError(f"expected a dlinterop Tensor, got {type(tensor).__name__}")
    cdef Tensor t = <Tensor>tensor
    cdef const DLPackExchangeAPI* api = NULL
    cdef _Adapter a = _resolve(like)
    cdef object table_type
    if a.identity:
        return t
    if (a.no_negative_strides and _has_negative_stride(t)) or (
            a.contiguous_only and not is_c_contiguous(&t.dl)):
        t = t.copy()
    if a.ignores_byte_offset:
        t = offset_in_pointer(t)
    # NumPy first: the core's own hand-back is probed equal to np.from_dlpack and costs
    # less than any table call (and ndarray publishes no table today, so looking one up
    # first would be a wasted cache probe on every call).
    if a.numpy_native:
        result = numpy_array_from(t)
        if result is not None:
            return result
    if a.table_is_key:
        table_type = like if isinstance(like, type) else type(like)
    else:
        table_type = a.table_type
    if table_type is not None:
        api = exchange_api_of(<type>table_type)
        if api != NULL and api.managed_tensor_to_py_object_no_sync != NULL:
            if read_only_by_flag(t) and not a.table_keeps_read_only:
                _refuse_read_only(t, a)
            return _through_table(t, api)
    if a.drops_read_only and read_only_by_flag(t):
        _refuse_read_only(t, a)
    return a.from_dlpack(t)


def to_framework(t, like, *, copy=None):
    """An object of like's framework sharing t's memory. `like` is an array of that
    framework, its type, the framework's module or its name ("torch", "numpy", "jax",
    "cupy", "pyarrow", "cuda.core", "mlx", "warp", ...). Where the type publishes the DLPack
    C exchange API (PyTorch, cuda.core's StridedMemoryView) the hand-back is a C call
    (managed_tensor_to_py_object_no_sync); for NumPy the core makes the ndarray through
    NumPy's C API, as np.from_dlpack(t) would but with t itself as its base; otherwise that
    framework's from_dlpack(t), looked up once (pa.Array.from_dlpack, or pa.Tensor's for
    like=pa.Tensor; for MLX mx.array(t, dtype=t's dtype), since mx.from_dlpack narrows
    float64 to float32). `t` may be anything dl.from_dlpack takes.

    A Tensor that is read-only by flag is never handed over writable: NumPy, JAX, pyarrow
    and cuda.core receive it read-only; frameworks that have no read-only arrays (PyTorch,
    CuPy, Warp) get BufferError. A Tensor with negative strides reaches PyTorch, pyarrow and
    MLX, which cannot import them, as a C-contiguous copy, as does any non-contiguous one
    for pa.Array (copy=False: CopyError, a BufferError; MLX copies whatever it imports, so
    for it copy=False always is). Warp, whose import ignores DLPack's byte_offset, gets a
    view whose data pointer holds the offset. copy=True hands back a new writable copy
    instead (always a copy, as elsewhere)."""
    check_copy_arg(copy)
    cdef Tensor tensor = t if type(t) is Tensor else tensor_from_object(t)
    if copy is True:
        tensor = tensor.copy()
    elif copy is False:
        why = _copy_needed(tensor, _resolve(like))
        if why is not None:
            raise CopyError(f"{_resolve(like).name} {why}, so it takes a copy of this "
                            "tensor, and copy=False forbids one")
    return to_framework_c(tensor, like)
