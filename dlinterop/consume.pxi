# Provides: taking a capsule or a managed tensor into a Tensor (validated completely before
# it is consumed), views of Tensors, and the short cut for dlinterop's own exports.
# Uses: runtime.pxi, dltensors.pxi, export.pxi (dlinterop's own deleters).

cdef Tensor _wrap_versioned(const DLManagedTensorVersioned* m):
    """A Tensor viewing a versioned managed tensor once its version and layout are checked;
    it does not take ownership (the callers do, each in its own way)."""
    if m.version.major != 1:
        raise BufferError(f"unsupported DLPack major version {m.version.major}; "
                          "dlinterop implements 1.x")
    _validate_dltensor(&m.dl_tensor)
    return _wrap_dltensor(&m.dl_tensor, m.flags)


cdef Tensor tensor_from_managed(DLManagedTensorVersioned* m, bint readonly):
    """Takes ownership of `m`: on success the Tensor calls its deleter when it dies; on
    failure the deleter has already been called when the exception is raised."""
    cdef Tensor t
    try:
        if m == NULL:
            raise ValueError("NULL DLManagedTensorVersioned")
        t = _wrap_versioned(m)
    except BaseException:
        if m != NULL and m.deleter != NULL:
            m.deleter(m)
        raise
    if readonly:
        t.flags |= DLPACK_FLAG_BITMASK_READ_ONLY
    if _own_export(<void*>m.deleter):
        _adopt_own_export(t, m, <void*>m.deleter)
    else:
        t.managed_versioned = m
    return t


cdef Tensor _tensor_from_capsule(object capsule):
    # Checking the name, validating and renaming are one step for other threads: two that
    # consume one capsule end with one owner (the other finds it consumed). With the GIL
    # the critical section costs nothing more.
    with cython.critical_section(capsule):
        return _consume_capsule(capsule)


cdef Tensor _consume_capsule(object capsule):
    cdef const char* name = PyCapsule_GetName(capsule)
    cdef DLManagedTensorVersioned* mv
    cdef DLManagedTensor* ml
    cdef Tensor t
    if name == NULL:
        raise ValueError("capsule has no name; expected a 'dltensor' or 'dltensor_versioned' "
                         "DLPack capsule")
    if strcmp(name, NAME_VERSIONED) == 0:
        mv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(<PyObject*>capsule, NAME_VERSIONED)
        t = _wrap_versioned(mv)
        # Consume: from here the Tensor owns the managed tensor. SetName cannot fail on a
        # valid capsule.
        PyCapsule_SetName(capsule, NAME_USED_VERSIONED)
        if _own_export(<void*>mv.deleter):
            _adopt_own_export(t, mv, <void*>mv.deleter)
            return t
        t.managed_versioned = mv
    elif strcmp(name, NAME_LEGACY) == 0:
        ml = <DLManagedTensor*>PyCapsule_GetPointer(<PyObject*>capsule, NAME_LEGACY)
        _validate_dltensor(&ml.dl_tensor)
        # A legacy capsule cannot say whether its memory may be written: assume not, and
        # remember that this is an assumption (a legacy re-export may pass it on).
        t = _wrap_dltensor(&ml.dl_tensor, DLPACK_FLAG_BITMASK_READ_ONLY)
        t.flags |= FLAG_READ_ONLY_ASSUMED
        PyCapsule_SetName(capsule, NAME_USED_LEGACY)
        if _own_export(<void*>ml.deleter):
            _adopt_own_export(t, ml, <void*>ml.deleter)
            return t
        t.managed_legacy = ml
    elif strcmp(name, NAME_USED_VERSIONED) == 0 or strcmp(name, NAME_USED_LEGACY) == 0:
        raise ValueError("DLPack capsule already consumed: a capsule can be imported once")
    else:
        raise ValueError(f"capsule named {(<bytes>name).decode(errors='replace')!r} is not "
                         "a DLPack capsule ('dltensor' or 'dltensor_versioned')")
    t.owner_ref = capsule
    return t


cdef object _memory_owner(Tensor t):
    """What keeps t's memory alive: t itself when t owns it (a buffer of its own, or an
    imported managed tensor), else the object t holds for it. A view made of t holds this,
    not t, so that views of views never form a chain that deallocation must walk."""
    if (t.alloc_base != NULL or t.managed_versioned != NULL or t.managed_legacy != NULL
            or t.owner_ref is None):
        return t
    return t.owner_ref


cdef Tensor _view_of(Tensor src):
    """A new Tensor sharing src's memory, as exporting and importing it would give."""
    cdef Tensor t = _wrap_dltensor(&src.dl, src.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    t.flags |= src.flags & FLAG_READ_ONLY_ASSUMED
    t.owner_ref = _memory_owner(src)
    return t


cdef inline bint _own_export(const void* deleter) noexcept:
    """True for a managed tensor dlinterop's own export made (its manager_ctx is the
    exported Tensor)."""
    return deleter == <void*>_versioned_deleter or deleter == <void*>_legacy_deleter


cdef void _adopt_own_export(Tensor t, void* managed, const void* deleter):
    """Makes `t`, which views a managed tensor of dlinterop's own export, hold the exported
    Tensor's memory owner directly and releases the export now: importing what dlinterop
    exported adds no link to the ownership chain (a Tensor exported and imported again
    300,000 times would otherwise be freed through 300,000 nested deleters)."""
    cdef Tensor exported = <Tensor>(<DLManagedTensorVersioned*>managed).manager_ctx \
        if deleter == <void*>_versioned_deleter else \
        <Tensor>(<DLManagedTensor*>managed).manager_ctx
    t.owner_ref = _memory_owner(exported)
    if deleter == <void*>_versioned_deleter:
        _versioned_deleter(<DLManagedTensorVersioned*>managed)
    else:
        _legacy_deleter(<DLManagedTensor*>managed)

