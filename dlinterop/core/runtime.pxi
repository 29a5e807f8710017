# Provides: the C declarations the core uses (CPython's raw API; src/runtime.h: the
# allocator's counters, strided copies and sub-byte packing; src/atomics.h; an int's value
# read without a call, src/small_long.h; the lifetime sanitizer's hooks, src/sanitizer.h),
# the core's constants (alignment, dlinterop's own flag bits, the newest DLPack version),
# and raise_pending_error.
# Uses: nothing.

cdef extern from "Python.h":
    # Declared here with PyObject* so that capsule destructors never touch the refcount of
    # the capsule being destroyed, and the hot import path calls __dlpack__ without
    # creating a bound method.
    ctypedef void (*RawCapsuleDestructor)(PyObject*) noexcept
    PyObject* PyCapsule_New_raw "PyCapsule_New"(void* pointer, const char* name,
                                                RawCapsuleDestructor destructor) noexcept
    const char* PyCapsule_GetName_raw "PyCapsule_GetName"(PyObject* capsule) noexcept
    void* PyCapsule_GetPointer(PyObject* capsule, const char* name) noexcept
    PyObject* PyErr_Occurred() noexcept nogil
    int PyGILState_Check() noexcept nogil
    ctypedef struct PyTypeObject:
        PyObject* tp_dict
        unsigned long tp_flags
    PyObject* PyObject_Vectorcall_raw "PyObject_Vectorcall"(
        PyObject* callable, PyObject** args, size_t nargsf, PyObject* kwnames) noexcept
    void PyType_Modified(PyTypeObject*)
    int PyDict_SetItemString(object, const char*, object) except -1
    void PyErr_Clear() noexcept
    void* PyMem_Malloc(size_t) noexcept nogil
    void PyMem_Free(void*) noexcept nogil
    PyObject* PyObject_VectorcallMethod_raw "PyObject_VectorcallMethod"(
        PyObject* name, PyObject** args, size_t nargsf, PyObject* kwnames) noexcept
    int PyErr_ExceptionMatches(PyObject* exc) noexcept
    Py_ssize_t PyTuple_GET_SIZE(object) noexcept
    PyObject* PyTuple_GET_ITEM(object, Py_ssize_t) noexcept
    long PyLong_AsLongAndOverflow(PyObject*, int*) noexcept
    long long PyLong_AsLongLongAndOverflow(PyObject*, int*) noexcept
    bint PyLong_CheckExact(PyObject* o) noexcept
    bint PyTuple_CheckExact(PyObject* o) noexcept
    bint PyList_CheckExact(PyObject* o) noexcept
    Py_ssize_t PyList_GET_SIZE(PyObject* o) noexcept
    PyObject* PyList_GET_ITEM(PyObject* o, Py_ssize_t i) noexcept
    double PyFloat_AS_DOUBLE(object) noexcept
    void Py_IncRef(PyObject*) noexcept nogil
    void Py_DecRef(PyObject*) noexcept nogil
    void PyErr_Fetch(PyObject**, PyObject**, PyObject**) noexcept nogil
    void PyErr_Restore(PyObject*, PyObject*, PyObject*) noexcept nogil
    ctypedef enum PyGILState_STATE:
        PyGILState_LOCKED
        PyGILState_UNLOCKED
    PyGILState_STATE PyGILState_Ensure() noexcept nogil
    void PyGILState_Release(PyGILState_STATE) noexcept nogil


cdef extern from "runtime.h" nogil:
    ctypedef struct dli_stats:
        int64_t live_buffers
        int64_t live_bytes
        int64_t peak_bytes
        int64_t total_allocations
    void* dli_host_alloc(size_t nbytes, size_t alignment, int zero, void** base_out)
    void dli_host_free(void* base, size_t nbytes)
    void dli_stats_read(dli_stats* out)
    int dli_interpreter_alive()
    void dli_copy_to_contiguous(char* dst, const char* src, int ndim, const int64_t* shape,
                                const int64_t* strides, size_t itemsize)
    void dli_fill(char* dst, const char* pattern, size_t itemsize, int64_t count)
    void dli_arange_int(void* dst, int code, int bits, int64_t start, int64_t step,
                        int64_t count)
    void dli_arange_double(void* dst, int bits, double start, double step, int64_t count)
    void dli_pack_codes(uint8_t* dst, const uint8_t* src, int ndim, const int64_t* shape,
                        const int64_t* strides, int bits, int src_step)
    void dli_unpack_codes(uint8_t* dst, const uint8_t* src, int64_t count, int bits)
    bint __builtin_mul_overflow(int64_t a, int64_t b, int64_t* out)
    bint __builtin_add_overflow(int64_t a, int64_t b, int64_t* out)


# Free-threaded CPython (no GIL): what the GIL used to serialise is made safe with atomics
# (declared here), a compare-and-swap claim for the one-time set-ups, which hold no lock
# (once.pxi), and a critical section per capsule consumed (consume.pxi).
cdef extern from "atomics.h":
    void dli_atomic_add(Py_ssize_t* p, Py_ssize_t v) noexcept nogil
    Py_ssize_t dli_atomic_load(const Py_ssize_t* p) noexcept nogil
    void dli_atomic_store(Py_ssize_t* p, Py_ssize_t v) noexcept nogil

# The lifetime sanitizer's hooks (src/sanitizer.h): each a load and a branch while it is off.
cdef extern from "sanitizer.h":
    enum:
        DLI_SAN_EXPORT
        DLI_SAN_IMPORT
        DLI_SAN_EXPORT_MALLOC
    int dli_san_on() noexcept nogil
    int dli_san_start(size_t quarantine_count, size_t quarantine_bytes, int frames) except -1
    void dli_san_stop() noexcept
    int dli_san_recording() noexcept nogil
    void dli_san_write_reports(int written) noexcept
    Py_ssize_t dli_san_report_total() noexcept
    void dli_san_exported(const void* block, PyObject* capsule) noexcept
    # Safe without the GIL too (the exchange allocator's tensors).
    void dli_san_made(const void* key, int kind, const char* what) noexcept nogil
    # Called with the GIL held from functions Cython knows as nogil (the deleters).
    int dli_san_export_released(void* block) noexcept nogil
    void dli_san_released_after_shutdown(const void* block) noexcept nogil
    void dli_san_import_released(const void* key) noexcept
    void dli_san_imported(void* managed, int versioned, const char* what) noexcept
    void dli_san_consumed_twice(const void* key, const char* name) noexcept
    int dli_san_watch(void* managed, int versioned, const char* what) noexcept
    void dli_san_note_producer(PyObject* type) noexcept
    int dli_san_report_to(int fd, int write_notes) except -1
    object dli_san_live()
    object dli_san_reports(int clear)
    object dli_san_notes()

# An exact int's value read without a call (src/small_long.h).
cdef extern from "small_long.h":
    bint dli_small_long(PyObject* o, long* out) noexcept


cdef size_t DEFAULT_ALIGNMENT = 256
cdef uint64_t FLAG_READ_ONLY_ASSUMED = (<uint64_t>1) << FLAG_READ_ONLY_ASSUMED_BIT
cdef uint64_t FLAG_REPACKED = (<uint64_t>1) << FLAG_REPACKED_BIT

__dlpack_version__ = (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)


cdef tuple _MAX_VERSION = (1, DLPACK_MINOR_VERSION)


cdef int raise_pending_error() except -1:
    """Propagates the exception a C callee set; makes one if it set none."""
    if PyErr_Occurred() == NULL:
        raise BufferError("a DLPack producer reported failure without setting an exception")
    return -1
