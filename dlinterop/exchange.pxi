# The DLPack 1.3 C exchange API: dlinterop's own table (published on the Tensor type), and
# the consumer side that from_dlpack uses for producer types that publish one (PyTorch).

cdef const char* EXCHANGE_API_NAME = "dlpack_exchange_api"


# ---- producer -------------------------------------------------------------------------

ctypedef struct AllocatedTensor:
    # One malloc: the managed tensor the allocator hands out, the buffer's base pointer and
    # size for the free, then shape and strides.
    DLManagedTensorVersioned managed
    void* base
    size_t nbytes


cdef void _allocated_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    # Pure C, so that it is safe on any thread at any time, interpreter or not.
    cdef AllocatedTensor* block = <AllocatedTensor*>m
    if block == NULL:
        return
    if block.managed.dl_tensor.device.device_type == kDLCPU:
        dli_host_free(block.base, block.nbytes)
    else:
        _device_free_nogil(block.base, block.nbytes, block.managed.dl_tensor.device)
    free(block)


cdef int _xapi_allocator(DLTensor* prototype, DLManagedTensorVersioned** out, void* error_ctx,
                         void (*set_error)(void*, const char*, const char*) noexcept nogil
                         ) noexcept nogil:
    """A new C-contiguous tensor shaped like `prototype`, without touching Python."""
    cdef AllocatedTensor* block
    cdef int64_t count = 1
    cdef int i
    cdef int ndim = prototype.ndim
    if ndim < 0 or ndim > MAX_NDIM or (ndim > 0 and prototype.shape == NULL):
        set_error(error_ctx, "ValueError", "dlinterop allocator: bad ndim or NULL shape")
        return -1
    if not _valid_dtype_nogil(prototype.dtype):
        set_error(error_ctx, "ValueError", "dlinterop allocator: unsupported data type")
        return -1
    for i in range(ndim):
        if prototype.shape[i] < 0 or __builtin_mul_overflow(count, prototype.shape[i], &count):
            set_error(error_ctx, "ValueError", "dlinterop allocator: bad shape")
            return -1
    if count > (INT64_MAX - 7) // (prototype.dtype.bits * prototype.dtype.lanes):
        set_error(error_ctx, "ValueError", "dlinterop allocator: tensor too large")
        return -1
    block = <AllocatedTensor*>malloc(sizeof(AllocatedTensor) + 2 * ndim * sizeof(int64_t))
    if block == NULL:
        set_error(error_ctx, "MemoryError", "dlinterop allocator: out of memory")
        return -1
    block.nbytes = <size_t>_storage_bytes(count, prototype.dtype)
    if prototype.device.device_type == kDLCPU:
        block.managed.dl_tensor.data = dli_host_alloc(block.nbytes, DEFAULT_ALIGNMENT, 0,
                                                      &block.base)
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
    return 0


# The three functions below take Python objects, so their callers hold the GIL (as they
# must for PyTorch's table too). Declared `except -1`, they return -1 with the exception
# set, as the exchange API requires; the table stores them cast to its noexcept pointer
# types, which have the same C signature.

cdef int _xapi_to_managed(void* py_object, DLManagedTensorVersioned** out) except -1:
    """Owning export of a dl.Tensor, no stream synchronisation."""
    _check_tensor_object(<object>py_object)
    out[0] = _make_versioned_managed(<Tensor>py_object, DLPACK_MINOR_VERSION,
                                     (<Tensor>py_object).flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    return 0


cdef int _xapi_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) except -1:
    """Steals `tensor` and returns a new reference to a dl.Tensor wrapping it."""
    t = tensor_from_managed(tensor, False)
    Py_IncRef(<PyObject*>t)
    out_py_object[0] = <void*>t
    return 0


cdef int _xapi_view(void* py_object, DLTensor* out) except -1:
    """A non-owning DLTensor valid while the Tensor lives."""
    _check_tensor_object(<object>py_object)
    out[0] = (<Tensor>py_object).dl
    return 0


cdef int _check_tensor_object(object obj) except -1:
    if type(obj) is not Tensor:
        raise TypeError(f"dlinterop's exchange API takes dlinterop.Tensor objects, "
                        f"got {type(obj).__name__}")
    return 0


cdef int _xapi_current_stream(DLDeviceType device_type, int32_t device_id,
                              void** out_current_stream) noexcept nogil:
    if device_type == kDLCUDA or device_type == kDLCUDAManaged:
        out_current_stream[0] = _cuda_current_stream_nogil(device_id)
    else:
        out_current_stream[0] = NULL
    return 0


cdef DLPackExchangeAPI _exchange_api
_exchange_api.header.version.major = DLPACK_MAJOR_VERSION
_exchange_api.header.version.minor = DLPACK_MINOR_VERSION
_exchange_api.header.prev_api = NULL
_exchange_api.managed_tensor_allocator = _xapi_allocator
# Through void*: the table's types say noexcept nogil, these need the caller's thread state
# (which the exchange API requires of its callers) and report errors as -1.
_exchange_api.managed_tensor_from_py_object_no_sync = (
    <DLPackManagedTensorFromPyObjectNoSync><void*>_xapi_to_managed)
_exchange_api.managed_tensor_to_py_object_no_sync = (
    <DLPackManagedTensorToPyObjectNoSync><void*>_xapi_to_py)
_exchange_api.dltensor_from_py_object_no_sync = (
    <DLPackDLTensorFromPyObjectNoSync><void*>_xapi_view)
_exchange_api.current_work_stream = _xapi_current_stream


cdef int _publish_exchange_api() except -1:
    # Consumers look the table up on the type; a cdef class's dict is filled once, here.
    cdef PyObject* type_dict = (<PyTypeObject*>Tensor).tp_dict
    capsule = PyCapsule_New_raw(&_exchange_api, EXCHANGE_API_NAME, NULL)
    if capsule == NULL:
        raise MemoryError()
    try:
        PyDict_SetItemString(<object>type_dict, "__dlpack_c_exchange_api__", <object>capsule)
    finally:
        Py_DecRef(capsule)
    # The DLPack 1.2 spelling: the table's address as an int.
    PyDict_SetItemString(<object>type_dict, "__c_dlpack_exchange_api__",
                         <uintptr_t>&_exchange_api)
    PyType_Modified(<PyTypeObject*>Tensor)
    return 0


_publish_exchange_api()


# ---- consumer -------------------------------------------------------------------------

cdef uintptr_t _lookup_exchange_api(type cls) except? 0:
    cdef const DLPackExchangeAPI* api = NULL
    table = getattr(cls, "__dlpack_c_exchange_api__", None)
    if table is None:
        table = getattr(cls, "__c_dlpack_exchange_api__", None)   # the DLPack 1.2 spelling
    if table is not None and PyCapsule_CheckExact(table):
        api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(<PyObject*>table, EXCHANGE_API_NAME)
        if api == NULL:
            PyErr_Clear()
    elif isinstance(table, int) and not isinstance(table, bool) and 0 < table < 2**64:
        api = <const DLPackExchangeAPI*><uintptr_t>table
    # Only a 1.x table has the layout declared in dlpack.h; anything else is ignored and
    # the import falls back to __dlpack__.
    if api == NULL or api.header.version.major != 1:
        return 0
    if api.managed_tensor_from_py_object_no_sync == NULL:
        return 0
    return <uintptr_t>api


# ---- PyTorch's lazy conjugate and negative bits ----------------------------------------
#
# PyTorch hands out lazily conjugated (x.conj()) and negated (x.conj().imag, torch._neg_view)
# views with their stored values, through its exchange table and, for negated views, its
# __dlpack__ too. Sharing them would give wrong numbers, so dlinterop refuses them. Asking
# through Python (x.is_neg()) costs as much as the rest of the import, so for torch.Tensor
# and torch.nn.Parameter objects the two bits are read through libtorch's exported
# at::native::is_neg / is_conj (bool f(const at::Tensor&)), handed the at::Tensor that the
# Python object holds. Where that at::Tensor sits is not assumed: it is found by matching
# the public Tensor._cdata pointer, and the functions are checked against the Python
# methods on probe tensors before being trusted. Anything unexpected (another platform, a
# missing symbol, a changed layout) leaves the Python methods in charge.

cdef extern from *:
    """
    #include <stdbool.h>
    typedef bool (*dli_torch_bit_fn)(const void *tensor);
    #if defined(_WIN32)
    static void *dli_torch_symbol(const char *lib, const char *name) {
        (void)lib; (void)name;
        return NULL;
    }
    #else
    #include <dlfcn.h>
    /* A symbol of an already loaded library; never loads one. */
    static void *dli_torch_symbol(const char *lib, const char *name) {
        void *handle = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
        void *symbol;
        if (handle == NULL) {
            (void)dlerror();
            return NULL;
        }
        symbol = dlsym(handle, name);
        (void)dlerror();
        /* torch._C links the library, and extension modules are never unloaded, so the
           symbol outlives this reference. */
        dlclose(handle);
        return symbol;
    }
    #endif
    """
    ctypedef bint (*dli_torch_bit_fn)(const void* tensor) noexcept nogil
    void* dli_torch_symbol(const char* lib, const char* name) nogil


cdef dli_torch_bit_fn _torch_native_is_neg = NULL
cdef dli_torch_bit_fn _torch_native_is_conj = NULL
# The at::Tensor offset once the native reads are set up, or one of these:
cdef enum:
    TORCH_BITS_UNUSABLE = -1     # decided: ask the Python methods
    TORCH_BITS_UNDECIDED = -2    # the set-up could not run yet (see below); try again
cdef Py_ssize_t _torch_native_offset = TORCH_BITS_UNDECIDED
# Set-ups that could not make their probe tensors; after this many the answer is kept.
cdef int _torch_setup_attempts = 0
cdef int TORCH_SETUP_MAX_ATTEMPTS = 16


cdef Py_ssize_t _torch_tensor_slot(object tensor) except -3:
    """Offset of the at::Tensor inside a torch.Tensor object: the pointer-sized word equal
    to tensor._cdata (its TensorImpl), or -1 when there is none."""
    cdef size_t impl = tensor._cdata
    cdef Py_ssize_t size = type(tensor).__basicsize__
    cdef Py_ssize_t offset = sizeof(PyObject)
    while offset + <Py_ssize_t>sizeof(void*) <= size:
        if (<size_t*>(<char*><PyObject*>tensor + offset))[0] == impl:
            return offset
        offset += sizeof(void*)
    return -1


cdef Py_ssize_t _torch_native_bits_offset(object torch) except -3:
    cdef Py_ssize_t decided = dli_atomic_load(&_torch_native_offset)
    if decided != TORCH_BITS_UNDECIDED:
        return decided
    with _torch_lock:
        if _torch_native_offset == TORCH_BITS_UNDECIDED:
            _set_up_torch_bits(torch)
        return _torch_native_offset


cdef Py_ssize_t _set_up_torch_bits(object torch) except -3:
    """The at::Tensor offset in torch.Tensor objects when the native bit reads are usable,
    else TORCH_BITS_UNUSABLE. Worked out once per process. When the probe tensors cannot be
    made (a PyTorch mode that returns other types is active, say), the answer is
    TORCH_BITS_UNDECIDED, and the set-up runs again next time, up to
    TORCH_SETUP_MAX_ATTEMPTS times."""
    global _torch_native_is_neg, _torch_native_is_conj, _torch_native_offset
    global _torch_setup_attempts
    cdef dli_torch_bit_fn neg = NULL
    cdef dli_torch_bit_fn conj = NULL
    cdef Py_ssize_t offset
    cdef const void* slot
    cdef bytes lib
    import os
    try:
        libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
        libs = [os.fsencode(os.path.join(libdir, name))
                for name in ("libtorch_cpu.so", "libtorch_cpu.dylib")]
        # A conjugated and a negated view among them, so that both answers are exercised.
        base = torch.zeros(2, dtype=torch.complex64)
        probes = [base, base.conj(), base.conj().imag, base.real, torch.zeros(3)[1:]]
        if any(type(probe) is not torch.Tensor for probe in probes):
            raise TypeError("the probes are not plain tensors")
        offsets = [_torch_tensor_slot(probe) for probe in probes]
        expected = [(probe.is_neg(), probe.is_conj()) for probe in probes]
    except Exception:
        _torch_setup_attempts += 1
        if _torch_setup_attempts >= TORCH_SETUP_MAX_ATTEMPTS:
            _torch_native_offset = TORCH_BITS_UNUSABLE
        return _torch_native_offset
    # No Python code from here on, so no other thread sees a half-made answer.
    _torch_native_offset = TORCH_BITS_UNUSABLE
    for lib in libs:
        neg = <dli_torch_bit_fn>dli_torch_symbol(lib, b"_ZN2at6native6is_negERKNS_6TensorE")
        conj = <dli_torch_bit_fn>dli_torch_symbol(lib, b"_ZN2at6native7is_conjERKNS_6TensorE")
        if neg != NULL and conj != NULL:
            break
    else:
        return TORCH_BITS_UNUSABLE
    offset = offsets[0]
    if offset < 0:
        return TORCH_BITS_UNUSABLE
    for i in range(len(probes)):
        # The same slot in every probe, and the same answers as the Python methods.
        if offsets[i] != offset:
            return TORCH_BITS_UNUSABLE
        slot = <const void*>(<char*><PyObject*>probes[i] + offset)
        if neg(slot) != expected[i][0] or conj(slot) != expected[i][1]:
            return TORCH_BITS_UNUSABLE
    _torch_native_is_neg = neg
    _torch_native_is_conj = conj
    dli_atomic_store(&_torch_native_offset, offset)   # published after the functions
    return offset


def _torch_native_bits(cls=None):
    """Testing aid: the at::Tensor offset used to read PyTorch's conjugate and negative
    bits natively, or -1 when the Python methods are asked instead (-2: not decided yet);
    given a type, whether imports of that type read them natively."""
    if cls is None:
        return _torch_native_offset
    if not isinstance(cls, type):
        raise TypeError("expected a type")
    return _producer_of(<type>cls).torch_native_offset >= 0


cdef Py_ssize_t _torch_native_offset_for(type cls) except -3:
    """Where native bit reads apply: torch.Tensor, and subclasses that switch
    __torch_function__ off as torch.nn.Parameter does (a subclass is laid out as its base
    is, then its own fields). Other subclasses are asked through their methods, which they
    may answer through __torch_function__."""
    torch = sys.modules.get("torch")
    if torch is None:
        return TORCH_BITS_UNUSABLE
    if cls is not torch.Tensor and getattr(cls, "__torch_function__", None) is not getattr(
            torch._C, "_disabled_torch_function_impl", cls):
        return TORCH_BITS_UNUSABLE
    return _torch_native_bits_offset(torch)


cdef bint _torch_view_bits_set(_Producer producer, object tensor) except -1:
    """Whether `tensor` (of the producer's type) is a lazily conjugated or negated PyTorch
    view; False for other producers."""
    cdef const void* slot
    cdef PyObject* args[1]
    if producer.torch_is_neg is None:
        return False
    if producer.torch_native_offset == TORCH_BITS_UNDECIDED:
        producer.torch_native_offset = _torch_native_offset_for(type(tensor))
    if producer.torch_native_offset >= 0:
        slot = <const void*>(<char*><PyObject*>tensor + producer.torch_native_offset)
        return _torch_native_is_neg(slot) or _torch_native_is_conj(slot)
    args[0] = <PyObject*>tensor
    return (_call_is_true(producer.torch_is_neg, args)
            or _call_is_true(producer.torch_is_conj, args))


cdef int _refuse_torch_view_bits(_Producer producer, object tensor) except -1:
    """BufferError for a lazily conjugated or negated PyTorch view; 0 for anything else."""
    if not _torch_view_bits_set(producer, tensor):
        return 0
    if tensor.is_conj():
        raise BufferError("a PyTorch tensor with the conjugate bit set cannot be shared; "
                          "call .resolve_conj() first")
    raise BufferError("a PyTorch tensor with the negative bit set cannot be shared; "
                      "call .resolve_neg() first")


cdef object _TRUE = True


cdef bint _call_is_true(object method, PyObject** args) except -1:
    """method(*args) is True, calling an unbound method without a lookup."""
    cdef PyObject* result = PyObject_Vectorcall_raw(<PyObject*>method, args, 1, NULL)
    if result == NULL:
        return raise_pending_error()
    Py_DecRef(result)   # the interpreter keeps True alive: comparing after is safe
    return result == <PyObject*>_TRUE


cdef bint _is_torch_tensor_type(type cls):
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(cls, torch.Tensor)


cdef Tensor _import_through_exchange_api(_Producer producer, object obj):
    """Imports `obj` through its type's exchange table; None when the table cannot serve it
    (device memory whose stream order dlinterop cannot enforce), or refuses it: the caller
    then asks __dlpack__, whose error is the producer's documented one (PyTorch's table
    raises RuntimeError with a C++ stack trace where its __dlpack__ raises a one-line
    BufferError naming the problem: a sparse layout, a quantized dtype)."""
    cdef const DLPackExchangeAPI* api = producer.api
    cdef DLManagedTensorVersioned* m = NULL
    cdef PyObject *exc_type
    cdef PyObject *exc_value
    cdef PyObject *exc_tb
    if api.managed_tensor_from_py_object_no_sync(<void*>obj, &m) != 0:
        # KeyboardInterrupt and the like propagate; an ordinary error means "ask __dlpack__".
        fallback = PyErr_Occurred() == NULL or PyErr_ExceptionMatches(<PyObject*>Exception)
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb)
        if m != NULL and m.deleter != NULL:
            m.deleter(m)   # a table that failed should not hand one out; never leak it
        if not fallback:
            PyErr_Restore(exc_type, exc_value, exc_tb)
            raise_pending_error()
        Py_DecRef(exc_type)
        Py_DecRef(exc_value)
        Py_DecRef(exc_tb)
        return None
    if m != NULL and m.dl_tensor.device.device_type != kDLCPU:
        if not _cuda_sync_exchange(api, m):
            if m.deleter != NULL:
                m.deleter(m)
            return None
    cdef Tensor t = tensor_from_managed(m, False)
    t.owner_ref = obj
    return t


# ---- the C-level surface other dlinterop modules use (declared in _core.pxd) -------------

cdef DLManagedTensorVersioned* to_managed(Tensor t) except NULL:
    """An owning versioned managed tensor of `t` (no capsule), its READ_ONLY flag as t's:
    what dlinterop's own exchange table hands out."""
    return _make_versioned_managed(t, DLPACK_MINOR_VERSION,
                                   t.flags & DLPACK_FLAG_BITMASK_READ_ONLY)


cdef const DLPackExchangeAPI* exchange_api_of(type cls) except? NULL:
    """The DLPack C exchange table `cls` publishes (checked as the importer checks it,
    cached per type with the importer's producer cache), or NULL."""
    return _producer_of(cls).api


cdef int order_for_consumer(Tensor t, const DLPackExchangeAPI* api) except -1:
    """Before a consumer that publishes `api` takes t's device memory without a stream
    argument (managed_tensor_to_py_object_no_sync): its current work stream waits for the
    work dlinterop issued. Nothing to do for host memory, or when dlinterop issued none."""
    cdef void* consumer = NULL
    if not _is_cuda_memory(t.dl.device.device_type) or _cuda is None:
        return 0
    if api.current_work_stream == NULL:
        _cuda.synchronize(t.dl.device.device_id)
        return 0
    if api.current_work_stream(t.dl.device.device_type, t.dl.device.device_id, &consumer) != 0:
        return raise_pending_error()
    _cuda.stream_wait(t.dl.device.device_id, 0, <uintptr_t>consumer if consumer != NULL else 1)
    return 0


cdef int zero_fill(Tensor t) except -1:
    """Fills a C-contiguous tensor's memory with zero bytes, on its device."""
    cdef int64_t nbytes = _storage_bytes(_element_count(&t.dl), t.dl.dtype)
    if t.flags & DLPACK_FLAG_BITMASK_READ_ONLY:
        raise BufferError("cannot fill a read-only tensor")
    if nbytes == 0:
        return 0
    if t.dl.device.device_type == kDLCPU:
        memset(<char*>t.dl.data + t.dl.byte_offset, 0, <size_t>nbytes)
    else:
        _device_fill(t, b"\0", nbytes)
    return 0


cdef DLDevice device_from_object(object device) except *:
    """A DLDevice from anything dl.Device accepts ("cpu", "cuda:1", (2, 0), a Device)."""
    return _parse_device(device)


cdef int borrow_dltensor(object obj, DLTensor* out) except -1:
    """Fills `out` with a non-owning view of obj's tensor through its type's exchange table
    (dltensor_from_py_object_no_sync: PyTorch), valid while obj lives unchanged. 1 when
    done; 0 when the table cannot serve it (none published, a refusal, device memory whose
    stream order cannot be kept), and the caller then imports obj as usual, which raises
    the producer's own error where there is one."""
    cdef _Producer producer = _producer_of(type(obj))
    cdef const DLPackExchangeAPI* api = producer.api
    cdef void* stream = NULL
    if api == NULL or api.dltensor_from_py_object_no_sync == NULL:
        return 0
    _refuse_torch_view_bits(producer, obj)
    if api.dltensor_from_py_object_no_sync(<void*>obj, out) != 0:
        if not (PyErr_Occurred() == NULL or PyErr_ExceptionMatches(<PyObject*>Exception)):
            return raise_pending_error()
        PyErr_Clear()
        return 0
    if _check_dltensor(out) != DLTENSOR_OK:
        return 0    # the ordinary import says what is wrong with it
    if out.device.device_type != kDLCPU:
        module = _load_cuda()
        if module is None or not _is_cuda_memory(out.device.device_type):
            return 0
        if api.current_work_stream == NULL or api.current_work_stream(
                out.device.device_type, out.device.device_id, &stream) != 0:
            PyErr_Clear()
            return 0
        module.stream_wait(out.device.device_id, <uintptr_t>stream if stream != NULL else 1, 0)
    return 1
