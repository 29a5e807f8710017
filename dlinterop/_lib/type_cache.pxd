# The per-type cache of src/type_cache.h (no module of its own: compiled into each module
# that cimports this file). It holds a value per type without keeping the type alive.
from cpython.ref cimport PyObject


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
