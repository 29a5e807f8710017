# Provides: Tensors in shared memory, which other processes can map (_SharedMemory, the
# owner of every Tensor over one segment; _allocate_shared), and the handle they cross
# process boundaries as (_shared_handle, _tensor_from_shared).
# Uses: runtime.pxi, devices.pxi, allocator.pxi, dltensors.pxi, consume.pxi.

cdef extern from "shared_memory.h" nogil:
    int DLI_SHM_NOT_SEALED
    int DLI_SHM_TOO_SMALL
    int dli_shm_create(size_t nbytes, int* fd_out, void** base_out, size_t* length_out)
    int dli_shm_attach(int fd, size_t length, void** base_out)
    void dli_shm_release(int fd, void* base, size_t length)

cdef extern from "<errno.h>":
    int ENOMEM

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
    cdef int fd          # -1 until mapped
    cdef void* base
    cdef size_t length

    def __cinit__(self):
        self.fd = -1

    def __dealloc__(self):
        if self.fd >= 0:
            dli_shm_release(self.fd, self.base, self.length)
            self.fd = -1
            self.base = NULL

    def __reduce__(self):
        raise TypeError("a shared-memory segment is not pickled; a Tensor over it is")


cdef int _raise_shm_error(int err, str doing) except -1:
    if err == ENOMEM:
        raise MemoryError(f"{doing}: out of memory")
    if err == DLI_SHM_NOT_SEALED:
        raise ValueError(f"{doing}: the descriptor is not a dlinterop shared-memory segment "
                         "(a memfd sealed against shrinking)")
    if err == DLI_SHM_TOO_SMALL:
        raise ValueError(f"{doing}: the segment is smaller than the length it was sent with")
    raise OSError(err, f"{doing}: {os.strerror(err)}")


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
    cdef int err
    with nogil:   # reserving the pages takes as long as zeroing them
        err = dli_shm_create(<size_t>nbytes + extra, &fd, &base, &length)
    if err != 0:
        _raise_shm_error(err, f"cannot make a shared-memory segment of {nbytes} bytes")
    segment.fd = fd
    segment.base = base
    segment.length = length
    cdef Tensor t = Tensor.__new__(Tensor)
    _reserve_shape(t, ndim)
    if ndim > 0:
        memcpy(t.dl.shape, shape, ndim * sizeof(int64_t))
    _fill_c_strides(t.dl.strides, shape, ndim)
    t.dl.dtype = dt
    t.dl.device = _CPU
    t.dl.byte_offset = 0
    t.dl.data = <void*>((<uintptr_t>base + alignment - 1) & ~(<uintptr_t>alignment - 1))
    t.owner_ref = segment
    return t


cdef _SharedMemory _shared_memory_of(Tensor t):
    """The segment t's memory lies in, or None when it is not in shared memory."""
    owner = _memory_owner(t)
    return <_SharedMemory>owner if type(owner) is _SharedMemory else None


def _shared_handle(Tensor t not None):
    """What a Tensor over shared memory crosses a process boundary as: (descriptor, segment
    length, byte offset of element 0, shape, strides, (code, bits, lanes), readonly); None
    for a Tensor whose memory is not shared."""
    cdef _SharedMemory segment = _shared_memory_of(t)
    if segment is None:
        return None
    offset = <uintptr_t>t.dl.data + t.dl.byte_offset - <uintptr_t>segment.base
    return (segment.fd, segment.length, offset, t.shape, t.strides,
            (t.dl.dtype.code, t.dl.dtype.bits, t.dl.dtype.lanes), t.readonly)


cdef void _close_quietly(int fd) noexcept:
    """Closes a descriptor we were handed, whatever it is (a bad one is the error reported)."""
    with nogil:
        close(fd)


def _tensor_from_shared(int fd, length, offset, shape, strides, dtype_triple, readonly):
    """The Tensor a handle describes, over the segment whose descriptor `fd` another
    process sent; takes the descriptor (closed on failure too). The handle came through a
    pickle, which anyone can write: every part is checked, the descriptor must be a sealed
    segment at least `length` long, and the tensor must lie inside it."""
    cdef int64_t dims[MAX_NDIM]
    cdef int64_t steps[MAX_NDIM]
    cdef int ndim, i, err
    cdef void* base = NULL
    cdef DLTensor dl
    cdef _SharedMemory segment
    try:
        if (type(length) is not int or type(offset) is not int or type(readonly) is not bool
                or type(dtype_triple) is not tuple or type(strides) is not tuple):
            raise TypeError("a shared Tensor's handle is (descriptor, length, offset, shape, "
                            "strides, (code, bits, lanes), readonly)")
        dt = dtype(dtype_triple)
        ndim = dims_from_python(shape, dims, True)
        if dims_from_python(strides, steps, True) != ndim:
            raise ValueError(f"{len(strides)} strides for a shape of {ndim} dimensions")
        if not (0 < length <= INT64_MAX) or not (0 <= offset <= length):
            raise ValueError(f"a segment of {length} bytes has no offset {offset}")
    except BaseException:
        _close_quietly(fd)
        raise
    err = dli_shm_attach(fd, <size_t>length, &base)
    if err != 0:
        _close_quietly(fd)
        _raise_shm_error(err, "cannot map the shared-memory segment")
    segment = _SharedMemory.__new__(_SharedMemory)
    segment.fd = fd
    segment.base = base
    segment.length = <size_t>length
    dl.data = <char*>base + <Py_ssize_t>offset
    dl.device = _CPU
    dl.ndim = ndim
    dl.dtype = (<DType>dt).dl
    dl.shape = dims
    dl.strides = steps
    dl.byte_offset = 0
    _validate_dltensor(&dl)
    _check_inside(&dl, offset, length)
    cdef Tensor t = _wrap_dltensor(&dl, DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0)
    t.owner_ref = segment
    return t


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
                and element_count(&t.dl) >= 1 and not t.readonly
                and (<uintptr_t>t.dl.data + t.dl.byte_offset) % 8 == 0):
            return 0
    raise TypeError("a counter is a writable int64 Tensor in shared memory")
