# Provides: exchange tables for types whose objects never change their memory or layout
# (pyarrow's Array and Tensor, Warp's array): views and owned tensors described once per
# object, by the framework's own __dlpack__, then read from a per-object record; that
# framework's object on the way back.
# Uses: handback.pxi (to_framework_c); of the core: keep_layout, owned_export_block,
# tensor_from_producer, tensor_from_managed.

# A pyarrow Array or Tensor is immutable: its buffers and layout are fixed when it is made.
# A Warp array's pointer, shape and strides are fixed too (Warp never moves an array's
# memory; assign() and fill_() write into it). So the view an object's own export gives is
# the view for the object's whole life: it is described once, through __dlpack__ (so it is
# exactly the framework's own description), and kept until the object dies, in a record
# keyed by the object's address that a weak-reference callback drops at its death (before
# the address can be reused). Later views copy the record: no Python call; an owned
# tensor holds a reference to the object (which keeps the memory), with the record's
# layout and flags.

cdef dict _fixed_views = {}   # object address -> (weak reference, _FixedView record)

ctypedef struct _FixedView:
    DLTensor view       # shape and strides in a block kept as long as the object
    uint64_t flags      # DLPack's flags of the framework's export (READ_ONLY)


cdef object _fixed_record(object obj, object key):
    """Describes obj's view through its __dlpack__ and records it."""
    cdef _FixedView record
    cdef DLTensor view
    cdef Tensor t = tensor_from_producer(obj)
    cdef int64_t layout[2 * MAX_NDIM]
    cdef int i
    cdef int64_t step = 1
    if t.dl.ndim > MAX_NDIM:
        raise BufferError(f"a {type(obj).__name__} of {t.dl.ndim} dimensions: dlinterop "
                          f"takes {MAX_NDIM}")
    view = t.dl
    for i in range(view.ndim - 1, -1, -1):
        layout[i] = view.shape[i]
        if view.strides != NULL:
            layout[view.ndim + i] = view.strides[i]
        else:
            layout[view.ndim + i] = step
            step *= view.shape[i] if view.shape[i] > 1 else 1
    kept = keep_layout(obj, layout, view.ndim)
    view.shape = <int64_t*>kept
    view.strides = <int64_t*>kept + view.ndim
    record.view = view
    # READ_ONLY where the export said so; not where dlinterop only assumed it (a legacy
    # capsule, Warp's, which cannot say).
    record.flags = DLPACK_FLAG_BITMASK_READ_ONLY if read_only_by_flag(t) else 0
    recorded = PyBytes_FromStringAndSize(<const char*>&record, sizeof(_FixedView))

    def drop(ref):
        # Only this object's record: the address may since be another object's.
        current = dict_get(_fixed_views, key)
        if current is not None and (<tuple>current)[0] is ref:
            _fixed_views.pop(key, None)
    entry = (weakref.ref(obj, drop), recorded)
    return _fixed_views.setdefault(key, entry)


cdef const _FixedView* _fixed_record_of(void* py_object, dict kinds, str what) except NULL:
    """obj's record, described on first sight; TypeError for an object of another type.
    `kinds`: the family's base type (under None) and every concrete type seen to belong."""
    cls = <object>Py_TYPE(<object>py_object)
    if dict_get(kinds, cls) is None:
        if not isinstance(<object>py_object, kinds[None]):
            raise TypeError(f"dlinterop's exchange table for {what} takes {what} objects, "
                            f"got {cls.__name__}")
        kinds[cls] = True
    key = PyLong_FromVoidPtr(py_object)
    entry = dict_get(_fixed_views, key)
    if entry is None or (<tuple>entry)[0]() is not <object>py_object:
        entry = _fixed_record(<object>py_object, key)
    return <const _FixedView*>PyBytes_AS_STRING((<tuple>entry)[1])


cdef int _fixed_view(void* py_object, DLTensor* out, dict kinds, str what) except -1:
    out[0] = _fixed_record_of(py_object, kinds, what).view
    return 0


cdef int _fixed_to_managed(void* py_object, DLManagedTensorVersioned** out,
                           dict kinds, str what) except -1:
    """An owning tensor holding a reference to the object (whose memory it keeps), its
    layout copied from the record."""
    cdef const _FixedView* record = _fixed_record_of(py_object, kinds, what)
    cdef DLManagedTensorVersioned* m = owned_export_block(<PyObject*>py_object,
                                                          record.view.ndim)
    cdef int64_t* layout
    cdef int i
    if m == NULL:
        raise MemoryError()
    layout = <int64_t*>(m + 1)
    m.dl_tensor = record.view
    for i in range(record.view.ndim):
        layout[i] = record.view.shape[i]
        layout[record.view.ndim + i] = record.view.strides[i]
    m.dl_tensor.shape = layout
    m.dl_tensor.strides = layout + record.view.ndim
    m.flags = record.flags
    out[0] = m
    return 0


cdef int _fixed_to_py(DLManagedTensorVersioned* tensor, void** out_py_object,
                      object like) except -1:
    """Steals `tensor`; a new reference to an object of like's framework sharing it."""
    t = tensor_from_managed(tensor, False)   # from here the Tensor owns it
    result = to_framework_c(t, like)
    Py_INCREF(result)
    out_py_object[0] = <void*>result
    return 0


# One table per type family; their functions differ only in the types they take and the
# type they give back.

# Per family: {None: its base type, concrete type: True for each seen to belong}.
cdef dict _arrow_arrays = {}
cdef dict _arrow_tensors = {}
cdef dict _warp_arrays = {}


cdef int _arrow_array_view(void* obj, DLTensor* out) except -1:
    return _fixed_view(obj, out, _arrow_arrays, "pyarrow.Array")


cdef int _arrow_array_owned(void* obj, DLManagedTensorVersioned** out) except -1:
    return _fixed_to_managed(obj, out, _arrow_arrays, "pyarrow.Array")


cdef int _arrow_array_to_py(DLManagedTensorVersioned* tensor, void** out) except -1:
    return _fixed_to_py(tensor, out, _arrow_arrays[None])


cdef int _arrow_tensor_view(void* obj, DLTensor* out) except -1:
    return _fixed_view(obj, out, _arrow_tensors, "pyarrow.Tensor")


cdef int _arrow_tensor_owned(void* obj, DLManagedTensorVersioned** out) except -1:
    return _fixed_to_managed(obj, out, _arrow_tensors, "pyarrow.Tensor")


cdef int _arrow_tensor_to_py(DLManagedTensorVersioned* tensor, void** out) except -1:
    return _fixed_to_py(tensor, out, _arrow_tensors[None])


cdef int _warp_view(void* obj, DLTensor* out) except -1:
    return _fixed_view(obj, out, _warp_arrays, "warp.array")


cdef int _warp_owned(void* obj, DLManagedTensorVersioned** out) except -1:
    return _fixed_to_managed(obj, out, _warp_arrays, "warp.array")


cdef int _warp_to_py(DLManagedTensorVersioned* tensor, void** out) except -1:
    return _fixed_to_py(tensor, out, _warp_arrays[None])


cdef DLPackExchangeAPI _arrow_array_api
cdef DLPackExchangeAPI _arrow_tensor_api
cdef DLPackExchangeAPI _warp_api
cdef dict _fixed_tables = {}   # family name -> capsule


cdef object _fixed_table(DLPackExchangeAPI* api, generic, void* view, void* owned,
                         void* to_py):
    base = <const DLPackExchangeAPI*>PyCapsule_GetPointer(generic, b"dlpack_exchange_api")
    api[0] = base[0]
    api.header.prev_api = NULL
    api.dltensor_from_py_object_no_sync = <DLPackDLTensorFromPyObjectNoSync>view
    api.managed_tensor_from_py_object_no_sync = <DLPackManagedTensorFromPyObjectNoSync>owned
    api.managed_tensor_to_py_object_no_sync = <DLPackManagedTensorToPyObjectNoSync>to_py
    return PyCapsule_New(api, b"dlpack_exchange_api", NULL)


def _fixed_exchange_table(str family, generic):
    """The exchange table for pyarrow's Arrays ("pyarrow.Array"), its Tensors
    ("pyarrow.Tensor") or Warp's arrays ("warp.array"), made once (dl.exchange_api_for
    asks once the framework is imported); `generic` is the core's generic table, whose
    allocator and stream these share."""
    with _tables_lock:
        table = _fixed_tables.get(family)
        if table is not None:
            return table
        if family == "pyarrow.Array":
            _arrow_arrays[None] = sys.modules["pyarrow"].Array
            table = _fixed_table(&_arrow_array_api, generic, <void*>_arrow_array_view,
                                 <void*>_arrow_array_owned, <void*>_arrow_array_to_py)
        elif family == "pyarrow.Tensor":
            _arrow_tensors[None] = sys.modules["pyarrow"].Tensor
            table = _fixed_table(&_arrow_tensor_api, generic, <void*>_arrow_tensor_view,
                                 <void*>_arrow_tensor_owned, <void*>_arrow_tensor_to_py)
        elif family == "warp.array":
            _warp_arrays[None] = sys.modules["warp"].array
            table = _fixed_table(&_warp_api, generic, <void*>_warp_view, <void*>_warp_owned,
                                 <void*>_warp_to_py)
        else:
            raise ValueError(f"no fixed-layout exchange table for {family!r}")
        _fixed_tables[family] = table
        return table


def _fixed_view_count():
    """Testing aid: how many objects' views are recorded (their records go as they die)."""
    return len(_fixed_views)
