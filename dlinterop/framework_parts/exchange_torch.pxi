# Provides: the exchange table for torch.Tensor objects (dl.exchange_api_for(torch.Tensor)):
# views and owned tensors read through PyTorch's stable C shim, in C (src/torch_table.c);
# PyTorch's own table for the rest and for the way back, the allocator and the stream.
# Uses: nothing (of the core: torch_native_reads, refuse_torch_tensor, tensor_from_producer
# and to_managed, cimported by frameworks.pyx).

# PyTorch's own table (torch.Tensor.__dlpack_c_exchange_api__) reads a tensor through
# torch's C++ DLPack conversion, which makes a new view tensor for every call. The shim's
# functions (aoti_torch_get_sizes, ...; the stable C API AOTInductor's compiled models call)
# read the at::Tensor the Python object holds, found where core/torch_bits.pxi found it,
# with no allocation: a view's shape and strides point into the tensor's own. The owned
# tensor holds a reference to the Python object, so to the at::Tensor it holds (the core's
# owned_export_block, as the NumPy table's): it keeps the storage alive. Changing the
# tensor's storage in place (resize_, set_) while an export is held is unsafe, as it is
# for PyTorch's own exports (resize_).

cdef extern from "torch_bits.h":
    void* dli_torch_symbol(const char* lib, const char* name) nogil

cdef extern from "torch_table.h":
    enum:
        DLI_TORCH_SCALAR_TYPES
    ctypedef bint (*dli_torch_flag_fn)(const void* tensor) noexcept nogil
    ctypedef int32_t (*dli_aoti_ptr_fn)(void* tensor, void** out) noexcept nogil
    ctypedef int32_t (*dli_aoti_i64_fn)(void* tensor, int64_t* out) noexcept nogil
    ctypedef int32_t (*dli_aoti_i64s_fn)(void* tensor, int64_t** out) noexcept nogil
    ctypedef int32_t (*dli_aoti_i32_fn)(void* tensor, int32_t* out) noexcept nogil
    ctypedef struct dli_torch_native:
        int ready
        PyTypeObject* types[2]
        Py_ssize_t offset
        dli_torch_flag_fn is_neg
        dli_torch_flag_fn is_conj
        dli_torch_flag_fn requires_grad
        dli_aoti_ptr_fn data_ptr
        dli_aoti_i64_fn dim
        dli_aoti_i64s_fn sizes
        dli_aoti_i64s_fn strides
        dli_aoti_i32_fn dtype
        dli_aoti_i32_fn device_type
        dli_aoti_i32_fn device_index
        dli_aoti_i32_fn layout
        DLManagedTensorVersioned* (*owned_block)(PyObject* owner, int ndim) noexcept nogil
        int32_t layout_strided
        int32_t device_cpu
        int32_t device_cuda
        DLDeviceType cuda_kind
        DLDataType dtypes[DLI_TORCH_SCALAR_TYPES]
    dli_torch_native dli_torch
    ctypedef int (*dli_torch_view_otherwise_fn)(PyObject* obj, DLTensor* out,
                                                int status) noexcept
    ctypedef int (*dli_torch_owned_otherwise_fn)(
        PyObject* obj, DLManagedTensorVersioned** out, int status) noexcept
    void dli_torch_set_otherwise(dli_torch_view_otherwise_fn view,
                                 dli_torch_owned_otherwise_fn owned)
    int dli_torch_exchange_view(void* obj, DLTensor* out) noexcept
    int dli_torch_exchange_owned(void* obj, DLManagedTensorVersioned** out) noexcept
    int dli_torch_takes(const DLManagedTensorVersioned* m) noexcept

ctypedef int32_t (*_aoti_constant_fn)() noexcept nogil

# PyTorch's own table, once the torch table is made (NULL for a PyTorch without one).
cdef const DLPackExchangeAPI* _torch_own = NULL


cdef int _torch_status(object tensor, int status) except -1:
    """Raises what the native route's status (src/torch_table.h) calls for; returns 0 when
    PyTorch's own table is to decide."""
    torch = sys.modules.get("torch")
    if status == -1 and (torch is None or not isinstance(tensor, torch.Tensor)):
        raise TypeError("dlinterop's exchange table for torch.Tensor takes torch.Tensor "
                        f"objects, got {type(tensor).__name__}")
    if status == 3:
        raise RuntimeError("PyTorch's C shim could not read this tensor (it has printed "
                           "why); PyTorch's own __dlpack__ may say more")
    refuse_torch_tensor(tensor)
    return 0


cdef int _torch_view_otherwise(PyObject* obj, DLTensor* out, int status) except -1:
    _torch_status(<object>obj, status)
    if _torch_own == NULL:
        raise BufferError("this PyTorch has no exchange table of its own to view "
                          f"{type(<object>obj).__name__} objects the native route does not "
                          "read; call managed_tensor_from_py_object_no_sync")
    return _torch_own.dltensor_from_py_object_no_sync(<void*>obj, out)


cdef int _torch_owned_otherwise(PyObject* obj, DLManagedTensorVersioned** out,
                                int status) except -1:
    _torch_status(<object>obj, status)
    if _torch_own != NULL:
        return _torch_own.managed_tensor_from_py_object_no_sync(<void*>obj, out)
    out[0] = to_managed(tensor_from_producer(<object>obj))
    return 0


cdef int _torch_to_py(DLManagedTensorVersioned* tensor, void** out_py_object) except -1:
    """Steals `tensor`; a new reference to a torch.Tensor sharing its memory: PyTorch's own
    table makes it where that table steals what it refuses too (src/torch_table.c:
    dli_torch_takes), else torch.from_dlpack of a dl.Tensor that owns it."""
    if _torch_own != NULL and tensor != NULL and dli_torch_takes(tensor):
        return _torch_own.managed_tensor_to_py_object_no_sync(tensor, out_py_object)
    t = tensor_from_managed(tensor, False)   # from here the Tensor owns it
    result = sys.modules["torch"].from_dlpack(t)
    Py_INCREF(result)
    out_py_object[0] = <void*>result
    return 0


dli_torch_set_otherwise(<dli_torch_view_otherwise_fn><void*>_torch_view_otherwise,
                        <dli_torch_owned_otherwise_fn><void*>_torch_owned_otherwise)

# The shim's functions the native route calls, by name, and the constants it asks for.
cdef tuple _AOTI_FUNCTIONS = (
    "get_data_ptr", "get_dim", "get_sizes", "get_strides", "get_dtype", "get_device_type",
    "get_device_index", "get_layout", "layout_strided", "device_type_cpu", "device_type_cuda")
# PyTorch's dtypes by name (those a PyTorch lacks are skipped); what each is in DLPack is
# asked of PyTorch's own table.
cdef tuple _TORCH_DTYPES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2")


cdef int _set_up_torch_native(object torch) except -1:
    """Fills dli_torch and sets `ready` once every function is found and the native route
    gives PyTorch's own table's answers on probe tensors; leaves it 0 otherwise."""
    cdef TorchNativeReads reads
    cdef dict found = {}
    cdef void* symbol
    cdef int32_t scalar_type
    cdef DLTensor own_view
    torch_native_reads(&reads)
    if reads.offset < 0 or _torch_own == NULL:
        return 0
    libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for suffix in (".so", ".dylib"):
        lib = os.fsencode(os.path.join(libdir, "libtorch_cpu" + suffix))
        for name in _AOTI_FUNCTIONS:
            symbol = dli_torch_symbol(lib, ("aoti_torch_" + name).encode())
            if symbol == NULL:
                break
            found[name] = <uintptr_t>symbol
        if len(found) == len(_AOTI_FUNCTIONS):
            break
        found.clear()
    else:
        return 0
    dli_torch.offset = reads.offset
    dli_torch.is_neg = <dli_torch_flag_fn>reads.is_neg
    dli_torch.is_conj = <dli_torch_flag_fn>reads.is_conj
    dli_torch.requires_grad = <dli_torch_flag_fn>reads.requires_grad
    dli_torch.data_ptr = <dli_aoti_ptr_fn><uintptr_t>found["get_data_ptr"]
    dli_torch.dim = <dli_aoti_i64_fn><uintptr_t>found["get_dim"]
    dli_torch.sizes = <dli_aoti_i64s_fn><uintptr_t>found["get_sizes"]
    dli_torch.strides = <dli_aoti_i64s_fn><uintptr_t>found["get_strides"]
    dli_torch.dtype = <dli_aoti_i32_fn><uintptr_t>found["get_dtype"]
    dli_torch.device_type = <dli_aoti_i32_fn><uintptr_t>found["get_device_type"]
    dli_torch.device_index = <dli_aoti_i32_fn><uintptr_t>found["get_device_index"]
    dli_torch.layout = <dli_aoti_i32_fn><uintptr_t>found["get_layout"]
    dli_torch.owned_block = owned_export_block
    dli_torch.layout_strided = (<_aoti_constant_fn><uintptr_t>found["layout_strided"])()
    dli_torch.device_cpu = (<_aoti_constant_fn><uintptr_t>found["device_type_cpu"])()
    dli_torch.device_cuda = (<_aoti_constant_fn><uintptr_t>found["device_type_cuda"])()
    dli_torch.cuda_kind = kDLROCM if getattr(torch.version, "hip", None) else kDLCUDA
    dli_torch.types[0] = <PyTypeObject*>torch.Tensor
    # Parameter switches __torch_function__ off, so it is read as torch.Tensor is (the
    # core's bit readers take it too); other subclasses take the Python-side route.
    parameter = torch.nn.Parameter
    if getattr(parameter, "__torch_function__", None) is not getattr(
            torch._C, "_disabled_torch_function_impl", parameter):
        parameter = torch.Tensor
    dli_torch.types[1] = <PyTypeObject*>parameter
    with torch._C.DisableTorchFunction(), warnings.catch_warnings():
        warnings.simplefilter("ignore")   # complex32's "experimental" warning
        for name in _TORCH_DTYPES:
            kind = getattr(torch, name, None)
            if not isinstance(kind, torch.dtype):
                continue
            try:
                probe = torch.empty(1, dtype=kind)
            except (RuntimeError, TypeError):
                continue
            if (type(probe) is not torch.Tensor or dli_torch.dtype(
                    <char*><PyObject*>probe + reads.offset, &scalar_type) != 0
                    or not 0 <= scalar_type < DLI_TORCH_SCALAR_TYPES):
                return 0
            if _torch_own.dltensor_from_py_object_no_sync(<void*>probe, &own_view) != 0:
                PyErr_Clear()    # PyTorch's own export refuses it: so will this table
                continue
            dli_torch.dtypes[scalar_type] = own_view.dtype
        base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
        probes = [base, base.transpose(0, 2), base[1:, ::2, 1:], base[1, 2, 3],
                  torch.empty(0, 5, dtype=torch.int64), torch.zeros(7, dtype=torch.bool),
                  torch.nn.Parameter(torch.ones(3, 2), requires_grad=False)]
        dli_torch.ready = 1
        try:
            for probe in probes:
                if not _same_as_torch(probe):
                    dli_torch.ready = 0
                    break
        except BaseException:
            dli_torch.ready = 0
            raise
    return 0


cdef bint _same_as_torch(object probe) except -1:
    """Whether the native view of `probe` is the one PyTorch's own table gives (strides
    compared where they matter: PyTorch rewrites those of axes of length 1)."""
    cdef DLTensor own, native
    cdef int i
    if (_torch_own.dltensor_from_py_object_no_sync(<void*>probe, &own) != 0
            or dli_torch_exchange_view(<void*>probe, &native) != 0):
        raise_pending_error()
    if (own.ndim != native.ndim or own.data + own.byte_offset != native.data
            or native.byte_offset != 0 or own.dtype.code != native.dtype.code
            or own.dtype.bits != native.dtype.bits or own.dtype.lanes != native.dtype.lanes
            or own.device.device_type != native.device.device_type
            or own.device.device_id != native.device.device_id):
        return False
    for i in range(own.ndim):
        if own.shape[i] != native.shape[i] or (
                own.shape[i] > 1 and own.strides[i] != native.strides[i]):
            return False
    return True


cdef DLPackExchangeAPI _torch_exchange_api
cdef object _torch_table = None
cdef bint _torch_table_making = False


def _torch_exchange_table(generic):
    """The exchange table for torch.Tensor objects (dl.exchange_api_for asks for it once
    PyTorch is imported); `generic` is the core's generic table, whose functions stand in
    where a PyTorch has no table of its own."""
    global _torch_table_making
    with _tables_lock:
        if _torch_table is not None:
            return _torch_table
        if _torch_table_making:
            # Asked again by this thread while the probes run (a PyTorch mode that imports
            # the probe tensors): the generic table serves meanwhile.
            return generic
        _torch_table_making = True
        try:
            return _make_torch_table(generic)
        finally:
            _torch_table_making = False


cdef object _make_torch_table(generic):
    """Makes the torch table (under _tables_lock): PyTorch's own table's allocator and
    stream where it has one, the native reads once they pass their probes."""
    global _torch_table, _torch_own, _torch_exchange_api
    cdef const DLPackExchangeAPI* own = NULL
    torch = sys.modules["torch"]
    own_capsule = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
    base = <const DLPackExchangeAPI*>PyCapsule_GetPointer(generic, b"dlpack_exchange_api")
    _torch_exchange_api = base[0]
    if own_capsule is not None:
        own = <const DLPackExchangeAPI*>PyCapsule_GetPointer(own_capsule,
                                                             b"dlpack_exchange_api")
        _torch_own = own
        _torch_exchange_api.managed_tensor_allocator = own.managed_tensor_allocator
        _torch_exchange_api.current_work_stream = own.current_work_stream
    _torch_exchange_api.header.prev_api = NULL
    _torch_exchange_api.managed_tensor_to_py_object_no_sync = \
        <DLPackManagedTensorToPyObjectNoSync><void*>_torch_to_py
    _torch_exchange_api.dltensor_from_py_object_no_sync = \
        <DLPackDLTensorFromPyObjectNoSync><void*>dli_torch_exchange_view
    _torch_exchange_api.managed_tensor_from_py_object_no_sync = \
        <DLPackManagedTensorFromPyObjectNoSync><void*>dli_torch_exchange_owned
    _set_up_torch_native(torch)
    _torch_table = PyCapsule_New(&_torch_exchange_api, b"dlpack_exchange_api", NULL)
    return _torch_table


def _torch_native_table_for(cls):
    """dl.exchange_api_for(torch.Tensor) where it reads objects of type `cls` natively
    (torch.Tensor, torch.nn.Parameter), else None: elsewhere it calls PyTorch's own table
    after a detour, and the importer keeps PyTorch's own (core/producers.pxi)."""
    table = _core.exchange_api_for(sys.modules["torch"].Tensor)
    if dli_torch.ready and (<PyObject*>cls == <PyObject*>dli_torch.types[0]
                            or <PyObject*>cls == <PyObject*>dli_torch.types[1]):
        return table
    return None


def _torch_native_ready():
    """Testing aid: whether the torch table reads tensors natively (through PyTorch's C
    shim) rather than through PyTorch's own table."""
    return bool(dli_torch.ready)
