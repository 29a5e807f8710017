# Provides: the native NumPy routes, both ways: exact ndarrays imported through NumPy's C API
# with no Python call, and the ndarray handed back by to_framework(t, like=numpy).
# Uses: runtime.pxi, once.pxi, tensor_base.pxi, layouts.pxi, consume.pxi (the probes'
# capsules).
#
# NumPy publishes no exchange table, so an exact numpy.ndarray is read through NumPy's C
# API instead (src/numpy_route.c), with no Python call: what its __dlpack__ would put in a
# capsule, the array itself as owner. Arrays that route cannot describe exactly as NumPy
# would (user dtypes such as ml_dtypes', byte-swapped, long double, strides that are not
# whole items, memory NumPy imported from elsewhere) take the __dlpack__ route.

cdef extern from "numpy_route.h":
    int dli_numpy_built() noexcept
    int dli_numpy_init() noexcept
    int dli_numpy_is_array(PyObject* obj) noexcept
    int dli_numpy_exchange_view(void* obj, DLTensor* out) noexcept
    ctypedef int (*dli_numpy_view_otherwise_fn)(PyObject* obj, DLTensor* out, int status) noexcept
    void dli_numpy_set_view_otherwise(dli_numpy_view_otherwise_fn otherwise) noexcept
    int dli_numpy_view(PyObject* obj, DLTensor* out, int64_t* storage, int max_ndim,
                       int user_types, int* readonly) noexcept
    int dli_numpy_register_user_type(int type_num, int code) noexcept
    PyObject* dli_numpy_wrap(const DLTensor* t, int readonly, PyObject* base) noexcept

# 1 (on), 0 (off), or a set-up state (SETUP_UNDECIDED, SETUP_DECIDING).
cdef Py_ssize_t _numpy_route_state = SETUP_UNDECIDED
# The way back (dl.to_framework(t, like=numpy)): an ndarray made through the same C API,
# with the Tensor as its base, once probes show it equal to np.from_dlpack's. Decided on
# its own: it does not depend on how this NumPy's __dlpack__ writes strides.
cdef Py_ssize_t _numpy_handback_state = SETUP_UNDECIDED
_register_setup("numpy_route", &_numpy_route_state)
_register_setup("numpy_handback", &_numpy_handback_state)


cdef Tensor _import_numpy_native(object array):
    """The Tensor the __dlpack__ route would give for `array`, or None to take that route."""
    cdef DLTensor dl
    cdef int64_t storage[2 * MAX_NDIM]
    cdef int readonly = 0
    if dli_numpy_view(<PyObject*>array, &dl, storage, MAX_NDIM, 0, &readonly) != 0:
        return None
    _validate_dltensor(&dl)
    return _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0, array)


cdef int _numpy_native_for(type cls) except -2:
    """What the producer cache records for `cls`: 1 when it is numpy.ndarray and the native
    route is on, 0 when not, -1 while the route is being decided (ask again)."""
    numpy = _module_if_run("numpy")
    if numpy is None:
        # NumPy is not imported, or another thread is importing it: it is in sys.modules
        # half made (numpy.ndarray may not be bound yet), and once it has run importlib
        # takes it out of sys.modules and puts it back. Recorded as 0, an array type seen
        # meanwhile would never take the route: ask again.
        named_ndarray = getattr(cls, "__module__", None) == "numpy" and cls.__name__ == "ndarray"
        return -1 if named_ndarray else 0
    if cls is not numpy.ndarray:
        return 0
    cdef Py_ssize_t answer = _decided(&_numpy_route_state, _set_up_numpy_route, numpy)
    return <int>answer if answer >= 0 else -1


cdef bint _numpy_api_ready():
    """NumPy's C API imported (a no-op once done); False where the build lacks it."""
    if not dli_numpy_built():
        return False
    if dli_numpy_init() != 0:
        PyErr_Clear()
        return False
    return True


cdef list _numpy_probe_arrays(object numpy):
    """The layouts, dtypes and flags on which both NumPy routes must agree with NumPy."""
    base = numpy.arange(24, dtype=numpy.float32).reshape(2, 3, 4)
    frozen = numpy.arange(6, dtype=numpy.int16)
    frozen.flags.writeable = False
    return [base, base[:, ::2, 1:], base.transpose(2, 0, 1), base[:, :1, ::3],
            base[:0, :, ::2], base[:1, 1:2, ::4], base[1, 2, 3:3], base[1, 2, 3, ...],
            base[::-1, :1, ::-3], numpy.zeros((), bool), frozen,
            numpy.zeros(3, numpy.complex64)[::-1]]


cdef Py_ssize_t _set_up_numpy_route(object numpy) except -4:
    """Sets the route up once per process: NumPy's C API, then probes on which the route
    must agree with this NumPy's own __dlpack__ (NumPy versions differ, in the strides of
    dimensions of size 0 or 1 for one). 1 when it agrees everywhere; any disagreement
    leaves __dlpack__ in charge (0)."""
    if not _numpy_api_ready():
        return 0
    try:
        probes = _numpy_probe_arrays(numpy)
        for probe in probes:
            native = _import_numpy_native(probe)
            exported = _tensor_from_capsule(probe.__dlpack__(max_version=_MAX_VERSION))
            if native is None or not _same_view(native, exported):
                return 0
    except Exception:
        return 0
    return 1


cdef Py_ssize_t _set_up_numpy_handback(object numpy) except -4:
    cdef Tensor probe
    if not _numpy_api_ready():
        return 0
    try:
        arrays = _numpy_probe_arrays(numpy)
        for array in arrays:
            probe = _tensor_from_capsule(array.__dlpack__(max_version=_MAX_VERSION))
            ours = _wrap_as_ndarray(probe)
            theirs = numpy.from_dlpack(probe)
            if (ours is None or type(ours) is not numpy.ndarray or ours.dtype != theirs.dtype
                    or ours.shape != theirs.shape or ours.strides != theirs.strides
                    or ours.flags.writeable != theirs.flags.writeable
                    or ours.__array_interface__["data"] != theirs.__array_interface__["data"]):
                return 0
    except Exception:
        return 0
    return 1


cdef object _wrap_as_ndarray(Tensor t):
    cdef PyObject* raw = dli_numpy_wrap(
        &t.dl, (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, <PyObject*>t)
    if raw == NULL:
        if PyErr_Occurred() != NULL:
            raise_pending_error()
        return None
    result = <object>raw
    Py_DecRef(raw)
    return result


cdef object numpy_array_from(Tensor t):
    """An exact numpy.ndarray sharing t's memory (t is its base), equal to what
    numpy.from_dlpack(t) makes but with no Python call; None where NumPy's from_dlpack
    must decide (NumPy not imported, a device other than the CPU, a dtype outside NumPy's
    builtin table, the route off or still being decided)."""
    if _numpy_handback_state != 1:
        if _numpy_handback_state == 0:
            return None
        numpy = _module_if_run("numpy")
        if numpy is None or _decided(&_numpy_handback_state, _set_up_numpy_handback,
                                     numpy) != 1:
            return None
    return _wrap_as_ndarray(t)


cdef bint _same_view(Tensor a, Tensor b):
    cdef int i
    if (a.dl.data != b.dl.data or a.dl.byte_offset != b.dl.byte_offset
            or a.dl.ndim != b.dl.ndim or a.dl.dtype.code != b.dl.dtype.code
            or a.dl.dtype.bits != b.dl.dtype.bits or a.flags != b.flags):
        return False
    for i in range(a.dl.ndim):
        if a.dl.shape[i] != b.dl.shape[i] or a.dl.strides[i] != b.dl.strides[i]:
            return False
    return True


def _numpy_route():
    """Testing aid: True when exact numpy.ndarray objects are imported natively, False when
    they take __dlpack__, None while undecided (NumPy not imported or no import yet)."""
    if _numpy_route_state < 0:
        return None
    return _numpy_route_state == 1


def _numpy_handback():
    """Testing aid: True when dl.to_framework(t, like=numpy) makes the ndarray natively."""
    return _numpy_handback_state == 1
