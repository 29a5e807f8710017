# Provides: exchange tables for other types' objects (dl.exchange_api_for): NumPy's, read
# through NumPy's C API, and a generic one over __dlpack__ (dlinterop.frameworks makes
# JAX's and PyTorch's); the owning-export block the NumPy and torch tables share.
# Uses: runtime.pxi, once.pxi, dtypes.pxi, allocator.pxi, export.pxi, consume.pxi,
# numpy_route.pxi, producers.pxi, importer.pxi, bridge.pxi (asarray), exchange.pxi.

# Both tables are static structs filled once, at import (as exchange.pxi's), and published
# each in one capsule made then: exchange_api_for only picks one, so every call for a type
# returns the same capsule object. Their Python-facing functions follow exchange.pxi's
# convention: `except -1` functions stored through void* in the noexcept pointer types.

# NumPy keeps strides in bytes, DLPack in elements, so a view's strides need memory that
# lives as long as the array: a block of shape then strides, interned for the process by
# src/layouts_interned.c (no allocation once a layout has been seen). Past its bound, a block is
# kept per array instead, in this dict (id -> [weak reference, blocks...]) until the array
# dies, when the weak reference's callback drops the entry; a block is reused while the
# array's layout stays the same.
cdef dict _numpy_view_blocks = {}

cdef extern from "layouts_interned.h":
    const int64_t* dli_layout_interned(const int64_t* layout, int n) noexcept


cdef const int64_t* _kept_layout(object array, const int64_t* layout, int ndim) except NULL:
    """A copy of layout[0:2 * ndim] that lives as long as `array`."""
    cdef Py_ssize_t nbytes = 2 * ndim * sizeof(int64_t)
    cdef Py_ssize_t i
    key = id(array)
    entry = _numpy_view_blocks.get(key)
    if entry is not None:
        # A list is read item by item under free-threading: a block appended meanwhile by
        # another thread is either seen or not, never half made.
        for i in range(1, len(entry)):
            block = entry[i]
            if memcmp(PyBytes_AS_STRING(block), layout, nbytes) == 0:
                return <const int64_t*>PyBytes_AS_STRING(block)
    block = PyBytes_FromStringAndSize(<const char*>layout, nbytes)
    if entry is None:
        def drop(ref):
            # Only this array's entry: the id may since belong to another array.
            if _numpy_view_blocks.get(key, (None,))[0] is ref:
                _numpy_view_blocks.pop(key, None)
        entry = _numpy_view_blocks.setdefault(key, [weakref.ref(array, drop)])
    entry.append(block)   # never removed while the array lives: earlier views stay valid
    return <const int64_t*>PyBytes_AS_STRING(block)


cdef const int64_t* keep_layout(object owner, const int64_t* layout, int ndim) except NULL:
    cdef const int64_t* kept = dli_layout_interned(layout, 2 * ndim)
    return kept if kept != NULL else _kept_layout(owner, layout, ndim)


def _numpy_view_block_count():
    """Testing aid: how many arrays keep blocks of their own for their views (once the
    interned layouts are full)."""
    return len(_numpy_view_blocks)


cdef int _check_numpy_object(object obj) except -1:
    if not dli_numpy_is_array(<PyObject*>obj):
        raise TypeError(f"dlinterop's exchange table for numpy.ndarray takes numpy.ndarray "
                        f"objects, got {type(obj).__name__}")
    return 0


cdef enum:
    NPY_USERDEF = 256    # NumPy's first user type number (ml_dtypes' types are user types)


cdef int _numpy_user_type(object array) except -1:
    """For an array of a NumPy user type dlinterop has a DLPack type for (ml_dtypes'): 1 once
    its code is recorded for the table's C routes (a type of whole bytes: bfloat16, the
    float8s), 2 for a sub-byte type (int4, float4_e2m1fn, float6, ...: one element per byte
    in NumPy, packed in DLPack, so no view); 0 for anything else."""
    descr = array.dtype
    if descr.num < NPY_USERDEF:
        return 0
    kind = _numpy_user_kinds.get(descr.num)
    if kind is None:
        kind = _numpy_user_kinds.setdefault(descr.num, _describe_user_type(descr))
    return kind


# NumPy's user type number -> _numpy_user_type's answer (a type's number is fixed once
# registered, for the process).
cdef dict _numpy_user_kinds = {}


cdef int _describe_user_type(object descr) except -1:
    cdef DType dt
    try:
        dt = dtype(descr)
    except (TypeError, ValueError):
        return 0
    if dt.dl.lanes != 1:
        return 0
    if dt.dl.bits == 8 * descr.itemsize:
        return 1 if dli_numpy_register_user_type(descr.num, dt.dl.code) == 0 else 0
    return 2 if dt.dl.bits < 8 else 0


cdef int _numpy_view_otherwise(PyObject* obj, DLTensor* out, int status) except -1:
    """What the NumPy table's view (dli_numpy_exchange_view, in C: src/numpy_route.c) does
    not do itself: its refusals, an ml_dtypes type seen for the first time (recorded, then
    viewed in C), and a block for an array once the interned layouts are full."""
    cdef int64_t layout[2 * MAX_NDIM]
    cdef int readonly = 0
    cdef const int64_t* kept
    array = <object>obj
    if status < 0:
        _check_numpy_object(array)
    if status == 1:
        user = _numpy_user_type(array)
        if user == 1 and dli_numpy_exchange_view(<void*>obj, out) == 0:
            return 0
        if user == 2:
            raise BufferError(
                f"dlinterop's NumPy exchange table has no view of a {array.dtype} array: NumPy "
                "holds one element per byte, DLPack packs sub-byte types; "
                "managed_tensor_from_py_object_no_sync gives a packed copy (IS_COPIED)")
        raise BufferError(
            f"dlinterop's NumPy exchange table cannot view this {type(array).__name__} "
            f"(dtype {array.dtype!r}, strides {array.strides}) in place: a non-native byte "
            "order, a dtype with no DLPack type, strides that are not whole items or memory "
            "NumPy imported through DLPack; managed_tensor_from_py_object_no_sync asks "
            "NumPy's __dlpack__ instead")
    # The interned layouts are full: a block kept for this array.
    dli_numpy_view(<PyObject*>array, out, layout, MAX_NDIM, 1, &readonly)
    kept = _kept_layout(array, layout, out.ndim)
    out.shape = <int64_t*>kept
    out.strides = <int64_t*>kept + out.ndim
    return 0


cdef void owned_export_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    """The deleter of the exchange tables' owning exports of another framework's object
    (owned_export_block's): manager_ctx is that object. (Not export.pxi's
    _versioned_deleter, whose manager_ctx the importer takes for a Tensor.)"""
    if m != NULL:
        _release_export(m.manager_ctx, m, m.dl_tensor.ndim)


cdef DLManagedTensorVersioned* owned_export_block(PyObject* owner, int ndim) noexcept nogil:
    """A block for an owning export of `owner` (an object the exporting table describes):
    the managed tensor, then room for `ndim` shapes and strides at m + 1, its version,
    manager_ctx (`owner`, referenced) and deleter set, flags 0. NULL when out of memory, with
    no exception set. The caller holds the GIL."""
    global _live_exports
    cdef DLManagedTensorVersioned* m = <DLManagedTensorVersioned*>_block_alloc(ndim)
    if m == NULL:
        return NULL
    m.version.major = DLPACK_MAJOR_VERSION
    m.version.minor = DLPACK_MINOR_VERSION
    m.manager_ctx = owner
    m.deleter = owned_export_deleter
    m.flags = 0
    Py_IncRef(owner)
    dli_atomic_add(&_live_exports, 1)
    if dli_san_on():
        dli_san_made(m, DLI_SAN_EXPORT, "managed tensor (C exchange API)")
    return m


cdef int _numpy_to_managed(void* py_object, DLManagedTensorVersioned** out) except -1:
    """Owning export of an ndarray, no stream synchronisation: one block (the managed tensor,
    then its shape and strides) holding a reference to the array, read through NumPy's C
    API; NumPy's __dlpack__ decides for the arrays that route cannot describe (and raises
    its BufferError)."""
    cdef DLTensor view
    cdef int64_t layout[2 * MAX_NDIM]
    cdef int readonly = 0
    cdef DLManagedTensorVersioned* m
    if (not dli_numpy_is_array(<PyObject*>py_object)
            or dli_numpy_view(<PyObject*>py_object, &view, layout, MAX_NDIM, 1, &readonly) != 0):
        array = <object>py_object
        _check_numpy_object(array)
        user = _numpy_user_type(array)
        if user == 2:     # sub-byte: packed, as dl.asarray packs it, so a copy
            t = asarray(array)
            out[0] = _make_versioned_managed(t, DLPACK_MINOR_VERSION,
                                             DLPACK_FLAG_BITMASK_IS_COPIED)
            return 0
        if user == 0 or dli_numpy_view(<PyObject*>py_object, &view, layout, MAX_NDIM, 1,
                                       &readonly) != 0:
            return _managed_of(_import_from_producer(array, None), out)
    m = owned_export_block(<PyObject*>py_object, view.ndim)
    if m == NULL:
        raise MemoryError()
    if readonly:
        m.flags = DLPACK_FLAG_BITMASK_READ_ONLY
    _copy_layout(&m.dl_tensor, &view, <int64_t*>(m + 1))
    out[0] = m
    return 0


cdef int _managed_of(Tensor t, DLManagedTensorVersioned** out) except -1:
    out[0] = _make_versioned_managed(t, DLPACK_MINOR_VERSION,
                                     t.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    return 0


cdef int _numpy_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) except -1:
    """Steals `tensor`; a new reference to an ndarray sharing its memory."""
    t = tensor_from_managed(tensor, False)   # from here the Tensor owns it
    array = _wrap_as_ndarray(t)
    if array is None:
        # A dtype or device outside the C route's table: NumPy's own from_dlpack decides,
        # but for host memory of a type it knows only through ml_dtypes (before NumPy 2.5,
        # its from_dlpack refuses them): the Tensor's __array__ views that memory as one.
        numpy = _module_if_run("numpy")
        try:
            array = numpy.from_dlpack(t)
        except (BufferError, RuntimeError):
            if t.dl.device.device_type != kDLCPU or not _numpy_holds(t):
                raise
            array = numpy.asarray(t)
    Py_IncRef(<PyObject*>array)
    out_py_object[0] = <void*>array
    return 0


cdef bint _numpy_holds(Tensor t):
    """Whether NumPy (through ml_dtypes where need be) has a dtype for t's."""
    try:
        dtype_from_dl(t.dl.dtype).to_numpy()
    except TypeError:
        return False
    return True


cdef int _generic_to_managed(void* py_object, DLManagedTensorVersioned** out) except -1:
    """Owning export through obj.__dlpack__(max_version=(1, 3)), once per call (an older
    producer's signature as from_dlpack falls back to it)."""
    return _managed_of(_import_from_producer(<object>py_object, None), out)


cdef int _generic_view(void* py_object, DLTensor* out) except -1:
    raise BufferError(
        f"dlinterop's generic exchange table cannot give a non-owning DLTensor of a "
        f"{type(<object>py_object).__name__}: its __dlpack__ returns an owning capsule "
        "that nothing would keep alive; call managed_tensor_from_py_object_no_sync")


cdef void _fill_table(DLPackExchangeAPI* api, void* to_managed, void* to_py,
                      void* view) noexcept:
    api.header.version.major = DLPACK_MAJOR_VERSION
    api.header.version.minor = DLPACK_MINOR_VERSION
    api.header.prev_api = NULL
    api.managed_tensor_allocator = _xapi_allocator
    api.managed_tensor_from_py_object_no_sync = <DLPackManagedTensorFromPyObjectNoSync>to_managed
    api.managed_tensor_to_py_object_no_sync = <DLPackManagedTensorToPyObjectNoSync>to_py
    api.dltensor_from_py_object_no_sync = <DLPackDLTensorFromPyObjectNoSync>view
    api.current_work_stream = _xapi_current_stream   # NULL on the CPU


cdef DLPackExchangeAPI _numpy_exchange_api
cdef DLPackExchangeAPI _generic_exchange_api
dli_numpy_set_view_otherwise(<dli_numpy_view_otherwise_fn><void*>_numpy_view_otherwise)
_fill_table(&_numpy_exchange_api, <void*>_numpy_to_managed, <void*>_numpy_to_py,
            <void*>dli_numpy_exchange_view)
_fill_table(&_generic_exchange_api, <void*>_generic_to_managed, <void*>_xapi_to_py,
            <void*>_generic_view)


cdef object _table_capsule(DLPackExchangeAPI* api):
    cdef PyObject* capsule = PyCapsule_New_raw(api, EXCHANGE_API_NAME, NULL)
    if capsule == NULL:
        raise MemoryError()
    result = <object>capsule
    Py_DecRef(capsule)
    return result


cdef object _numpy_table = _table_capsule(&_numpy_exchange_api)
cdef object _generic_table = _table_capsule(&_generic_exchange_api)


cdef str _fixed_family(type cls):
    """The family of types whose objects never change their memory or layout that `cls`
    belongs to (dlinterop.frameworks' exchange_fixed.pxi), or None."""
    for module, name, family in _FIXED_FAMILIES:
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type) and issubclass(cls, <type>found):
            return family
    return None


cdef tuple _FIXED_FAMILIES = (("pyarrow", "Array", "pyarrow.Array"),
                              ("pyarrow", "Tensor", "pyarrow.Tensor"),
                              ("warp", "array", "warp.array"))


def exchange_api_for(obj_or_type):
    """A "dlpack_exchange_api" capsule holding a DLPack 1.3 C exchange table
    (``DLPackExchangeAPI``) whose functions take objects of ``obj_or_type`` (a type, or an
    object whose type is meant); the same capsule for every call with one type.

    - ``dl.Tensor``: dlinterop's own table, ``dl.Tensor.__dlpack_c_exchange_api__``.
    - ``numpy.ndarray`` and its subclasses: read through NumPy's C API, with no
      ``__dlpack__`` call. ``dltensor_from_py_object_no_sync`` fills a non-owning view
      (strides always filled) valid while the array lives: NumPy keeps strides in bytes, so
      the shape and element strides point into a block kept for each distinct layout (for
      the process; past a bound of distinct layouts, for the array's life). Arrays of
      ml_dtypes' types of whole bytes (bfloat16, the float8s) are read the same way; of its
      sub-byte types (int4, float4_e2m1fn, ...: one element per byte in NumPy, packed in
      DLPack) the view raises BufferError and the owned tensor is a packed copy flagged
      IS_COPIED. It raises BufferError for arrays NumPy's ``__dlpack__`` describes
      differently or refuses (a non-native byte order, a dtype with no DLPack type, strides
      that are not whole items, memory NumPy imported through DLPack);
      ``managed_tensor_from_py_object_no_sync`` gives those to NumPy's
      ``__dlpack__``, which exports or refuses them. ``managed_tensor_to_py_object_no_sync``
      returns an ndarray sharing the tensor's memory (an ml_dtypes array for its types).
    - ``torch.Tensor`` and its subclasses (once PyTorch is imported): read through
      PyTorch's stable C shim (the at::Tensor a ``torch.Tensor`` or ``torch.nn.Parameter``
      holds), with no ``__dlpack__`` call; the view's shape and strides point into the
      tensor's own, the owned tensor holds a reference to it. Refused (BufferError) as
      PyTorch's ``__dlpack__`` refuses them: tensors that require grad, lazily conjugated
      or negated views. Sparse, quantized and meta tensors, and subclasses that override
      ``__torch_function__``, go to PyTorch's own table; the allocator, the stream and the
      way back (a ``torch.Tensor``) are PyTorch's own table's (dlinterop.frameworks holds
      it).
    - ``jax.Array`` (once JAX is imported): a view read from a single-device array itself
      (its buffer pointer, shape and dtype; waiting for its value, as JAX's ``__dlpack__``
      does), the owned tensor through JAX's ``__dlpack__`` flagged READ_ONLY, a
      ``dl.Tensor`` on the way back (dlinterop.frameworks holds it).
    - pyarrow's ``Array`` and ``Tensor`` and Warp's ``array`` (and their subclasses, once
      the framework is imported): objects that never change their memory or layout. Their
      view is described once per object, by the framework's own ``__dlpack__`` (so
      exactly as it exports it), and kept until the object dies; later views copy that
      record, with no Python call. The owned tensor is the framework's ``__dlpack__``
      export (pyarrow's flagged READ_ONLY); the way back gives an object of that type
      (``dl.to_framework``).
    - any other type with ``__dlpack__``: a generic table whose
      ``managed_tensor_from_py_object_no_sync`` calls ``__dlpack__(max_version=(1, 3))``
      once per call and whose ``managed_tensor_to_py_object_no_sync`` returns a
      ``dl.Tensor``. Its ``dltensor_from_py_object_no_sync`` raises BufferError: the view
      would borrow from a capsule that nothing keeps alive.

    Every table's ``managed_tensor_allocator`` is dlinterop's (host and, with the CUDA
    layer, CUDA memory; C-contiguous) and ``current_work_stream`` gives NULL on the CPU,
    but the torch table's, which are PyTorch's.
    Functions given an object of another type return -1 with TypeError set. Raises
    TypeError for a type whose objects have no ``__dlpack__``."""
    cls = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    if cls is Tensor:
        return Tensor.__dlpack_c_exchange_api__
    numpy = sys.modules.get("numpy")
    ndarray = getattr(numpy, "ndarray", None) if numpy is not None else None
    if ndarray is not None and issubclass(cls, ndarray) and _numpy_api_ready():
        return _numpy_table
    jax = sys.modules.get("jax")
    jax_array = getattr(jax, "Array", None) if jax is not None else None
    if jax_array is not None and issubclass(cls, jax_array):
        from dlinterop import frameworks
        return frameworks._jax_exchange_table(_generic_table)
    torch = sys.modules.get("torch")
    torch_tensor = getattr(torch, "Tensor", None) if torch is not None else None
    if torch_tensor is not None and issubclass(cls, torch_tensor):
        from dlinterop import frameworks
        return frameworks._torch_exchange_table(_generic_table)
    family = _fixed_family(cls)
    if family is not None:
        from dlinterop import frameworks
        return frameworks._fixed_exchange_table(family, _generic_table)
    if getattr(cls, "__dlpack__", None) is None:
        raise TypeError(f"{cls.__name__} objects have no __dlpack__: no DLPack exchange "
                        "table can take them")
    return _generic_table
