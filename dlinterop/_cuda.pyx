# cython: language_level=3, boundscheck=False, wraparound=False
# cython: freethreading_compatible=True, auto_pickle=False
"""dlinterop._cuda: the CUDA allocator and streams. Built only when CMake finds a CUDA
compiler, with the CUDA runtime linked statically: it imports where there is no toolkit,
driver or GPU, and then reports device_count() == 0."""

cimport cython
from libc.stdint cimport int32_t, int64_t, uintptr_t

from dlinterop.dlpack cimport DLDevice, DLDeviceType
from dlinterop._cuda_table cimport dli_cuda_table
from dlinterop._lib.rules cimport MAX_NDIM
from dlinterop._lib.threadsafe cimport dict_get

from dlinterop._core import CUDAError, CUDAOutOfMemoryError


cdef extern from "cuda_layer.h" nogil:
    int dli_cuda_device_count(int* out)
    int dli_cuda_runtime_version(int* out)
    int dli_cuda_driver_version(int* out)
    const char* dli_cuda_error_name(int err)
    const char* dli_cuda_error_string(int err)
    int dli_cuda_is_out_of_memory(int err)
    int dli_cuda_malloc(int kind, int device, size_t nbytes, int zero, void* stream, void** out)
    int dli_cuda_free(int kind, int device, void* ptr, void* stream)
    int dli_cuda_memcpy(void* dst, const void* src, size_t nbytes, void* stream)
    int dli_cuda_gather(void* dst, const void* src, int ndim, const int64_t* shape,
                        const int64_t* strides, size_t itemsize, int device, void* stream)
    int dli_cuda_fill(void* dst, const void* pattern, size_t itemsize, int64_t count, int device,
                      void* stream)
    int dli_cuda_stream_create(int device, void** out)
    int dli_cuda_stream_destroy(int device, void* stream)
    int dli_cuda_stream_synchronize(void* stream)
    int dli_cuda_device_synchronize(int device)
    int dli_cuda_stream_wait(int device, void* producer, void* consumer)
    int dli_cuda_pointer_device(const void* ptr, int* device, int* device_type)
    int dli_cuda_ipc_export(const void* ptr, int device, void* handle, size_t* offset,
                            size_t* size)
    int dli_cuda_ipc_open(const void* handle, int device, void** base, size_t* size)
    int dli_cuda_ipc_close(int device, void* base)
    int dli_cuda_ipc_event_record(int device, void* stream, void* handle, void** event)
    int dli_cuda_ipc_event_wait(int device, const void* handle, void* stream)
    int dli_cuda_event_destroy(int device, void* event)
    void* dli_cuda_current_stream(int device)
    void dli_cuda_set_current_stream(int device, void* stream)


cdef int check(int err) except -1:
    """Turns a CUDA runtime error code into CUDAError (CUDAOutOfMemoryError for OOM)."""
    if err == 0:
        return 0
    name = dli_cuda_error_name(err).decode(errors="replace")
    message = dli_cuda_error_string(err).decode(errors="replace")
    cdef int count = 0
    if err in _NO_GPU_ERRORS and (dli_cuda_device_count(&count) != 0 or count == 0):
        # The runtime's own words ("CUDA driver version is insufficient for CUDA runtime
        # version") hide the usual cause: there is no GPU, or no NVIDIA driver, at all.
        raise CUDAError(err, "no CUDA GPU is available: dl.cuda.is_available() is False "
                             "(this machine has no NVIDIA GPU, or no driver for it recent "
                             f"enough for CUDA {_runtime_version_text()}) [{name}]")
    cls = CUDAOutOfMemoryError if dli_cuda_is_out_of_memory(err) else CUDAError
    raise cls(err, f"{name}: {message}")


# cudaErrorStubLibrary, cudaErrorInsufficientDriver, cudaErrorNoDevice: the errors the
# runtime gives where no GPU can be reached at all.
cdef frozenset _NO_GPU_ERRORS = frozenset({34, 35, 100})


cdef str _runtime_version_text():
    cdef int version = 0
    dli_cuda_runtime_version(&version)
    return f"{version // 1000}.{version % 1000 // 10}"


# ---- statistics per (memory kind, device) -------------------------------------------------
# Changed only while holding the GIL (and, where there is none, inside a critical section
# on the entry), except by the nogil free below, which the GIL-free exchange-API
# allocator's deleter uses; those frees are counted when the GIL is next taken.

cdef dict _stats = {}


cdef dict _stats_for(int kind, int device):
    key = (kind, device)
    entry = dict_get(_stats, key)
    if entry is None:
        # setdefault: of two threads adding one key, both count into the entry kept.
        entry = _stats.setdefault(key, {"live_buffers": 0, "live_bytes": 0, "peak_bytes": 0,
                                        "total_allocations": 0, "live_exports": 0})
    return entry


def memory_stats(int kind, int device):
    return dict(_stats_for(kind, device))


def alloc(size_t nbytes, int kind, int device, bint zero):
    """Allocates device (2), pinned host (3), managed (13) or IPC-capable device (0x10002,
    counted as device) memory; returns its address."""
    cdef void* ptr = NULL
    cdef void* stream = dli_cuda_current_stream(device)
    with nogil:
        err = dli_cuda_malloc(kind, device, nbytes, zero, stream, &ptr)
    check(err)
    entry = _stats_for(kind & 0xFFFF, device)
    with cython.critical_section(entry):
        entry["live_buffers"] += 1
        entry["live_bytes"] += nbytes
        entry["total_allocations"] += 1
        entry["peak_bytes"] = max(entry["peak_bytes"], entry["live_bytes"])
    return <uintptr_t>ptr


cdef void free_nogil(void* base, size_t nbytes, DLDevice device) noexcept nogil:
    dli_cuda_free(<int>device.device_type, device.device_id, base,
                  dli_cuda_current_stream(device.device_id))


def release(uintptr_t ptr, size_t nbytes, int kind, int device):
    """Frees memory from alloc() and updates the statistics."""
    free_nogil(<void*>ptr, nbytes, _dldevice(kind, device))
    entry = _stats_for(kind & 0xFFFF, device)
    with cython.critical_section(entry):
        entry["live_buffers"] -= 1
        entry["live_bytes"] -= nbytes


cdef DLDevice _dldevice(int kind, int device):
    cdef DLDevice d
    d.device_type = <DLDeviceType>kind
    d.device_id = device
    return d


cdef void* alloc_nogil(size_t nbytes, DLDevice device, void** base) noexcept nogil:
    cdef void* ptr = NULL
    if dli_cuda_malloc(<int>device.device_type, device.device_id, nbytes, 0,
                       dli_cuda_current_stream(device.device_id), &ptr) != 0:
        return NULL
    base[0] = ptr
    return ptr


cdef void* current_stream_nogil(int32_t device) noexcept nogil:
    return dli_cuda_current_stream(device)


# How many dl.cuda.Stream contexts are entered, on all threads (changed atomically: threads
# enter and leave streams at once where there is no GIL).
cdef extern from "streams_entered.h":
    void dli_streams_entered_add(int v) noexcept nogil
    int dli_streams_entered_get() noexcept nogil


cdef int streams_entered() noexcept nogil:
    return dli_streams_entered_get()


# The C entry points dlinterop._core calls without the GIL, published as one capsule.

from cpython.pycapsule cimport PyCapsule_New

cdef dli_cuda_table _table
_table.alloc_nogil = alloc_nogil
_table.free_nogil = free_nogil
_table.current_stream_nogil = current_stream_nogil
_table.streams_entered = streams_entered
c_table = PyCapsule_New(&_table, "dlinterop._cuda.table", NULL)


# ---- copies and fills ---------------------------------------------------------------------

def copy_contiguous(uintptr_t dst, uintptr_t src, size_t nbytes, int device, bint sync):
    """Copies nbytes between any two addresses the runtime knows, on the current stream;
    waits for it when the host reads the result."""
    cdef void* stream = dli_cuda_current_stream(device)
    with nogil:
        err = dli_cuda_memcpy(<void*>dst, <const void*>src, nbytes, stream)
        if err == 0 and sync:
            err = dli_cuda_stream_synchronize(stream)
    check(err)


def gather(uintptr_t dst, uintptr_t src, tuple shape, tuple strides, size_t itemsize,
           int device):
    """Gathers a strided array the device can read into contiguous memory it can write."""
    cdef int64_t dims[MAX_NDIM]
    cdef int64_t steps[MAX_NDIM]
    cdef int ndim = len(shape)
    cdef int i
    if ndim > MAX_NDIM or len(strides) != ndim:
        raise ValueError(f"gather takes at most {MAX_NDIM} dimensions and a stride for each")
    for i in range(ndim):
        dims[i] = shape[i]
        steps[i] = strides[i]
    cdef void* stream = dli_cuda_current_stream(device)
    with nogil:
        err = dli_cuda_gather(<void*>dst, <const void*>src, ndim, dims, steps, itemsize, device,
                              stream)
    check(err)


def fill(uintptr_t dst, bytes pattern, int64_t count, int device):
    cdef const char* p = pattern
    cdef size_t itemsize = len(pattern)
    cdef void* stream = dli_cuda_current_stream(device)
    with nogil:
        err = dli_cuda_fill(<void*>dst, p, itemsize, count, device, stream)
    check(err)


def stream_wait(int device, uintptr_t producer, uintptr_t consumer):
    """Makes `consumer` wait for the work so far on `producer` (0 means dlinterop's current
    stream; 1 and 2 are the legacy and per-thread default streams)."""
    cdef void* p = <void*>producer if producer else dli_cuda_current_stream(device)
    cdef void* c = <void*>consumer if consumer else dli_cuda_current_stream(device)
    # NULL is the legacy default stream, which CUDA also names 1.
    if p == NULL:
        p = <void*>1
    if c == NULL:
        c = <void*>1
    with nogil:
        err = dli_cuda_stream_wait(device, p, c)
    check(err)


def pointer_device(uintptr_t ptr):
    """(DLPack device type, device index) of an address the runtime knows."""
    cdef int device = 0
    cdef int device_type = 1
    check(dli_cuda_pointer_device(<const void*>ptr, &device, &device_type))
    return device_type, device


# ---- devices and streams ------------------------------------------------------------------

def device_count():
    cdef int count = 0
    if dli_cuda_device_count(&count) != 0:
        return 0
    return count


def runtime_version():
    cdef int version = 0
    check(dli_cuda_runtime_version(&version))
    return version


def synchronize(int device):
    with nogil:
        err = dli_cuda_device_synchronize(device)
    check(err)


def current_stream_ptr(int device):
    return <uintptr_t>dli_cuda_current_stream(device)


def set_current_stream_ptr(int device, uintptr_t ptr):
    dli_cuda_set_current_stream(device, <void*>ptr)


def enter_stream(int device, uintptr_t ptr):
    """Makes `ptr` this thread's current stream on `device`; returns the previous one."""
    previous = <uintptr_t>dli_cuda_current_stream(device)
    dli_cuda_set_current_stream(device, <void*>ptr)
    dli_streams_entered_add(1)
    return previous


def exit_stream(int device, uintptr_t previous):
    dli_cuda_set_current_stream(device, <void*>previous)
    dli_streams_entered_add(-1)


def stream_create(int device):
    cdef void* stream = NULL
    check(dli_cuda_stream_create(device, &stream))
    return <uintptr_t>stream


def stream_destroy(int device, uintptr_t stream):
    check(dli_cuda_stream_destroy(device, <void*>stream))


def stream_synchronize(uintptr_t stream):
    cdef void* s = <void*>stream
    with nogil:
        err = dli_cuda_stream_synchronize(s)
    check(err)


# ---- CUDA IPC (Tensors sent to other processes through multiprocessing) -------------------

cdef enum:
    IPC_HANDLE_BYTES = 64


def ipc_export(uintptr_t ptr, int device):
    """(handle, offset, size): the allocation device memory `ptr` lies in, as a handle
    another process can open, and ptr's offset into it."""
    cdef char handle[IPC_HANDLE_BYTES]
    cdef size_t offset = 0, size = 0
    check(dli_cuda_ipc_export(<const void*>ptr, device, handle, &offset, &size))
    return handle[:IPC_HANDLE_BYTES], offset, size


def ipc_open(bytes handle, int device):
    """(base, size) of the allocation a handle from another process names, mapped here."""
    cdef void* base = NULL
    cdef size_t size = 0
    if len(handle) != IPC_HANDLE_BYTES:
        raise ValueError(f"a CUDA IPC handle is {IPC_HANDLE_BYTES} bytes, got {len(handle)}")
    check(dli_cuda_ipc_open(<const char*>handle, device, &base, &size))
    return <uintptr_t>base, size


def ipc_close(int device, uintptr_t base):
    check(dli_cuda_ipc_close(device, <void*>base))


def ipc_event_record(int device):
    """(handle, event): an interprocess event recorded on this thread's current stream."""
    cdef char handle[IPC_HANDLE_BYTES]
    cdef void* event = NULL
    check(dli_cuda_ipc_event_record(device, dli_cuda_current_stream(device), handle, &event))
    return handle[:IPC_HANDLE_BYTES], <uintptr_t>event


def ipc_event_wait(int device, bytes handle):
    """This thread's current stream waits for an event another process recorded."""
    if len(handle) != IPC_HANDLE_BYTES:
        raise ValueError(f"a CUDA IPC event handle is {IPC_HANDLE_BYTES} bytes")
    check(dli_cuda_ipc_event_wait(device, <const char*>handle, dli_cuda_current_stream(device)))


def event_destroy(int device, uintptr_t event):
    check(dli_cuda_event_destroy(device, <void*>event))
