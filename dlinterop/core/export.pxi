# Provides: export: Tensor.__dlpack__, to_dlpack, to_capsule and to_managed; one malloc
# holds the managed struct with its shape and strides, and nothing fails once the capsule is
# made. The capsule names and deleters the importer recognises as dlinterop's own.
# Uses: runtime.pxi, devices.pxi, tensor_base.pxi, cuda.pxi (stream order, the devices it
# reaches), allocator.pxi (the export counter), copies.pxi (the copy dl_device= or copy=True
# asks for), placement.pxi (the copy= and stream= rules).

cdef const char* NAME_LEGACY = "dltensor"
cdef const char* NAME_VERSIONED = "dltensor_versioned"
cdef const char* NAME_USED_LEGACY = "used_dltensor"
cdef const char* NAME_USED_VERSIONED = "used_dltensor_versioned"


# Export blocks (managed struct + shape + strides) for up to INLINE_NDIM dimensions (as
# many as a Tensor keeps inline) are recycled through a small free list: an export then
# costs no allocator call. Blocks of both structs share one size so that either kind can
# reuse any block. The list is only touched while holding the GIL; without a GIL
# (free-threaded CPython) it is not used.
cdef enum:
    FREE_BLOCKS = 32
cdef size_t SMALL_BLOCK_BYTES = (
    sizeof(DLManagedTensorVersioned) + 2 * INLINE_NDIM * sizeof(int64_t))
cdef void* _free_blocks[FREE_BLOCKS]
cdef int _free_block_count = 0


cdef inline void* _block_alloc(int ndim) noexcept nogil:
    global _free_block_count
    if ndim <= INLINE_NDIM:
        if not FREE_THREADED and _free_block_count > 0:
            _free_block_count -= 1
            return _free_blocks[_free_block_count]
        return PyMem_Malloc(SMALL_BLOCK_BYTES)
    return PyMem_Malloc(sizeof(DLManagedTensorVersioned) + 2 * ndim * sizeof(int64_t))


cdef inline void _block_free(void* block, int ndim) noexcept nogil:
    global _free_block_count
    if not FREE_THREADED and ndim <= INLINE_NDIM and _free_block_count < FREE_BLOCKS:
        _free_blocks[_free_block_count] = block
        _free_block_count += 1
    else:
        PyMem_Free(block)


cdef inline void _release_export_with_gil(void* owner, void* block, int ndim) noexcept nogil:
    """Frees an exported block and drops its reference to the Tensor. The caller holds the
    GIL (declared nogil only so that the thread-agnostic deleter can call it)."""
    global _live_exports
    cdef PyObject *exc_type
    cdef PyObject *exc_value
    cdef PyObject *exc_tb
    cdef int kept = 0
    if dli_san_on():
        # Under the sanitizer: a second release is reported and touches nothing; a first
        # one leaves the block to the sanitizer, which keeps it to tell a second one.
        kept = dli_san_export_released(block)
        if kept == 2:
            return
    if not kept:
        _block_free(block, ndim)
    dli_atomic_add(&_live_exports, -1)
    if PyErr_Occurred() != NULL:
        # An exception in flight where the capsule or Tensor dies must survive unchanged.
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb)
        Py_DecRef(<PyObject*>owner)
        PyErr_Restore(exc_type, exc_value, exc_tb)
    else:
        Py_DecRef(<PyObject*>owner)


cdef void _release_export(void* owner, void* block, int ndim) noexcept nogil:
    """_release_export_with_gil from any thread, with or without the GIL. After interpreter
    shutdown has begun both are leaked on purpose: touching a finalising runtime from a
    foreign thread can crash, a few bytes left at exit cannot."""
    cdef PyGILState_STATE state
    if not dli_interpreter_alive():
        if dli_san_on():
            dli_san_released_after_shutdown(block)
        return
    if PyGILState_Check():
        _release_export_with_gil(owner, block, ndim)
        return
    state = PyGILState_Ensure()
    _release_export_with_gil(owner, block, ndim)
    PyGILState_Release(state)


# The ndim the block was sized for is read back from the struct: only dlinterop writes it.

cdef void _versioned_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    if m != NULL:
        _release_export(m.manager_ctx, m, m.dl_tensor.ndim)


cdef void _legacy_deleter(DLManagedTensor* m) noexcept nogil:
    if m != NULL:
        _release_export(m.manager_ctx, m, m.dl_tensor.ndim)


# Capsule destructors. Only an unconsumed capsule still owns its tensor. The name pointer is
# almost always ours; a consumer that renamed it (to used_*, or back) set a string of its
# own, so compare the text too.

cdef inline bint _unconsumed(PyObject* capsule, const char* ours) noexcept:
    cdef const char* name = PyCapsule_GetName_raw(capsule)
    # The first byte tells "used_..." from ours without a call.
    return name == ours or (name != NULL and name[0] == ours[0] and strcmp(name, ours) == 0)


cdef void _versioned_capsule_destructor(PyObject* capsule) noexcept:
    cdef DLManagedTensorVersioned* m
    if _unconsumed(capsule, NAME_VERSIONED):
        m = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, NAME_VERSIONED)
        if m != NULL and m.deleter == _versioned_deleter:
            # Ours, and a destructor runs with the GIL in a live interpreter: skip the
            # deleter's thread and shutdown checks.
            _release_export_with_gil(m.manager_ctx, m, m.dl_tensor.ndim)
        elif m != NULL and m.deleter != NULL:
            m.deleter(m)


cdef void _legacy_capsule_destructor(PyObject* capsule) noexcept:
    cdef DLManagedTensor* m
    if _unconsumed(capsule, NAME_LEGACY):
        m = <DLManagedTensor*>PyCapsule_GetPointer(capsule, NAME_LEGACY)
        if m != NULL and m.deleter == _legacy_deleter:
            _release_export_with_gil(m.manager_ctx, m, m.dl_tensor.ndim)
        elif m != NULL and m.deleter != NULL:
            m.deleter(m)


cdef inline void _copy_layout(DLTensor* dst, const DLTensor* src, int64_t* storage) noexcept nogil:
    cdef int i
    dst[0] = src[0]
    if src.ndim > 0:
        if src.ndim <= 2:
            # The common ranks by hand: two memcpy calls cost more than the copies.
            for i in range(src.ndim):
                storage[i] = src.shape[i]
                storage[src.ndim + i] = src.strides[i]
        else:
            memcpy(storage, src.shape, src.ndim * sizeof(int64_t))
            memcpy(storage + src.ndim, src.strides, src.ndim * sizeof(int64_t))
        dst.shape = storage
        dst.strides = storage + src.ndim
    else:
        # DLPack: no shape or strides for 0-d tensors.
        dst.shape = NULL
        dst.strides = NULL


cdef inline object _own_capsule(PyObject* capsule, void* block, Tensor t):
    """Completes an export once PyCapsule_New has run: on failure frees the block; on
    success takes the Tensor's reference, after which nothing can fail."""
    global _live_exports
    if capsule == NULL:
        _block_free(block, t.dl.ndim)
        raise MemoryError()
    Py_IncRef(<PyObject*>t)
    dli_atomic_add(&_live_exports, 1)
    if dli_san_on():
        dli_san_exported(block, capsule)
    result = <object>capsule
    Py_DecRef(capsule)
    return result


cdef DLManagedTensorVersioned* _new_versioned(Tensor t, uint32_t minor,
                                              uint64_t flags) except NULL:
    """A filled versioned managed tensor for `t` that does not yet own a reference to it."""
    cdef DLManagedTensorVersioned* m = <DLManagedTensorVersioned*>_block_alloc(t.dl.ndim)
    if m == NULL:
        raise MemoryError()
    m.version.major = 1
    m.version.minor = minor
    m.manager_ctx = <void*>t
    m.deleter = _versioned_deleter
    m.flags = flags
    _copy_layout(&m.dl_tensor, &t.dl, <int64_t*>(m + 1))
    return m


cdef object _make_versioned_capsule(Tensor t, uint32_t minor, uint64_t flags):
    cdef DLManagedTensorVersioned* m = _new_versioned(t, minor, flags)
    return _own_capsule(PyCapsule_New_raw(m, NAME_VERSIONED, _versioned_capsule_destructor), m, t)


cdef DLManagedTensorVersioned* _make_versioned_managed(Tensor t, uint32_t minor,
                                                       uint64_t flags) except NULL:
    """An owning versioned managed tensor without a capsule (the exchange API's export)."""
    global _live_exports
    cdef DLManagedTensorVersioned* m = _new_versioned(t, minor, flags)
    Py_IncRef(<PyObject*>t)
    dli_atomic_add(&_live_exports, 1)
    if dli_san_on():
        dli_san_made(m, DLI_SAN_EXPORT, "managed tensor (C exchange API)")
    return m


cdef object _make_legacy_capsule(Tensor t):
    cdef DLManagedTensor* m = <DLManagedTensor*>_block_alloc(t.dl.ndim)
    if m == NULL:
        raise MemoryError()
    m.manager_ctx = <void*>t
    m.deleter = _legacy_deleter
    _copy_layout(&m.dl_tensor, &t.dl, <int64_t*>(m + 1))
    return _own_capsule(PyCapsule_New_raw(m, NAME_LEGACY, _legacy_capsule_destructor), m, t)


cdef int _refuse_legacy_export() except -1:
    """A legacy capsule cannot say "read-only", so a Tensor that is read-only by flag is not
    exported as one (read_only_by_flag: one read-only only because it came from a legacy
    capsule itself may be, since the next consumer then knows what the first one did)."""
    raise BufferError("read-only tensor cannot be exported as a legacy capsule; "
                      "ask for a versioned one (max_version=(1, 0) or later, "
                      "to_dlpack(versioned=True)) or a copy (copy=True)")


cdef int _negotiated_minor(object max_version) except -2:
    """The minor version to stamp on a versioned capsule: the newest dlinterop implements
    that does not exceed max_version; -1 when the consumer wants a legacy capsule."""
    cdef long major, minor
    cdef int overflow
    if max_version is None:
        return -1
    if (type(max_version) is not tuple or PyTuple_GET_SIZE(max_version) != 2
            or not isinstance(<object>PyTuple_GET_ITEM(max_version, 0), int)
            or not isinstance(<object>PyTuple_GET_ITEM(max_version, 1), int)):
        raise TypeError(f"max_version must be a (major, minor) tuple of ints, got {max_version!r}")
    # Out-of-range ints saturate: they only ever mean "newest" or "too old".
    if not dli_small_long(PyTuple_GET_ITEM(max_version, 0), &major):
        major = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(max_version, 0), &overflow)
        if overflow:
            major = overflow * 2
    if not dli_small_long(PyTuple_GET_ITEM(max_version, 1), &minor):
        minor = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(max_version, 1), &overflow)
        if overflow:
            minor = overflow * DLPACK_MINOR_VERSION
    if major < 1:
        return -1
    if major > 1 or minor >= DLPACK_MINOR_VERSION:
        return DLPACK_MINOR_VERSION
    return minor if minor > 0 else 0


cdef object _export(Tensor t, object stream, object max_version, object dl_device, object copy):
    """Tensor.__dlpack__ with its keywords checked and applied, as DLPack's Python
    specification sets them out (https://dmlc.github.io/dlpack/latest/python_spec.html)."""
    cdef uint64_t flags = 0
    cdef DLDevice target = t.dl.device
    cdef Tensor src = t
    cdef int negotiated = _negotiated_minor(max_version)
    cdef bint versioned = negotiated >= 0
    cdef uint32_t minor = negotiated if versioned else 0
    if (stream is None and dl_device is None and copy is None
            and dli_device_host(t.dl.device.device_type)):
        # The common case: share the memory as it is.
        if versioned:
            return _make_versioned_capsule(t, minor, t.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
        if read_only_by_flag(t):
            _refuse_legacy_export()
        return _make_legacy_capsule(t)
    check_copy_arg(copy)
    _check_stream_arg(t, stream)
    if dl_device is not None:
        if type(dl_device) is not tuple or len(dl_device) != 2:
            raise TypeError("dl_device must be a (device_type, device_id) tuple, got "
                            f"{dl_device!r}")
        target.device_type = <DLDeviceType>_as_int(dl_device[0], "dl_device type")
        target.device_id = _as_int(dl_device[1], "dl_device index")
    if _copy_needed(t, target, copy):
        if not same_device(target, t.dl.device) and not _can_copy_to(t.dl.device, target):
            raise BufferError(f"cannot export a tensor on {_device_of(t)} to device "
                              f"{tuple(dl_device)}: dlinterop cannot reach it")
        src = _copy_tensor(t, target)
        flags |= DLPACK_FLAG_BITMASK_IS_COPIED
    elif t.flags & DLPACK_FLAG_BITMASK_READ_ONLY:
        if not versioned and read_only_by_flag(t):
            _refuse_legacy_export()
        flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    if versioned:
        return _make_versioned_capsule(src, minor, flags)
    return _make_legacy_capsule(src)


cdef int _check_stream_arg(Tensor t, object stream) except -1:
    """The stream= rule (placement.pxi), then the consumer's stream ordered after the work
    dlinterop issued on CUDA memory (None: the legacy default stream, as DLPack says)."""
    cdef int fault = _stream_fault(stream, t.dl.device.device_type)
    if fault:
        _refuse_stream(stream, fault, f"a tensor on {_device_of(t)}")
    if dli_device_cuda(t.dl.device.device_type):
        _cuda_stream_wait(t, 1 if stream is None else stream)
    return 0


def to_dlpack(Tensor tensor not None, *, versioned=False):
    """A DLPack capsule sharing `tensor`'s memory: "dltensor" by default (as
    torch.utils.dlpack.to_dlpack makes), "dltensor_versioned" with versioned=True."""
    return to_capsule(tensor, versioned)


cdef object to_capsule(Tensor t, bint versioned):
    if versioned:
        return _make_versioned_capsule(t, DLPACK_MINOR_VERSION,
                                       t.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    if read_only_by_flag(t):
        _refuse_legacy_export()
    return _make_legacy_capsule(t)


cdef DLManagedTensorVersioned* to_managed(Tensor t) except NULL:
    """An owning versioned managed tensor of `t` (no capsule), its READ_ONLY flag as t's:
    what dlinterop's own exchange table hands out."""
    return _make_versioned_managed(t, DLPACK_MINOR_VERSION,
                                   t.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
