# Provides: taking a capsule or a managed tensor into a Tensor (validated completely before
# it is consumed, its flags included), then owning it by one step for both (_take_managed:
# the short cut for dlinterop's own exports, padded sub-byte data repacked); views of
# Tensors; the flags DLPack defines (_DLPACK_FLAGS) and _layout_problem (the importer's
# verdict on a capsule's layout, for the pytest plugin).
# Uses: runtime.pxi, dtypes.pxi, tensor_base.pxi, layouts.pxi, allocator.pxi, export.pxi
# (dlinterop's own deleters).

# The flag bits DLPack defines, by their names in dlpack.h (the conformance checker and the
# pytest plugin read them; tests/test_dlpack_header.py compares them with the header); a
# producer's tensor with any other bit set is refused.
_DLPACK_FLAGS = {
    "DLPACK_FLAG_BITMASK_READ_ONLY": DLPACK_FLAG_BITMASK_READ_ONLY,
    "DLPACK_FLAG_BITMASK_IS_COPIED": DLPACK_FLAG_BITMASK_IS_COPIED,
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED": DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
}
cdef uint64_t _KNOWN_FLAGS = (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED
                              | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)


cdef Tensor _wrap_versioned(const DLManagedTensorVersioned* m):
    """A Tensor viewing a versioned managed tensor once its version, layout and flags are
    checked; it does not take ownership (_take_managed does, once the caller gives it up)."""
    if m.version.major != 1:
        raise BufferError(f"unsupported DLPack major version {m.version.major}; "
                          "dlinterop implements 1.x")
    _validate_dltensor(&m.dl_tensor)
    if m.flags & ~(<uint64_t>(DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED)):
        _check_unusual_flags(m.flags)     # one test on the common path
    return _wrap_dltensor(&m.dl_tensor, m.flags, None)


cdef int _check_unusual_flags(uint64_t flags) except -1:
    """BufferError for flag bits DLPack does not define (as of the header dlinterop was
    built with): a new bit may change what the bytes mean, so dlinterop refuses rather than
    guess."""
    cdef uint64_t unknown = flags & ~_KNOWN_FLAGS
    if unknown:
        bits = [i for i in range(64) if (unknown >> i) & 1]
        # Runs of bits as ranges: "bits 3-63", not sixty numbers.
        runs = []
        for bit in bits:
            if runs and runs[-1][1] == bit - 1:
                runs[-1][1] = bit
            else:
                runs.append([bit, bit])
        named = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)
        raise BufferError(f"the producer set DLPack flag bit{'s' if len(bits) > 1 else ''} "
                          f"{named} (flags={flags:#x}), which dlinterop "
                          f"(built for DLPack {DLPACK_MAJOR_VERSION}.{DLPACK_MINOR_VERSION}) does "
                          "not know: they may change what the data means, so it is not imported")
    return 0


cdef inline bint _is_padded(const DLManagedTensorVersioned* m) noexcept nogil:
    """Sub-byte data stored one element per byte (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
    the flag means nothing for types of a byte or more."""
    return ((m.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED) != 0
            and _is_packed_subbyte(m.dl_tensor.dtype))


cdef Tensor _repacked(Tensor padded):
    """A new Tensor holding `padded`'s values packed, as dlinterop holds every sub-byte type:
    `padded` views sub-byte elements stored one per byte, in each byte's low bits (DLPack's
    padded layout; ml_dtypes' in NumPy), with strides in elements, which are bytes there.
    The copy is flagged IS_COPIED, and FLAG_REPACKED so that copy=False can refuse it."""
    cdef DLDataType dt = padded.dl.dtype
    if not dli_device_host_readable(padded.dl.device.device_type):
        raise BufferError(f"padded {dtype_text(dt)} data on {_device_of(padded)} cannot be "
                          "repacked: dlinterop repacks sub-byte data in host memory only")
    cdef Tensor out = _allocate(padded.dl.ndim, padded.dl.shape, dt, padded.dl.device,
                                DEFAULT_ALIGNMENT, False)
    with nogil:
        dli_pack_codes(<uint8_t*>out.dl.data,
                       <const uint8_t*>padded.dl.data + padded.dl.byte_offset,
                       padded.dl.ndim, padded.dl.shape, padded.dl.strides, dt.bits, 8)
    out.flags |= DLPACK_FLAG_BITMASK_IS_COPIED | FLAG_REPACKED
    return out


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
    return _take_managed(t, m, True, None, "managed tensor (C exchange API)")


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
        return _take_managed(t, mv, True, capsule, NAME_VERSIONED)
    if strcmp(name, NAME_LEGACY) == 0:
        ml = <DLManagedTensor*>PyCapsule_GetPointer(<PyObject*>capsule, NAME_LEGACY)
        _validate_dltensor(&ml.dl_tensor)
        # A legacy capsule cannot say whether its memory may be written: assume not, and
        # remember that this is an assumption (a legacy re-export may pass it on).
        t = _wrap_dltensor(&ml.dl_tensor, DLPACK_FLAG_BITMASK_READ_ONLY, None)
        t.flags |= FLAG_READ_ONLY_ASSUMED
        PyCapsule_SetName(capsule, NAME_USED_LEGACY)
        return _take_managed(t, ml, False, capsule, NAME_LEGACY)
    if strcmp(name, NAME_USED_VERSIONED) == 0 or strcmp(name, NAME_USED_LEGACY) == 0:
        if dli_san_on():
            dli_san_consumed_twice(PyCapsule_GetPointer(<PyObject*>capsule, name), name)
        raise ValueError("DLPack capsule already consumed: a capsule can be imported once")
    raise ValueError(f"capsule named {(<bytes>name).decode(errors='replace')!r} is not "
                     "a DLPack capsule ('dltensor' or 'dltensor_versioned')")


cdef inline Tensor _take_managed(Tensor t, void* managed, bint versioned, object holder,
                                 const char* origin):
    """The one import ownership step: makes `t`, just made over `managed` (a
    DLManagedTensorVersioned when `versioned`, else a DLManagedTensor), the owner of it,
    and returns the Tensor to hand out. dlinterop's own export is taken back
    (_adopt_own_export); a producer's managed tensor is t's to release, recorded by the
    sanitizer as imported from `origin`, with `holder` (its consumed capsule, or None) as
    t's owner; padded sub-byte data is repacked into a new Tensor (_repacked), t then
    dying at once. The caller gives up `managed` on the call: should repacking fail, the
    deleter has run, through t, when the exception is raised."""
    cdef DLManagedTensorVersioned* mv = <DLManagedTensorVersioned*>managed
    cdef const void* deleter = <void*>mv.deleter if versioned else \
        <void*>(<DLManagedTensor*>managed).deleter
    if _own_export(deleter):
        # dlinterop's exports are never padded: it holds sub-byte types packed.
        _adopt_own_export(t, managed, deleter)
        return t
    if versioned:
        t.managed_versioned = mv
    else:
        t.managed_legacy = <DLManagedTensor*>managed
    if holder is not None:
        t.owner_ref = holder
    if dli_san_on():
        dli_san_imported(managed, versioned, origin)
    if versioned and _is_padded(mv):
        # The copy holds the values; `t` dies here and the producer's deleter runs.
        return _repacked(t)
    return t


cdef Tensor _view_of(Tensor src):
    """A new Tensor sharing src's memory, as exporting and importing it would give."""
    return _layout_view(src, src.dl.ndim, src.dl.shape, src.dl.strides,
                        <int64_t>src.dl.byte_offset, src.dl.dtype)


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


def _layout_problem(capsule):
    """Testing aid (the pytest plugin's producer.well-formed): why dlinterop's importer would
    refuse the layout of an unconsumed DLPack capsule's tensor as malformed (the
    BufferError's text), read without consuming it; None when it would take it, when what it
    refuses is DLPack's but beyond dlinterop (several lanes, a defined type code at a width
    dlinterop has no DType for, more dimensions than it handles), or when `capsule` is not
    an unconsumed DLPack capsule. Never raises."""
    cdef const char* name
    cdef DLTensor* dl
    cdef LayoutProblem problem
    if not PyCapsule_CheckExact(capsule):
        return None
    name = PyCapsule_GetName_raw(<PyObject*>capsule)
    if name != NULL and strcmp(name, NAME_VERSIONED) == 0:
        dl = &(<DLManagedTensorVersioned*>PyCapsule_GetPointer(<PyObject*>capsule, name)).dl_tensor
    elif name != NULL and strcmp(name, NAME_LEGACY) == 0:
        dl = &(<DLManagedTensor*>PyCapsule_GetPointer(<PyObject*>capsule, name)).dl_tensor
    else:
        return None     # (a capsule's pointer is never NULL: PyCapsule_New refuses one)
    problem = _check_dltensor(dl)
    if problem == LAYOUT_OK or problem == BAD_LANES:
        return None
    if problem == BAD_NDIM and dl.ndim > MAX_NDIM:
        return None
    if (problem == BAD_DTYPE and dl.dtype.bits != 0 and dl.dtype.lanes != 0
            and dl.dtype.code in _DLPACK_TYPE_CODES.values()):
        return None
    try:
        _raise_dltensor_problem(dl, problem)
    except BufferError as error:
        return str(error)
