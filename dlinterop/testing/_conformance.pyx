# cython: language_level=3, freethreading_compatible=True
"""The native half of dlinterop.testing, the DLPack conformance checker: capsules read
without being consumed, a consumer's side of a capsule (rename, then one deleter call), and
producers built to order (well-formed or malformed), whose deleters count their calls in C
so that a consumer that leaks or double-frees is seen. Nothing here uses ctypes.

What it uses of the core is only the DLPack structs (dlinterop/dlpack.pxd); see
dlinterop/testing/_conformance.pxd."""
from cpython.buffer cimport PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_GetBuffer
from cpython.ref cimport PyObject
from libc.stdint cimport uintptr_t
from libc.string cimport strcmp

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


# The producers built to order (Producer, its deleters and their counters): an include file
# beside this one, which uses the capsule functions declared above.
include "_conformance_producer.pxi"


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


cdef extern from "Python.h":
    PyObject* PyObject_VectorcallMethod(PyObject* name, PyObject* const* args, size_t nargsf,
                                        PyObject* kwnames) noexcept
    PyObject* PyErr_Occurred() noexcept


cdef const DLPackExchangeAPI* _table_of(object table) except NULL:
    cdef const DLPackExchangeAPI* api = NULL
    if PyCapsule_CheckExact(table):
        api = <const DLPackExchangeAPI*>PyCapsule_GetPointer_raw(<PyObject*>table,
                                                                 b"dlpack_exchange_api")
    if api == NULL:
        PyErr_Clear()
        raise TypeError("expected a \"dlpack_exchange_api\" capsule, got "
                        f"{type(table).__name__}")
    return api


cdef int _failed(const char* what) except -1:
    if PyErr_Occurred() == NULL:
        raise RuntimeError(f"{(<bytes>what).decode()} returned -1 without an exception")
    return -1


def exchange_loop(table, obj, Py_ssize_t n, str kind):
    """n calls, in a C loop, of one way a C consumer gets obj's tensor: "view" (the table's
    dltensor_from_py_object_no_sync), "owned" (managed_tensor_from_py_object_no_sync, then
    the tensor's deleter), or "dlpack" (obj.__dlpack__(max_version=(1, 3)) called through
    the vectorcall protocol, or __dlpack__() where it takes no max_version, the capsule
    read and released; `table` is not used). For the
    benchmarks: a call's cost is then not a Python call's."""
    cdef const DLPackExchangeAPI* api = NULL
    cdef DLTensor view
    cdef DLManagedTensorVersioned* managed
    cdef Py_ssize_t _i
    cdef PyObject* capsule
    cdef PyObject* keywords
    cdef PyObject* args[2]
    if kind == "view":
        api = _table_of(table)
        for _i in range(n):
            if api.dltensor_from_py_object_no_sync(<void*>obj, &view) != 0:
                return _failed(b"dltensor_from_py_object_no_sync")
    elif kind == "owned":
        api = _table_of(table)
        for _i in range(n):
            if api.managed_tensor_from_py_object_no_sync(<void*>obj, &managed) != 0:
                return _failed(b"managed_tensor_from_py_object_no_sync")
            if managed.deleter != NULL:
                managed.deleter(managed)
    elif kind == "dlpack":
        name = "__dlpack__"
        version = (1, 3)
        kwnames = ("max_version",)
        args[0] = <PyObject*>obj
        args[1] = <PyObject*>version
        keywords = <PyObject*>kwnames
        try:
            obj.__dlpack__(max_version=version)
        except TypeError:
            keywords = NULL   # an older producer's signature, as from_dlpack falls back to
        for _i in range(n):
            capsule = PyObject_VectorcallMethod(<PyObject*>name, args, 1, keywords)
            if capsule == NULL:
                return _failed(b"__dlpack__")
            Py_DecRef(capsule)   # unconsumed: its destructor runs the deleter
    else:
        raise ValueError(f"kind must be 'view', 'owned' or 'dlpack', got {kind!r}")
