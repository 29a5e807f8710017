# cython: language_level=3, freethreading_compatible=True
"""The native half of dlinterop.testing, the DLPack conformance checker: capsules read
without being consumed, a consumer's side of a capsule (rename, then one deleter call), and
producers built to order (well-formed or malformed), whose deleters count their calls in C
so that a consumer that leaks or double-frees is seen. Nothing here uses ctypes.

What it uses of the core is only the DLPack structs (dlinterop/dlpack.pxd); see
dlinterop/testing/_conformance.pxd."""
cimport cython
from cpython.buffer cimport PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset, strcmp

from dlinterop.dlpack cimport *
from dlinterop._lib.device_kinds cimport dli_device_host_readable

cdef extern from "Python.h":
    ctypedef void (*RawDestructor)(PyObject*) noexcept
    PyObject* PyCapsule_New_raw "PyCapsule_New"(void* pointer, const char* name,
                                                RawDestructor destructor) noexcept
    const char* PyCapsule_GetName_raw "PyCapsule_GetName"(PyObject* capsule) noexcept
    void* PyCapsule_GetPointer_raw "PyCapsule_GetPointer"(PyObject* capsule,
                                                          const char* name) noexcept
    void* PyCapsule_GetContext_raw "PyCapsule_GetContext"(PyObject* capsule) noexcept
    int PyCapsule_SetContext_raw "PyCapsule_SetContext"(PyObject* capsule, void* context) noexcept
    int PyCapsule_SetName_raw "PyCapsule_SetName"(PyObject* capsule, const char* name) noexcept
    int PyCapsule_CheckExact(object) noexcept
    void Py_DecRef(PyObject*) noexcept
    void PyErr_Clear() noexcept


# ---- deleter counters ---------------------------------------------------------------------
# One counter per producer made here (ids wrap around), changed only by deleters, which are
# plain C and may run on any thread.

DEF COUNTERS = 4096
cdef long _calls[COUNTERS]
memset(_calls, 0, sizeof(_calls))
cdef int _next_id = 0


ctypedef struct Block:
    # One malloc: the managed tensor (versioned or legacy: the capsule points at the one in
    # use), the producer's id, the name the capsule was given, then shape, strides, data.
    DLManagedTensorVersioned versioned
    DLManagedTensor legacy
    int id


cdef void _versioned_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    cdef Block* block = <Block*>m.manager_ctx
    _calls[block.id] += 1
    free(block)


cdef void _legacy_deleter(DLManagedTensor* m) noexcept nogil:
    cdef Block* block = <Block*>m.manager_ctx
    _calls[block.id] += 1
    free(block)


cdef void _destructor(PyObject* capsule) noexcept:
    # The producer's side: the deleter runs when the capsule dies under the name it was
    # given (nobody consumed it), never after a consumer renamed it. The context is the given
    # name, interned for good, behind a 'V' (versioned) or 'L' (legacy) mark.
    cdef const char* given = <const char*>PyCapsule_GetContext_raw(capsule)
    cdef const char* name = PyCapsule_GetName_raw(capsule)
    cdef void* pointer
    if given == NULL or name == NULL or strcmp(given + 1, name) != 0:
        PyErr_Clear()
        return
    pointer = PyCapsule_GetPointer_raw(capsule, name)
    if pointer == NULL:
        PyErr_Clear()
        return
    if given[0] == b'V':
        if (<DLManagedTensorVersioned*>pointer).deleter != NULL:
            (<DLManagedTensorVersioned*>pointer).deleter(<DLManagedTensorVersioned*>pointer)
    elif (<DLManagedTensor*>pointer).deleter != NULL:
        (<DLManagedTensor*>pointer).deleter(<DLManagedTensor*>pointer)


# Names a capsule can be given; the context points at one of these so it outlives the capsule.
cdef dict _NAMES = {}


cdef const char* _interned(bytes name):
    cdef bytes kept = _NAMES.setdefault(name, name)
    return <const char*>kept


@cython.auto_pickle(False)
cdef class Producer:
    """An object whose __dlpack__ returns a capsule built to order. Attributes (set before
    calling): versioned, major, minor, flags, shape, strides (None: NULL), code, bits,
    lanes, device_type, device_id, byte_offset, payload (the bytes placed at byte_offset),
    shift (bytes past byte_offset where the data begins), null_data, null_shape,
    name (None: the standard one),
    old_signature (reject every keyword but stream with TypeError, as producers older than
    DLPack 1.0 do). After a call, `kwargs` holds the keywords the consumer passed and
    `capsule` the capsule it was handed (kept until replaced) and `data_address` where its
    data (after byte_offset) is."""
    cdef public bint versioned
    cdef public int major, minor
    cdef public object flags
    cdef public object shape, strides
    cdef public int code, bits, lanes
    cdef public int device_type, device_id
    cdef public object byte_offset
    cdef public object shift
    cdef public bytes payload
    cdef public bint null_data, null_shape, old_signature, force_versioned
    cdef public object name
    cdef public object kwargs
    cdef public object capsule
    cdef public object ndim_override
    cdef readonly object data_address
    cdef readonly int id

    def __init__(self, payload=b"\0" * 4, shape=(1,), code=kDLUInt, bits=8, **fields):
        global _next_id
        self.versioned = True
        self.major, self.minor = 1, 3
        self.flags = 0
        self.shape = tuple(shape)
        self.strides = None
        self.code, self.bits, self.lanes = code, bits, 1
        self.device_type, self.device_id = kDLCPU, 0
        self.byte_offset = 0
        self.shift = 0
        self.payload = bytes(payload)
        self.null_data = self.null_shape = self.old_signature = self.force_versioned = False
        self.name = None
        self.kwargs = None
        self.capsule = None
        self.ndim_override = None
        self.data_address = None
        for key, value in fields.items():
            if not hasattr(self, key):
                raise TypeError(f"Producer has no field {key!r}")
            setattr(self, key, value)
        self.id = _next_id
        _next_id = (_next_id + 1) % COUNTERS
        _calls[self.id] = 0

    @property
    def deleter_calls(self):
        return _calls[self.id]

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, **kwargs):
        self.kwargs = dict(kwargs)
        if self.old_signature and any(k != "stream" for k in kwargs):
            raise TypeError(f"__dlpack__() got an unexpected keyword argument "
                            f"{next(k for k in kwargs if k != 'stream')!r}")
        # Honours copy=True as a producer must: every capsule here holds its own copy of the
        # payload anyway, so that one is flagged IS_COPIED.
        # And negotiates as a producer must: a versioned capsule only for a consumer that
        # asked for DLPack 1.x.
        max_version = kwargs.get("max_version")
        try:
            modern = max_version is not None and int(max_version[0]) >= 1
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"max_version must be a (major, minor) tuple, got {max_version!r}")
        self.capsule = self.make_capsule(kwargs.get("copy") is True,
                                         self.force_versioned or (self.versioned and modern))
        return self.capsule

    def make_capsule(self, bint copied=False, versioned=None):
        """A new capsule as the fields say; its deleter bumps this producer's counter."""
        cdef int ndim = len(self.shape) if self.ndim_override is None else self.ndim_override
        cdef Py_ssize_t stored = len(self.shape)
        cdef Py_ssize_t offset = self.byte_offset
        cdef size_t header = sizeof(Block) + 2 * stored * sizeof(int64_t)
        # The data pointer is 256-byte aligned (as XLA wants for zero-copy).
        cdef Block* block = <Block*>malloc(header + 256 + offset + len(self.payload) + 8)
        cdef int64_t* dims
        cdef DLTensor* t
        cdef Py_ssize_t i
        cdef bytes name
        cdef bint as_versioned = self.versioned if versioned is None else versioned
        if block == NULL:
            raise MemoryError()
        memset(block, 0, header)
        block.id = self.id
        dims = <int64_t*>(block + 1)
        for i in range(stored):
            dims[i] = self.shape[i]
            dims[stored + i] = self.strides[i] if self.strides is not None else 0
        cdef char* data = <char*>((<uintptr_t>block + header + 255) & ~(<uintptr_t>255))
        # The bytes before byte_offset hold a pattern no payload starts with: a consumer that
        # ignores byte_offset then reads them, every time, not whatever an earlier block left.
        memset(data, 0xA5, offset)
        memcpy(data + offset, <const char*>self.payload, len(self.payload))
        if as_versioned:
            t = &block.versioned.dl_tensor
            block.versioned.version.major = self.major
            block.versioned.version.minor = self.minor
            block.versioned.flags = (<uint64_t>self.flags
                                     | (DLPACK_FLAG_BITMASK_IS_COPIED if copied else 0))
            block.versioned.deleter = _versioned_deleter
            block.versioned.manager_ctx = block
            name = b"dltensor_versioned"
        else:
            t = &block.legacy.dl_tensor
            block.legacy.deleter = _legacy_deleter
            block.legacy.manager_ctx = block
            name = b"dltensor"
        t.data = NULL if self.null_data else <void*>data
        # The payload starts at byte_offset; `shift` more bytes in is where the data pointer
        # designates (negative strides walk back from there).
        t.byte_offset = offset + <Py_ssize_t>self.shift
        self.data_address = <uintptr_t>(data + t.byte_offset)
        t.ndim = ndim
        t.shape = NULL if (self.null_shape or stored == 0) else dims
        t.strides = NULL if (self.strides is None or stored == 0) else dims + stored
        t.dtype.code = <uint8_t>self.code
        t.dtype.bits = <uint8_t>self.bits
        t.dtype.lanes = <uint16_t>self.lanes
        t.device.device_type = <DLDeviceType>self.device_type
        t.device.device_id = self.device_id
        if self.name is not None:
            name = self.name.encode() if isinstance(self.name, str) else bytes(self.name)
        cdef const char* kept = _interned((b"V" if as_versioned else b"L") + name)
        cdef PyObject* capsule = PyCapsule_New_raw(
            <void*>block if as_versioned else <void*>&block.legacy, kept + 1, _destructor)
        if capsule == NULL:
            free(block)
            raise MemoryError()
        PyCapsule_SetContext_raw(capsule, <void*>kept)
        result = <object>capsule
        Py_DecRef(capsule)
        return result


cdef DLTensor* _described(PyObject* raw, const char* name, bint versioned,
                          dict info) except NULL:
    """The tensor of a capsule named `name` (of the versioned struct or the legacy one),
    with what the managed struct says about it added to `info`."""
    cdef void* managed = PyCapsule_GetPointer_raw(raw, name)
    cdef DLManagedTensorVersioned* mv = <DLManagedTensorVersioned*>managed
    cdef DLManagedTensor* ml = <DLManagedTensor*>managed
    if managed == NULL:
        PyErr_Clear()
        raise ValueError("NULL pointer in the capsule")
    if versioned:
        info.update(versioned=True, version=(mv.version.major, mv.version.minor),
                    flags=mv.flags, deleter=mv.deleter != NULL)
        return &mv.dl_tensor
    info.update(versioned=False, version=None, flags=0, deleter=ml.deleter != NULL)
    return &ml.dl_tensor


def capsule_name(capsule):
    """A capsule's name ("" for none), read without the pointer it holds: safe once a
    consumer has freed its struct. None for an object that is not a capsule."""
    if not PyCapsule_CheckExact(capsule):
        return None
    cdef const char* name = PyCapsule_GetName_raw(<PyObject*>capsule)
    if name == NULL:
        PyErr_Clear()
        return ""
    return (<bytes>name).decode(errors="replace")


def buffer_span(obj):
    """(first byte, one past the last byte, read-only) of the memory obj's buffer protocol
    describes (over its strides, which may be negative); None where it has none."""
    cdef Py_buffer view
    cdef Py_ssize_t low = 0, high = 0, span
    cdef int i
    try:
        PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO)
    except Exception:
        return None
    try:
        if view.buf == NULL:
            return None
        if view.ndim == 0 or view.shape == NULL or view.strides == NULL:
            high = view.len
        else:
            for i in range(view.ndim):
                if view.shape[i] == 0:
                    return (<uintptr_t>view.buf, <uintptr_t>view.buf, bool(view.readonly))
                span = (view.shape[i] - 1) * view.strides[i]
                if span < 0:
                    low += span
                else:
                    high += span
            high += view.itemsize
        return (<uintptr_t>view.buf + low, <uintptr_t>view.buf + high, bool(view.readonly))
    finally:
        PyBuffer_Release(&view)


def inspect(capsule):
    """What a DLPack capsule holds, read without consuming it: a dict, or ValueError for an
    object that is not a capsule with a DLPack name."""
    if not PyCapsule_CheckExact(capsule):
        raise ValueError(f"not a capsule: {type(capsule).__name__}")
    cdef PyObject* raw = <PyObject*>capsule
    cdef const char* name = PyCapsule_GetName_raw(raw)
    cdef DLTensor* t
    if name == NULL:
        PyErr_Clear()
        raise ValueError("capsule without a name")
    text = (<bytes>name).decode(errors="replace")
    info = {"name": text}
    if text in ("dltensor_versioned", "used_dltensor_versioned"):
        t = _described(raw, name, True, info)
    elif text in ("dltensor", "used_dltensor"):
        t = _described(raw, name, False, info)
    else:
        return info
    if text.startswith("used_"):
        return info     # its tensor belongs to whoever consumed it
    info.update(
        data=<uintptr_t>t.data, byte_offset=t.byte_offset, ndim=t.ndim,
        dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes),
        device=(<int>t.device.device_type, t.device.device_id),
        shape=None if t.shape == NULL else tuple([t.shape[i] for i in range(max(t.ndim, 0))]),
        strides=None if t.strides == NULL else tuple([t.strides[i]
                                                      for i in range(max(t.ndim, 0))]))
    return info


def read(capsule, Py_ssize_t nbytes):
    """nbytes from an unconsumed capsule's data + byte_offset (host-readable memory only:
    the table of device kinds, src/device_kinds.h)."""
    info = inspect(capsule)
    if "data" not in info or not dli_device_host_readable(info["device"][0]):
        raise ValueError("not an unconsumed host-memory DLPack capsule")
    if nbytes <= 0:
        return b""
    if info["data"] == 0:
        raise ValueError("NULL data")
    return (<char*><uintptr_t>(info["data"] + info["byte_offset"]))[:nbytes]


def consume(capsule):
    """What a consumer does when done: rename to used_* and call the deleter once. Returns
    False when the capsule is not an unconsumed DLPack one."""
    if not PyCapsule_CheckExact(capsule):
        return False
    cdef PyObject* raw = <PyObject*>capsule
    cdef const char* name = PyCapsule_GetName_raw(raw)
    if name == NULL:
        PyErr_Clear()
        return False
    if strcmp(name, b"dltensor_versioned") == 0:
        _release(raw, name, b"used_dltensor_versioned", True)
        return True
    if strcmp(name, b"dltensor") == 0:
        _release(raw, name, b"used_dltensor", False)
        return True
    return False


cdef void _release(PyObject* raw, const char* name, const char* used, bint versioned):
    """Renames the capsule to `used` and calls its managed tensor's deleter once."""
    cdef void* managed = PyCapsule_GetPointer_raw(raw, name)
    cdef DLManagedTensorVersioned* mv = <DLManagedTensorVersioned*>managed
    cdef DLManagedTensor* ml = <DLManagedTensor*>managed
    PyCapsule_SetName_raw(raw, used)
    if managed == NULL:
        return
    if versioned and mv.deleter != NULL:
        mv.deleter(mv)
    elif not versioned and ml.deleter != NULL:
        ml.deleter(ml)


def exchange_table(cls):
    """The DLPack C exchange table cls publishes, described: None when there is none, else a
    dict (capsule name, version, which functions are set)."""
    table = getattr(cls, "__dlpack_c_exchange_api__", None)
    if table is None:
        return None
    if not PyCapsule_CheckExact(table):
        return {"kind": type(table).__name__}
    cdef PyObject* raw = <PyObject*>table
    cdef const char* name = PyCapsule_GetName_raw(raw)
    cdef const DLPackExchangeAPI* api
    if name == NULL:
        PyErr_Clear()
        return {"kind": "capsule", "name": None}
    api = <const DLPackExchangeAPI*>PyCapsule_GetPointer_raw(raw, name)
    if api == NULL:
        PyErr_Clear()
        return {"kind": "capsule", "name": (<bytes>name).decode(errors="replace"), "null": True}
    return {
        "kind": "capsule", "name": (<bytes>name).decode(errors="replace"),
        "version": (api.header.version.major, api.header.version.minor),
        "functions": {
            "managed_tensor_allocator": api.managed_tensor_allocator != NULL,
            "managed_tensor_from_py_object_no_sync":
                api.managed_tensor_from_py_object_no_sync != NULL,
            "managed_tensor_to_py_object_no_sync": api.managed_tensor_to_py_object_no_sync != NULL,
            "dltensor_from_py_object_no_sync": api.dltensor_from_py_object_no_sync != NULL,
            "current_work_stream": api.current_work_stream != NULL,
        },
    }


def exchange_round_trip(obj):
    """Through obj's type's exchange table: managed_tensor_from_py_object_no_sync, then
    managed_tensor_to_py_object_no_sync on it, and dltensor_from_py_object_no_sync; returns
    (data pointer of the managed tensor, the object made back, data pointer of the view)."""
    table = getattr(type(obj), "__dlpack_c_exchange_api__")
    cdef const DLPackExchangeAPI* api = <const DLPackExchangeAPI*>PyCapsule_GetPointer_raw(
        <PyObject*>table, b"dlpack_exchange_api")
    cdef DLManagedTensorVersioned* m = NULL
    cdef void* out = NULL
    cdef DLTensor view
    cdef uintptr_t managed_ptr, view_ptr
    if api == NULL:
        PyErr_Clear()
        raise ValueError("the exchange table capsule is not named 'dlpack_exchange_api'")
    if api.managed_tensor_from_py_object_no_sync(<void*>obj, &m) != 0:
        raise RuntimeError("managed_tensor_from_py_object_no_sync failed without an exception")
    managed_ptr = <uintptr_t>m.dl_tensor.data + m.dl_tensor.byte_offset
    if api.managed_tensor_to_py_object_no_sync(m, &out) != 0:
        raise RuntimeError("managed_tensor_to_py_object_no_sync failed without an exception")
    back = <object>out
    Py_DecRef(<PyObject*>out)
    if api.dltensor_from_py_object_no_sync(<void*>obj, &view) != 0:
        raise RuntimeError("dltensor_from_py_object_no_sync failed without an exception")
    view_ptr = <uintptr_t>view.data + view.byte_offset
    return managed_ptr, back, view_ptr
