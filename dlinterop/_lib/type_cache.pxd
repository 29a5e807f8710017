# The per-type cache of src/type_cache.h (no module of its own: compiled into each module
# that cimports this file). It holds a value per type without keeping the type alive.
from cpython.ref cimport Py_DECREF, PyObject

from dlinterop._lib.threadsafe cimport type_version


cdef extern from "type_cache.h":
    ctypedef struct dli_type_cache:
        pass
    # A new reference to the value for `type` made under `tag`, or NULL. Never raises.
    PyObject* type_cache_get "dli_type_cache_get" (
        dli_type_cache* cache, PyObject* type, unsigned int tag) noexcept
    # With a GIL, the value found last for `type` under `tag`, borrowed (valid until Python
    # code may run), or NULL; always NULL without a GIL. Never raises.
    PyObject* type_cache_last "dli_type_cache_last" (
        dli_type_cache* cache, PyObject* type, unsigned int tag) noexcept
    # `callback(ref)` runs when the type dies and must call type_cache_forget(cache, ref).
    int type_cache_put "dli_type_cache_put" (
        dli_type_cache* cache, PyObject* type, unsigned int tag, PyObject* value,
        PyObject* callback) except -1
    void type_cache_forget "dli_type_cache_forget" (
        dli_type_cache* cache, PyObject* ref) noexcept
    Py_ssize_t type_cache_size "dli_type_cache_size" (dli_type_cache* cache) noexcept


# Describes a type for its cache entry: the value, and in tag[0] the version tag the value
# holds for (read after the description, which may give the type one).
ctypedef object (*type_describer)(type cls, unsigned int* tag)


cdef inline object type_cache_fetch(dli_type_cache* cache, type cls, type_describer describe,
                                    object forget):
    """The value cached for `cls` under its current version tag, else a new one from
    `describe`, cached (forget: the callback of type_cache_put). The slow half of every
    per-type lookup; the fast half is type_cache_last."""
    cdef unsigned int tag
    # The cache hands out a reference of our own: without a GIL another thread may replace
    # the entry meanwhile.
    cdef PyObject* cached = type_cache_get(cache, <PyObject*>cls, type_version(cls))
    if cached != NULL:
        value = <object>cached
        Py_DECREF(value)
        return value
    value = describe(cls, &tag)
    type_cache_put(cache, <PyObject*>cls, tag, <PyObject*>value, <PyObject*>forget)
    return value
