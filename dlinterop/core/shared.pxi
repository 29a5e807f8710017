# Provides: Tensors in shared memory, which other processes can map (_SharedMemory, the
# owner of every Tensor over one segment; _allocate_shared), and the handle they cross
# process boundaries as (_shared_handle out; _segment_from_fd, _tensor_in_segment in).
# Uses: devices.pxi, tensor_base.pxi, layouts.pxi, allocator.pxi.

cdef extern from "shared_memory.h" nogil:
    int DLI_SHM_NOT_SEGMENT
    int DLI_SHM_TOO_SMALL
    int DLI_SHM_NO_MEMFD
    int DLI_SHM_NO_ROOM
    int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out,
                       uint64_t* available_out)
    int dli_shm_attach(int fd, size_t length, void** base_out)
    void dli_shm_release(int fd, void* base, size_t length)
    void dli_shm_pretend_no_memfd(int on)

cdef extern from "<errno.h>":
    int ENOMEM
    int ENOSYS

cdef extern from "<unistd.h>" nogil:
    int close(int fd)

cdef extern from *:
    int64_t __atomic_add_fetch(int64_t* p, int64_t v, int order) nogil
    int __ATOMIC_SEQ_CST


@cython.final
@cython.no_gc
cdef class _SharedMemory:
    """A mapped shared-memory segment: what keeps a shared Tensor's memory alive in this
    process, held by every Tensor and view over it. Its descriptor is kept open so that
    the segment can be sent to another process again; both go when the last holder does,
    and the memory when every process has let go."""
    cdef readonly int fd          # -1 until mapped; what is sent to another process
    cdef void* base
    cdef readonly size_t length   # bytes mapped from base, a whole number of pages

    def __cinit__(self):
        self.fd = -1

    def __dealloc__(self):
        if self.fd >= 0:
            dli_shm_release(self.fd, self.base, self.length)
            self.fd = -1
            self.base = NULL

    def __reduce__(self):
        raise TypeError("a shared-memory segment is not pickled; a Tensor over it is")


cdef int _raise_shm_error(int err, str doing, uint64_t available=0) except -1:
    if err == ENOMEM:
        raise MemoryError(f"{doing}: out of memory")
    if err == DLI_SHM_NO_ROOM:
        raise MemoryError(f"{doing}: {_no_room(available)}")
    if err == DLI_SHM_NO_MEMFD:
        raise OSError(ENOSYS, f"{doing}: shared memory needs memfd_create (Linux 3.17 or "
                              "later), which this system does not provide or forbids; send "
                              "a Tensor that is not in shared memory instead (it goes by "
                              "value)")
    if err == DLI_SHM_NOT_SEGMENT:
        raise ValueError(f"{doing}: the descriptor is not a dlinterop shared-memory segment "
                         "(a memfd sealed against shrinking, its pages all reserved)")
    if err == DLI_SHM_TOO_SMALL:
        raise ValueError(f"{doing}: the segment is smaller than the length it was sent with")
    raise OSError(err, f"{doing}: {os.strerror(err)}")


def _pretend_no_memfd(bint on):
    """Makes new shared-memory segments fail as on a system without memfd_create (True), or
    not (False): for tests, on any kernel."""
    dli_shm_pretend_no_memfd(on)


cdef Tensor _allocate_shared(int ndim, const int64_t* shape, DLDataType dt, size_t alignment):
    """A new C-contiguous Tensor in a shared-memory segment of its own (zero-filled, as new
    pages are), aligned to `alignment` (pages are; a larger alignment is honoured by
    offsetting into a larger segment)."""
    cdef int64_t nbytes = checked_nbytes(ndim, shape, dt, _CPU)
    cdef size_t extra = alignment if alignment > 4096 else 0
    cdef _SharedMemory segment = _SharedMemory.__new__(_SharedMemory)
    cdef int fd = -1
    cdef void* base = NULL
    cdef size_t length = 0
    cdef uint64_t available
    cdef int err
    with nogil:   # reserving the pages takes as long as zeroing them
        err = dli_shm_create(<size_t>nbytes + extra, &fd, &base, &length, &available)
    if err != 0:
        _raise_shm_error(err, f"cannot make a shared-memory segment of {nbytes} bytes",
                         available)
    segment.fd = fd
    segment.base = base
    segment.length = length
    return _new_contiguous(
        ndim, shape, dt, _CPU,
        <void*>((<uintptr_t>base + alignment - 1) & ~(<uintptr_t>alignment - 1)), segment)


cdef _SharedMemory _shared_memory_of(Tensor t):
    """The segment t's memory lies in, or None when it is not in shared memory."""
    owner = _memory_owner(t)
    return <_SharedMemory>owner if type(owner) is _SharedMemory else None


def _shared_handle(Tensor t not None):
    """What a Tensor over shared memory crosses a process boundary as (a SharedHandle,
    dlinterop/_lib/handles.py); None for a Tensor whose memory is not shared."""
    from dlinterop._lib.handles import SharedHandle

    cdef _SharedMemory segment = _shared_memory_of(t)
    if segment is None:
        return None
    offset = <uintptr_t>t.dl.data + t.dl.byte_offset - <uintptr_t>segment.base
    return SharedHandle(segment, offset, _shape_of(t), _strides_of(t),
                        (t.dl.dtype.code, t.dl.dtype.bits, t.dl.dtype.lanes), _is_readonly(t))


def _segment_from_fd(int fd, length):
    """The segment whose descriptor another process sent, mapped: takes the descriptor,
    which must be ours alone (closed on failure too). The handle came through a pickle,
    which anyone can write: the descriptor must be a sealed segment, its pages reserved,
    at least `length` bytes long."""
    cdef void* base = NULL
    cdef int err
    if type(length) is not int or not 0 < length <= INT64_MAX:
        with nogil:
            close(fd)
        raise ValueError(f"a shared-memory segment's length is a positive int, not {length!r}")
    err = dli_shm_attach(fd, <size_t>length, &base)
    if err != 0:
        with nogil:
            close(fd)
        _raise_shm_error(err, "cannot map the shared-memory segment")
    cdef _SharedMemory segment = _SharedMemory.__new__(_SharedMemory)
    segment.fd = fd
    segment.base = base
    segment.length = <size_t>length
    return segment


def _tensor_in_segment(_SharedMemory segment not None, offset, shape, strides, dtype_triple,
                       readonly):
    """The Tensor a SharedHandle's fields describe over a segment received
    (_tensor_from_handle checks every part)."""
    cdef HandleLayout layout
    if segment.fd < 0:
        raise ValueError("a shared Tensor's segment is one mapped by _segment_from_fd")
    if type(readonly) is not bool:
        raise TypeError("a shared Tensor's readonly is a bool (dlinterop/_lib/handles.py, "
                        f"SharedHandle), not {readonly!r}")
    _read_handle_layout(offset, shape, strides, dtype_triple, &layout)
    cdef Tensor t = _tensor_from_handle(&layout, segment.base, segment.length, _CPU, readonly)
    t.owner_ref = segment
    return t


def _tensor_from_shared(int fd, length, offset, shape, strides, dtype_triple, readonly):
    """The Tensor a handle describes, over the segment whose descriptor `fd` another
    process sent: _segment_from_fd, then _tensor_in_segment (takes the descriptor, closed
    on failure too)."""
    return _tensor_in_segment(_segment_from_fd(fd, length), offset, shape, strides,
                              dtype_triple, readonly)


def _shared_counter_add(Tensor counter not None, int64_t delta):
    """Adds `delta` to the int64 in shared memory that `counter` (an int64 Tensor in shared
    memory, one element at least) starts with, atomically across processes; returns the new
    value. The count of receivers of a CUDA Tensor sent through CUDA IPC lives in one."""
    _check_counter(counter)
    return __atomic_add_fetch(<int64_t*>(<char*>counter.dl.data + counter.dl.byte_offset),
                              delta, __ATOMIC_SEQ_CST)


cdef int _check_counter(object counter) except -1:
    """TypeError unless `counter` is what _shared_counter_add takes."""
    cdef Tensor t
    if type(counter) is Tensor:
        t = <Tensor>counter
        if (_shared_memory_of(t) is not None and t.dl.dtype.code == kDLInt
                and t.dl.dtype.bits == 64 and t.dl.dtype.lanes == 1
                and element_count(&t.dl) >= 1 and not _is_readonly(t)
                and (<uintptr_t>t.dl.data + t.dl.byte_offset) % 8 == 0):
            return 0
    raise TypeError("a counter is a writable int64 Tensor in shared memory")
