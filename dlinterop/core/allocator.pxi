# Provides: dlinterop's allocator: the one size rule for every new buffer, the memory
# limits every allocation is checked against (src/memory_limits.h), _allocate and
# empty_tensor, the allocator of the exchange table, and memory_stats with its counters.
# Uses: runtime.pxi, devices.pxi, tensor_base.pxi, layouts.pxi, cuda.pxi (device memory).

cdef extern from "memory_limits.h" nogil:
    ctypedef struct dli_memory_room:
        uint64_t available
        uint64_t ceiling
    uint64_t DLI_MEMORY_UNKNOWN
    void dli_memory_room_read(dli_memory_room* out)
    int dli_memory_fits_now(uint64_t nbytes, uint64_t* available_out)
    uint64_t dli_memory_ceiling()
    int dli_memory_set_roots(const char* proc_root, const char* sys_root)


# Capsules made and not yet released (changed atomically: deleters run on any thread).
cdef Py_ssize_t _live_exports = 0


cdef LayoutProblem _buffer_size(int ndim, const int64_t* shape, DLDataType dt,
                                int64_t* nbytes) noexcept nogil:
    """The bytes a C-contiguous tensor of this shape and type takes, every product checked
    for overflow: the one size rule for every allocation and every rebuilt buffer. Found
    without the GIL: the exchange API's allocator runs without it."""
    cdef int64_t count
    cdef int64_t bits
    cdef LayoutProblem problem = _check_ndim_and_dtype(ndim, shape, dt)
    if problem == LAYOUT_OK:
        problem = _count_elements(ndim, shape, &count)
    if problem != LAYOUT_OK:
        return problem
    if __builtin_mul_overflow(count, <int64_t>dt.bits * dt.lanes, &bits) or bits > INT64_MAX - 7:
        return BYTES_OVERFLOW
    nbytes[0] = storage_bytes(count, dt)   # packed sub-byte data rounds up to whole bytes
    return LAYOUT_OK


cdef int _raise_size_problem(LayoutProblem problem, int ndim, const int64_t* shape,
                             DLDataType dt) except -1:
    if problem == BAD_NDIM:
        refuse_ndim(ndim, ValueError)
    if problem == NULL_SHAPE:
        raise ValueError(f"NULL shape for ndim {ndim} > 0")
    if problem == BAD_DTYPE or problem == BAD_LANES:
        raise ValueError(f"unsupported data type ({dt.code}, {dt.bits}, {dt.lanes})")
    if problem == NEGATIVE_DIM:
        raise ValueError(f"negative dimension in shape {[shape[i] for i in range(ndim)]}")
    if problem == COUNT_OVERFLOW:
        raise ValueError("shape is too large: its element count overflows int64")
    raise ValueError("shape is too large: its size in bytes overflows int64")


cdef int64_t checked_nbytes(int ndim, const int64_t* shape, DLDataType dt,
                            DLDevice device) except -1:
    """The bytes a new C-contiguous tensor takes; ValueError for a layout, type or device
    no allocator can serve. Every allocator (dlinterop's, a framework's) is asked only after
    this."""
    cdef int64_t nbytes
    cdef LayoutProblem problem = _buffer_size(ndim, shape, dt, &nbytes)
    if problem != LAYOUT_OK:
        _raise_size_problem(problem, ndim, shape, dt)
    if dli_device_host(device.device_type) and device.device_id != 0:
        raise ValueError(f"there is no device cpu:{device.device_id}; use 'cpu'")
    return nbytes


cdef Tensor _allocate(int ndim, const int64_t* shape, DLDataType dt, DLDevice device,
                      size_t alignment, bint zero):
    cdef int64_t nbytes = checked_nbytes(ndim, shape, dt, device)
    cdef Tensor t = _new_contiguous(ndim, shape, dt, device, NULL, None)
    t.alloc_nbytes = <size_t>nbytes
    if dli_device_host(device.device_type):
        t.dl.data = dli_host_alloc(t.alloc_nbytes, alignment, zero, &t.alloc_base)
        if t.dl.data == NULL:
            _raise_host_out_of_memory(t.alloc_nbytes)
    else:
        _check_pinned_room(t.alloc_nbytes, device)
        t.dl.data = _device_alloc(t.alloc_nbytes, alignment, zero, device, &t.alloc_base)
    return t


cdef int _check_pinned_room(size_t nbytes, DLDevice device) except -1:
    """MemoryError for pinned host memory that does not fit now: pinning takes the pages at
    once, as a shared segment does."""
    cdef uint64_t available
    if dli_device_pinned(device.device_type) and not dli_memory_fits_now(nbytes, &available):
        raise MemoryError(f"cannot pin {nbytes} bytes of host memory: {_no_room(available)}")
    return 0


cdef int _raise_host_out_of_memory(size_t nbytes) except -1:
    cdef uint64_t ceiling = dli_memory_ceiling()
    if nbytes > ceiling:
        raise MemoryError(f"cannot allocate {nbytes} bytes: this process can never have more "
                          f"than {ceiling} (the machine's memory and swap, within the limit "
                          "of its memory cgroup)")
    raise MemoryError(f"cannot allocate {nbytes} bytes")


cdef str _no_room(uint64_t available):
    """Why memory whose pages are taken when it is made (dli_memory_fits_now) was refused."""
    room = "no size that large" if available == DLI_MEMORY_UNKNOWN else f"{available} bytes"
    return (f"this process can take {room} now without the kernel taking memory from another "
            "(the machine's available memory and free swap, within the limit of its memory "
            "cgroup)")


def _memory_room():
    """(available, ceiling) in bytes: what this process can take now without the kernel
    taking it from another, and the most it could ever have; None where unknown. The
    allocators' rule (src/memory_limits.h says what is read)."""
    cdef dli_memory_room room
    dli_memory_room_read(&room)
    return (None if room.available == DLI_MEMORY_UNKNOWN else room.available,
            None if room.ceiling == DLI_MEMORY_UNKNOWN else room.ceiling)


def _read_memory_limits_from(str proc_root=None, str sys_root=None):
    """From now on, reads the memory limits from file trees laid out as /proc and /sys
    (None: those): how the tests give the allocators any machine and cgroup."""
    proc = os.fsencode(proc_root) if proc_root is not None else None
    sys_ = os.fsencode(sys_root) if sys_root is not None else None
    if dli_memory_set_roots(<const char*>proc if proc is not None else NULL,
                            <const char*>sys_ if sys_ is not None else NULL) != 0:
        raise ValueError("a root to read memory limits under is at most 1023 bytes long")


cdef Tensor empty_tensor(int ndim, const int64_t* shape, DLDataType dtype, DLDevice device):
    """A new owned, C-contiguous Tensor, uninitialised, with the default alignment."""
    return _allocate(ndim, shape, dtype, device, DEFAULT_ALIGNMENT, False)


ctypedef struct AllocatedTensor:
    # One malloc: the managed tensor the allocator hands out, the buffer's base pointer and
    # size for the free, then shape and strides.
    DLManagedTensorVersioned managed
    void* base
    size_t nbytes


cdef void _allocated_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    # Pure C, so that it is safe on any thread at any time, interpreter or not.
    cdef AllocatedTensor* block = <AllocatedTensor*>m
    cdef int kept = 0
    if block == NULL:
        return
    if dli_san_on():
        # As for the exports (export.pxi): a second release is reported, touches nothing.
        kept = dli_san_export_released(block)
        if kept == 2:
            return
    if dli_device_host(block.managed.dl_tensor.device.device_type):
        dli_host_free(block.base, block.nbytes)
    else:
        _device_free_nogil(block.base, block.nbytes, block.managed.dl_tensor.device)
    if not kept:
        free(block)


cdef int _xapi_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                         void (*set_error)(void*, const char*, const char*) noexcept nogil
                         ) noexcept nogil:
    """A new C-contiguous tensor shaped like `prototype`, without touching Python."""
    cdef AllocatedTensor* block
    cdef int64_t nbytes
    cdef uint64_t available
    cdef int ndim = prototype.ndim
    if _buffer_size(ndim, prototype.shape, prototype.dtype, &nbytes) != LAYOUT_OK:
        set_error(error_ctx, "ValueError", "dlinterop allocator: bad ndim, shape or data type")
        return -1
    if dli_device_host(prototype.device.device_type) and prototype.device.device_id != 0:
        set_error(error_ctx, "ValueError", "dlinterop allocator: there is only one CPU device")
        return -1
    block = <AllocatedTensor*>malloc(sizeof(AllocatedTensor) + 2 * ndim * sizeof(int64_t))
    if block == NULL:
        set_error(error_ctx, "MemoryError", "dlinterop allocator: out of memory")
        return -1
    block.nbytes = <size_t>nbytes
    if dli_device_host(prototype.device.device_type):
        block.managed.dl_tensor.data = dli_host_alloc(block.nbytes, DEFAULT_ALIGNMENT, 0,
                                                      &block.base)
    elif (dli_device_pinned(prototype.device.device_type)
          and not dli_memory_fits_now(block.nbytes, &available)):
        block.managed.dl_tensor.data = NULL   # pinned memory that does not fit now
    else:
        block.managed.dl_tensor.data = _device_alloc_nogil(block.nbytes, prototype.device,
                                                           &block.base)
    if block.managed.dl_tensor.data == NULL:
        free(block)
        set_error(error_ctx, "MemoryError",
                  "dlinterop allocator: cannot allocate the tensor on its device")
        return -1
    block.managed.version.major = DLPACK_MAJOR_VERSION
    block.managed.version.minor = DLPACK_MINOR_VERSION
    block.managed.manager_ctx = NULL
    block.managed.deleter = _allocated_deleter
    block.managed.flags = 0
    block.managed.dl_tensor.device = prototype.device
    block.managed.dl_tensor.ndim = ndim
    block.managed.dl_tensor.dtype = prototype.dtype
    block.managed.dl_tensor.byte_offset = 0
    if ndim > 0:
        block.managed.dl_tensor.shape = <int64_t*>(block + 1)
        block.managed.dl_tensor.strides = block.managed.dl_tensor.shape + ndim
        memcpy(block.managed.dl_tensor.shape, prototype.shape, ndim * sizeof(int64_t))
        _fill_c_strides(block.managed.dl_tensor.strides, prototype.shape, ndim)
    else:
        block.managed.dl_tensor.shape = NULL
        block.managed.dl_tensor.strides = NULL
    out[0] = &block.managed
    if dli_san_on():
        dli_san_made(block, DLI_SAN_EXPORT_MALLOC, "managed tensor (C exchange API allocator)")
    return 0


def memory_stats(device="cpu"):
    """Counters of dlinterop's allocator: live_buffers, live_bytes, peak_bytes,
    total_allocations, and live_exports (capsules made and not yet released)."""
    cdef dli_stats stats
    cdef DLDevice dev = _parse_device(device)
    if not dli_device_host(dev.device_type):
        return _cuda_stats(dev)
    dli_stats_read(&stats)
    return {
        "live_buffers": stats.live_buffers,
        "live_bytes": stats.live_bytes,
        "peak_bytes": stats.peak_bytes,
        "total_allocations": stats.total_allocations,
        "live_exports": dli_atomic_load(&_live_exports),
    }
