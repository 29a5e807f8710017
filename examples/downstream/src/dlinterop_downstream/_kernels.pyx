# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kernels of the example downstream package, written against dlinterop's stable ABI.

Everything comes from two .pxd files: dlinterop.dlpack (the DLPack structs) and
dlinterop.abi (dlinterop's versioned function table: tensors in and out, borrowed views of
any framework's tensors, argument checks, outputs in the caller's framework). Nothing here
depends on the layout of dlinterop's objects, so this module keeps working when dlinterop is
upgraded, and it is built once, as an abi3 wheel, for every Python (setup.py)."""

from cpython.object cimport PyTypeObject
from libc.stdint cimport int64_t, uintptr_t
from libc.stdlib cimport free, malloc

from dlinterop.dlpack cimport (
    DLDataType, DLDevice, DLManagedTensorVersioned, DLPackExchangeAPI, DLTensor, kDLCPU,
    kDLFloat,
)
from dlinterop.abi cimport (
    ArgSpec, arg_spec, borrow, check_arg, dltensor, empty_like, empty_tensor, import_dlinterop,
    tensor_from_managed, tensor_from_object, to_capsule, to_framework, zeros_like,
)
# Table 1.1 (dlinterop 0.2.0 on), declared for this module's target (1.0) because setup.py
# defines DLINTEROP_ALLOW_NEWER_ENTRIES: asked for only once abi_minor() says it is there.
from dlinterop.abi cimport abi_minor, exchange_api_for

# Checks the installed dlinterop's table once: an ImportError, naming both versions, when
# it is older than the one this module was built against.
import_dlinterop()


# -- tensors from our own memory -----------------------------------------------------------

# Blocks made by arange() and not yet freed. A DLPack deleter may run on any thread, without
# the GIL (a free-threaded CPython has none): the count is kept with atomic operations
# (gcc's and clang's builtins).
cdef extern from *:
    """
    static Py_ssize_t dli_example_live_blocks = 0;
    static inline void dli_example_count(Py_ssize_t change) {
      __atomic_fetch_add(&dli_example_live_blocks, change, __ATOMIC_RELAXED);
    }
    static inline Py_ssize_t dli_example_counted(void) {
      return __atomic_load_n(&dli_example_live_blocks, __ATOMIC_RELAXED);
    }
    """
    void _count_blocks "dli_example_count"(Py_ssize_t change) noexcept nogil
    Py_ssize_t _blocks_counted "dli_example_counted"() noexcept nogil


cdef void _free_block(DLManagedTensorVersioned* managed) noexcept nogil:
    free(managed)
    _count_blocks(-1)


def arange(int64_t n):
    """A float32 Tensor [0, 1, ..., n-1] whose memory this module mallocs and frees: one
    block holds the managed struct, the shape and the data."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    cdef size_t header = sizeof(DLManagedTensorVersioned) + sizeof(int64_t)
    cdef DLManagedTensorVersioned* managed = <DLManagedTensorVersioned*>malloc(
        header + <size_t>n * sizeof(float))
    if managed == NULL:
        raise MemoryError()
    _count_blocks(1)
    cdef int64_t* shape = <int64_t*>(managed + 1)
    cdef float* data = <float*>(<char*>managed + header)
    cdef int64_t i
    with nogil:
        for i in range(n):
            data[i] = <float>i
    shape[0] = n
    managed.version.major = 1
    managed.version.minor = 3
    managed.manager_ctx = NULL
    managed.deleter = _free_block
    managed.flags = 0
    managed.dl_tensor.data = data
    managed.dl_tensor.device.device_type = kDLCPU
    managed.dl_tensor.device.device_id = 0
    managed.dl_tensor.ndim = 1
    managed.dl_tensor.dtype.code = kDLFloat
    managed.dl_tensor.dtype.bits = 32
    managed.dl_tensor.dtype.lanes = 1
    managed.dl_tensor.shape = shape
    managed.dl_tensor.strides = NULL    # C-contiguous
    managed.dl_tensor.byte_offset = 0
    # The Tensor owns the block from here, even if this raises: dlinterop then has already
    # called the deleter.
    return tensor_from_managed(managed, False)


def live_blocks():
    """How many blocks arange() made that no Tensor has freed yet."""
    return _blocks_counted()


def arange_capsule(int64_t n, bint versioned=True):
    """arange(n) handed out as a DLPack capsule ("dltensor_versioned" or "dltensor")."""
    return to_capsule(arange(n), versioned)


def ones(shape):
    """A new float32 Tensor of ones, allocated by dlinterop (256-byte aligned)."""
    cdef int64_t dims[64]
    cdef DLDataType float32
    cdef DLDevice cpu
    shape = tuple(shape)
    if len(shape) > 64:
        raise ValueError("at most 64 dimensions")
    for i, extent in enumerate(shape):
        dims[i] = extent
    float32.code = kDLFloat
    float32.bits = 32
    float32.lanes = 1
    cpu.device_type = kDLCPU
    cpu.device_id = 0
    t = empty_tensor(len(shape), dims, float32, cpu)
    cdef DLTensor* dl = dltensor(t)
    cdef float* data = <float*>dl.data
    cdef int64_t count = 1
    cdef int64_t j
    with nogil:
        for j in range(dl.ndim):
            count *= dl.shape[j]
        for j in range(count):
            data[j] = 1.0
    return t


# -- reading any tensor --------------------------------------------------------------------

def describe(obj):
    """The DLTensor fields of anything dl.from_dlpack accepts, read without the GIL."""
    t = tensor_from_object(obj)
    cdef const DLTensor* dl = dltensor(t)
    cdef int ndim
    cdef int64_t dims[64]
    cdef int64_t steps[64]
    cdef uintptr_t address
    cdef DLDataType dtype
    cdef DLDevice device
    cdef int i
    with nogil:
        ndim = dl.ndim
        for i in range(ndim):
            dims[i] = dl.shape[i]
            steps[i] = dl.strides[i]   # dlinterop always fills strides when ndim > 0
        address = <uintptr_t>dl.data + dl.byte_offset
        dtype = dl.dtype
        device = dl.device
    return {
        "ndim": ndim,
        "shape": tuple([dims[i] for i in range(ndim)]),
        "strides": tuple([steps[i] for i in range(ndim)]),
        "data_ptr": address,
        "dtype": (dtype.code, dtype.bits, dtype.lanes),
        "device": (<int>device.device_type, device.device_id),
    }


cdef double _sum_strided(const float* first, int ndim, const int64_t* shape,
                         const int64_t* strides) noexcept nogil:
    """Sum of a float32 array of any strides (in elements; negative and zero too)."""
    cdef int64_t index[64]
    cdef int64_t offset = 0
    cdef double total = 0.0
    cdef int64_t inner, inner_stride, i
    cdef int d
    if ndim == 0:
        return first[0]
    for d in range(ndim):
        if shape[d] == 0:
            return 0.0
        index[d] = 0
    inner = shape[ndim - 1]
    inner_stride = strides[ndim - 1]
    while True:
        for i in range(inner):
            total += first[offset + i * inner_stride]
        # Step the outer dimensions like an odometer.
        d = ndim - 2
        while d >= 0:
            index[d] += 1
            offset += strides[d]
            if index[d] < shape[d]:
                break
            offset -= strides[d] * shape[d]
            index[d] = 0
            d -= 1
        if d < 0:
            return total


def sum_float32(obj):
    """Sum of a float32 CPU tensor of any layout (NumPy array, dl.Tensor, capsule, ...),
    accumulated in double precision without the GIL."""
    t = tensor_from_object(obj)
    cdef DLTensor* dl = dltensor(t)
    cdef double total
    if dl.dtype.code != kDLFloat or dl.dtype.bits != 32 or dl.dtype.lanes != 1:
        raise TypeError(f"sum_float32 needs float32 data, got {t.dtype}")
    if dl.device.device_type != kDLCPU:
        raise ValueError(f"sum_float32 needs CPU memory, got {t.device}")
    with nogil:
        total = _sum_strided(<const float*>(<char*>dl.data + dl.byte_offset), dl.ndim,
                             dl.shape, dl.strides)
    return total


# -- the way out: kernels that return the caller's type ----------------------------------

cdef ArgSpec _float32_cpu(bint writable) noexcept nogil:
    cdef ArgSpec spec = arg_spec()
    spec.dtype_code = kDLFloat
    spec.dtype_bits = 32
    spec.device_type = kDLCPU
    spec.c_contiguous = True
    spec.writable = writable
    return spec


cdef int64_t _count(const DLTensor* dl) noexcept nogil:
    cdef int64_t n = 1
    cdef int i
    for i in range(dl.ndim):
        n *= dl.shape[i]
    return n


def scaled(x, float factor):
    """factor * x for a C-contiguous float32 CPU tensor of any framework, returned as x's
    type (a torch.Tensor for a torch.Tensor, a NumPy array for a NumPy array, ...). The
    output's memory comes from x's framework where it publishes an allocator (PyTorch)."""
    cdef DLTensor src
    cdef bint readonly
    cdef ArgSpec spec = _float32_cpu(False)
    _keeper = borrow(x, &src, &readonly)     # hold it while src is used
    check_arg(&src, readonly, "x", &spec)
    out = empty_like(x, src.ndim, src.shape, src.dtype, src.device)
    cdef const float* a = <const float*>(<const char*>src.data + src.byte_offset)
    cdef float* b = <float*>dltensor(out).data
    cdef int64_t n = _count(&src)
    cdef int64_t i
    with nogil:
        for i in range(n):
            b[i] = a[i] * factor
    return to_framework(out, x)


def zeros_as(x, shape):
    """A float32 array of zeros of x's framework, shaped `shape`."""
    cdef DLTensor src
    cdef bint readonly
    cdef int64_t dims[64]
    _keeper = borrow(x, &src, &readonly)
    shape = tuple(shape)
    if len(shape) > 64:
        raise ValueError("at most 64 dimensions")
    for i, extent in enumerate(shape):
        dims[i] = extent
    cdef DLDataType float32
    float32.code = kDLFloat
    float32.bits = 32
    float32.lanes = 1
    return to_framework(zeros_like(x, len(shape), dims, float32, src.device), x)


def fill_(x, float value):
    """Writes `value` into every element of x in place (x: writable, C-contiguous float32
    on the CPU); raises BufferError naming x for read-only memory, writing nothing."""
    cdef DLTensor dst
    cdef bint readonly
    cdef ArgSpec spec = _float32_cpu(True)
    _keeper = borrow(x, &dst, &readonly)
    check_arg(&dst, readonly, "x", &spec)
    cdef float* b = <float*>(<char*>dst.data + dst.byte_offset)
    cdef int64_t n = _count(&dst)
    cdef int64_t i
    with nogil:
        for i in range(n):
            b[i] = value
    return x


def identity(x):
    """The cheapest kernel: x in (a borrowed view, checked as scaled's is), a new
    uninitialised output of x's shape and type out. What the benchmarks time against the
    same kernel written with nanobind's nb::ndarray."""
    cdef DLTensor src
    cdef bint readonly
    cdef ArgSpec spec = _float32_cpu(False)
    _keeper = borrow(x, &src, &readonly)
    check_arg(&src, readonly, "x", &spec)
    return to_framework(empty_like(x, src.ndim, src.shape, src.dtype, src.device), x)


# -- any producer through its DLPack exchange table (C ABI table 1.1) ---------------------

cdef int _raised(int status) except -1:
    return status    # -1: the exchange table's function has set the exception


cdef DLManagedTensorVersioned* _exported(object x) except NULL:
    """x's tensor, owned (release it with its deleter), from the exchange table of x's
    type: NumPy's read natively, dlinterop's for a dl.Tensor, a generic one over
    __dlpack__ for any other producer (PyTorch, JAX, ...)."""
    cls = type(x)
    cdef const DLPackExchangeAPI* api = exchange_api_for(<PyTypeObject*>cls)  # TypeError
    cdef DLManagedTensorVersioned* managed = NULL
    _raised(api.managed_tensor_from_py_object_no_sync(<void*>x, &managed))
    return managed


cdef int _check_vector(const DLTensor* dl, str name) except -1:
    if dl.dtype.code != kDLFloat or dl.dtype.bits != 32 or dl.dtype.lanes != 1:
        raise TypeError(f"dot: {name} must be float32")
    if dl.device.device_type != kDLCPU:
        raise ValueError(f"dot: {name} must be in CPU memory")
    if dl.ndim != 1:
        raise ValueError(f"dot: {name} must be 1-D, got {dl.ndim}-D")
    return 0


def dot(x, y):
    """The dot product of two float32 CPU vectors of any producers (NumPy arrays, torch
    tensors, dl.Tensors, mixed), each read through its type's DLPack exchange table, with
    no __dlpack__ call for NumPy and dl.Tensor; accumulated in double precision without the
    GIL. Needs dlinterop's C ABI table 1.1 (dlinterop 0.2.0 on): NotImplementedError on an
    older dlinterop, which this module otherwise runs on."""
    if abi_minor() < 1:
        raise NotImplementedError("dot needs dlinterop 0.2.0 or newer (C ABI table 1.1)")
    cdef DLManagedTensorVersioned* a = _exported(x)
    cdef DLManagedTensorVersioned* b = NULL
    cdef const float* p
    cdef const float* q
    cdef int64_t n, sp, sq, i
    cdef double total = 0.0
    try:
        b = _exported(y)
        _check_vector(&a.dl_tensor, "x")
        _check_vector(&b.dl_tensor, "y")
        n = a.dl_tensor.shape[0]
        if b.dl_tensor.shape[0] != n:
            raise ValueError(f"dot: x has {n} elements, y {b.dl_tensor.shape[0]}")
        p = <const float*>(<const char*>a.dl_tensor.data + a.dl_tensor.byte_offset)
        q = <const float*>(<const char*>b.dl_tensor.data + b.dl_tensor.byte_offset)
        sp = 1 if a.dl_tensor.strides == NULL else a.dl_tensor.strides[0]
        sq = 1 if b.dl_tensor.strides == NULL else b.dl_tensor.strides[0]
        with nogil:
            for i in range(n):
                total += <double>p[i * sp] * q[i * sq]
    finally:
        if b != NULL and b.deleter != NULL:
            b.deleter(b)
        if a.deleter != NULL:
            a.deleter(a)
    return total
