# Provides: the exchange table for jax.Array objects (dl.exchange_api_for(jax.Array)): a
# non-owning view read from the array itself, no __dlpack__ call; the owned tensor through
# JAX's __dlpack__. The way back is the generic table's (a dl.Tensor): JAX's from_dlpack
# copies memory it cannot take in place (unaligned, read-only), and a jax.Array made so
# could not own the tensor it was given.
# Uses: nothing (of the core: keep_layout, tensor_from_producer, to_managed and
# tensor_from_managed, cimported by frameworks.pyx).

# Per JAX dtype (a NumPy dtype, ml_dtypes' included): DLPack's type, or None where JAX's
# __dlpack__ has none (its sub-byte types: XLA's S4 and friends). Read under the GIL or a
# free-threaded build's dict lock; a type is described once, the same by any thread.
cdef dict _jax_dtypes = {}


cdef DLDataType _jax_dl_dtype(object array) except *:
    cdef DType dt
    cdef DLDataType none
    jax_dtype = array.dtype
    found = dict_get(_jax_dtypes, jax_dtype)
    if found is None:
        try:
            dt = _core.dtype(jax_dtype)
        except (TypeError, ValueError):
            found = False
        else:
            found = False
            if dt.dl.bits >= 8 and dt.dl.lanes == 1:
                found = (int(dt.dl.code), int(dt.dl.bits))
        _jax_dtypes[jax_dtype] = found
    if found is False:
        raise BufferError(f"dlinterop's exchange table for jax.Array has no DLPack type for "
                          f"{jax_dtype} (JAX's __dlpack__ has none either)")
    none.code, none.bits = found
    none.lanes = 1
    return none


cdef int _jax_view(void* py_object, DLTensor* out) except -1:
    """A non-owning view of a single-device jax.Array, valid while it lives (JAX arrays are
    immutable: their buffer does not move), strides always filled (JAX's arrays are
    row-major). Waits for the array's value, as JAX's own __dlpack__ does."""
    cdef int64_t layout[2 * MAX_NDIM]
    cdef int ndim, i
    cdef int64_t step = 1
    array = <object>py_object
    _check_jax_array(array)
    # Per sharding, the device JAX's __dlpack_device__ names (it refuses arrays on several
    # devices itself): asking it costs more than the rest of the view.
    sharding = array.sharding
    device = dict_get(_jax_devices, sharding)
    if device is None:
        device = tuple(int(value) for value in array.__dlpack_device__())
        _jax_devices[sharding] = device
    device_type, device_id = device
    out.dtype = _jax_dl_dtype(array)
    shape = array.shape
    ndim = len(shape)
    if ndim > MAX_NDIM:
        raise BufferError(f"a jax.Array of {ndim} dimensions: dlinterop takes {MAX_NDIM}")
    for i in range(ndim - 1, -1, -1):
        layout[i] = shape[i]
        layout[ndim + i] = step
        step *= shape[i] if shape[i] > 1 else 1
    array.block_until_ready()
    out.data = <void*><uintptr_t>array.unsafe_buffer_pointer()
    out.device.device_type = <DLDeviceType>device_type
    out.device.device_id = device_id
    out.ndim = ndim
    out.byte_offset = 0
    kept = keep_layout(array, layout, ndim)
    out.shape = <int64_t*>kept
    out.strides = <int64_t*>kept + ndim
    return 0


cdef int _jax_to_managed(void* py_object, DLManagedTensorVersioned** out) except -1:
    """Owning export through JAX's __dlpack__ (read-only: JAX arrays are immutable)."""
    array = <object>py_object
    _check_jax_array(array)
    out[0] = to_managed(tensor_from_producer(array))
    out[0].flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    return 0


# The concrete jax.Array type seen last (jaxlib's ArrayImpl): an isinstance check against
# the abstract jax.Array costs a quarter of a microsecond.
cdef object _jax_concrete = None
# sharding -> (device type, device id) of the arrays that have it.
cdef dict _jax_devices = {}


cdef int _check_jax_array(object array) except -1:
    global _jax_concrete
    cls = type(array)
    if cls is _jax_concrete:
        return 0
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(array, jax.Array):
        raise TypeError("dlinterop's exchange table for jax.Array takes jax.Array objects, "
                        f"got {cls.__name__}")
    _jax_concrete = cls
    return 0


cdef DLPackExchangeAPI _jax_exchange_api
cdef object _jax_table = None


def _jax_exchange_table(generic):
    """The exchange table for jax.Array objects (dl.exchange_api_for asks for it once JAX is
    imported); `generic` is the core's generic table, whose allocator, stream and way back
    (a dl.Tensor) this one shares."""
    global _jax_table, _jax_exchange_api
    with _tables_lock:
        if _jax_table is not None:
            return _jax_table
        base = <const DLPackExchangeAPI*>PyCapsule_GetPointer(generic, b"dlpack_exchange_api")
        _jax_exchange_api = base[0]
        _jax_exchange_api.header.prev_api = NULL
        _jax_exchange_api.dltensor_from_py_object_no_sync = \
            <DLPackDLTensorFromPyObjectNoSync><void*>_jax_view
        _jax_exchange_api.managed_tensor_from_py_object_no_sync = \
            <DLPackManagedTensorFromPyObjectNoSync><void*>_jax_to_managed
        _jax_table = PyCapsule_New(&_jax_exchange_api, b"dlpack_exchange_api", NULL)
        return _jax_table
