# cython: language_level=3, freethreading_compatible=True, auto_pickle=False
"""The kernel author's way out: outputs allocated by the caller's framework and handed back
as that framework's own type, borrowed views of inputs, and argument checks.

    out = dl.empty_like(x)               # PyTorch input: torch's allocator made the memory
    ... fill out ...
    return dl.to_framework(out, like=x)  # a torch.Tensor (a NumPy array for NumPy input)

Where the caller's type publishes the DLPack C exchange API (PyTorch), allocation and the
hand-back go through its table (managed_tensor_allocator, managed_tensor_to_py_object_no_sync)
with no Python call; otherwise dlinterop's allocator and that framework's `from_dlpack`,
looked up once per type. The C-level versions are declared in dlinterop/frameworks.pxd."""
cimport cython
from cpython.ref cimport PyObject, Py_DECREF
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport strncpy

from dlinterop.dlpack cimport *
from dlinterop._lib.rules cimport MAX_NDIM, dims_from_python, is_c_contiguous
from dlinterop._lib.threadsafe cimport dict_get, type_version
from dlinterop._lib.type_cache cimport (
    dli_type_cache, type_cache_forget, type_cache_get, type_cache_last, type_cache_put,
    type_cache_size,
)
from dlinterop._core cimport (
    DType, Device, Tensor, borrow_dltensor, checked_nbytes, device_from_dl,
    device_from_object, dtype_from_dl, empty_tensor, exchange_api_of,
    numpy_array_from, order_for_consumer, raise_pending_error, read_only_by_flag,
    tensor_from_managed, tensor_from_object, to_managed, zero_fill,
)

import importlib
import operator
import sys
import types

from dlinterop._core import CopyError

from dlinterop import _core

cdef extern from "Python.h":
    PyObject* PyErr_Occurred()
    bint PyModule_Check(object obj)

# ---- argument checks --------------------------------------------------------------------

cdef ArgSpec arg_spec() noexcept nogil:
    cdef ArgSpec spec
    spec.ndim = -1
    spec.dtype_code = -1
    spec.dtype_bits = 0
    spec.device_type = -1
    spec.c_contiguous = False
    spec.writable = False
    return spec


cdef str _shape_text(const DLTensor* dl):
    return str(tuple([dl.shape[i] for i in range(dl.ndim)]))


cdef str _device_text(int device_type):
    cdef DLDevice dev
    dev.device_type = <DLDeviceType>device_type
    dev.device_id = 0
    try:
        return device_from_dl(dev).type
    except Exception:
        return f"device type {device_type}"


cdef int check_arg(const DLTensor* dl, bint readonly, const char* name,
                   const ArgSpec* spec) except -1:
    cdef DLDataType want
    arg = (<bytes>name).decode(errors="replace")
    if spec.dtype_code >= 0 and (dl.dtype.code != spec.dtype_code
                                 or dl.dtype.bits != spec.dtype_bits or dl.dtype.lanes != 1):
        want.code = <uint8_t>spec.dtype_code
        want.bits = <uint8_t>spec.dtype_bits
        want.lanes = 1
        try:
            wanted = dtype_from_dl(want).name
        except Exception:
            wanted = f"({spec.dtype_code}, {spec.dtype_bits}, 1)"
        try:
            got = dtype_from_dl(dl.dtype).name
        except Exception:
            got = f"({dl.dtype.code}, {dl.dtype.bits}, {dl.dtype.lanes})"
        raise TypeError(f"{arg}: expected dtype {wanted}, got {got}")
    if spec.ndim >= 0 and dl.ndim != spec.ndim:
        raise ValueError(f"{arg}: expected {spec.ndim} dimension"
                         f"{'' if spec.ndim == 1 else 's'}, got {dl.ndim} (shape "
                         f"{_shape_text(dl)})")
    if spec.device_type >= 0 and <int>dl.device.device_type != spec.device_type:
        raise ValueError(f"{arg}: expected a tensor on {_device_text(spec.device_type)}, "
                         f"got one on {device_from_dl(dl.device)}")
    if spec.c_contiguous and not is_c_contiguous(dl):
        raise ValueError(f"{arg}: expected a C-contiguous tensor, got strides "
                         f"{tuple([dl.strides[i] for i in range(dl.ndim)])} (in elements) "
                         f"for shape {_shape_text(dl)}")
    if spec.writable and readonly:
        raise BufferError(f"{arg}: expected writable memory, got a read-only tensor")
    return 0


def check_tensor(x, name="argument", *, dtype=None, ndim=None, device=None,
                 c_contiguous=False, writable=False):
    """Imports `x` as dl.from_dlpack does and checks it, raising TypeError (dtype),
    ValueError (ndim, device, C-contiguity) or BufferError (writability) that name the
    argument; returns the Tensor. `device` is a device type ("cpu", "cuda") or a device
    ("cuda:1", dl.Device), which then must match exactly."""
    cdef ArgSpec spec = arg_spec()
    cdef DType dt
    cdef Device parsed
    cdef Device exact_device = None
    cdef Tensor t = x if type(x) is Tensor else tensor_from_object(x)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if dtype is not None:
        dt = _core.dtype(dtype)
        spec.dtype_code = dt.dl.code
        spec.dtype_bits = dt.dl.bits
        if dt.dl.lanes != 1:
            raise ValueError(f"check_tensor takes single-lane dtypes, got {dt.name}")
    if ndim is not None:
        spec.ndim = operator.index(ndim)
        if spec.ndim < 0:
            raise ValueError(f"ndim must be non-negative, got {ndim}")
    if device is not None:
        parsed = device if isinstance(device, Device) else _core.Device(device)
        spec.device_type = <int>parsed.dl.device_type
        if not (isinstance(device, str) and ":" not in device):
            exact_device = parsed
    spec.c_contiguous = bool(c_contiguous)
    spec.writable = bool(writable)
    check_arg(&t.dl, (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, name.encode(), &spec)
    if exact_device is not None and t.dl.device.device_id != exact_device.dl.device_id:
        raise ValueError(f"{name}: expected a tensor on {exact_device}, got one on "
                         f"{device_from_dl(t.dl.device)}")
    return t


# ---- borrowed views -----------------------------------------------------------------------

cdef object borrow(object obj, DLTensor* out, bint* readonly):
    return _borrow(obj, out, readonly, True)


cdef object _borrow(object obj, DLTensor* out, bint* readonly, bint sharing):
    """borrow(); without `sharing` only the layout will be read (empty_like), so a PyTorch
    tensor that requires grad is described rather than refused."""
    cdef Tensor t
    if type(obj) is Tensor:
        t = <Tensor>obj
        out[0] = t.dl
        readonly[0] = (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0
        return obj
    if borrow_dltensor(obj, out, sharing):
        readonly[0] = False     # producers with this table (PyTorch) have no read-only memory
        return obj
    t = tensor_from_object(obj)
    out[0] = t.dl
    readonly[0] = (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0
    return t


def _borrow_routes(obj):
    """Testing aid: ("table" or "import", the shape, whether read-only) of borrow(obj)."""
    cdef DLTensor view
    cdef bint readonly = False
    keeper = borrow(obj, &view, &readonly)
    if type(obj) is Tensor:
        route = "tensor"
    else:
        route = "table" if keeper is obj else "import"
    return route, tuple([view.shape[i] for i in range(view.ndim)]), bool(readonly)


# ---- allocation by the caller's framework ---------------------------------------------------

ctypedef struct _AllocError:
    char kind[64]
    char message[512]
    bint set


cdef void _set_alloc_error(void* ctx, const char* kind, const char* message) noexcept nogil:
    cdef _AllocError* error = <_AllocError*>ctx
    if kind == NULL:
        kind = "RuntimeError"
    if message == NULL:
        message = ""
    strncpy(error.kind, kind, 63)
    error.kind[63] = 0
    strncpy(error.message, message, 511)
    error.message[511] = 0
    error.set = True


cdef dict _ERROR_KINDS = {
    "MemoryError": MemoryError, "ValueError": ValueError, "TypeError": TypeError,
    "RuntimeError": RuntimeError, "BufferError": BufferError,
    "NotImplementedError": NotImplementedError, "OverflowError": OverflowError,
}


cdef Tensor empty_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device):
    cdef const DLPackExchangeAPI* api = NULL
    cdef DLTensor prototype
    cdef DLManagedTensorVersioned* m = NULL
    cdef _AllocError error
    cdef type cls = type(like)
    checked_nbytes(ndim, shape, dtype, device)
    if cls is not Tensor:
        api = exchange_api_of(cls)
    if api == NULL or api.managed_tensor_allocator == NULL:
        return empty_tensor(ndim, shape, dtype, device)
    prototype.data = NULL
    prototype.device = device
    prototype.ndim = ndim
    prototype.dtype = dtype
    prototype.shape = <int64_t*>shape
    prototype.strides = NULL
    prototype.byte_offset = 0
    error.set = False
    if api.managed_tensor_allocator(&prototype, &m, &error, _set_alloc_error) != 0 or m == NULL:
        if PyErr_Occurred() != NULL:
            raise_pending_error()
        if error.set:
            kind = (<bytes>error.kind).decode(errors="replace")
            message = (<bytes>error.message).decode(errors="replace")
            raise _ERROR_KINDS.get(kind, RuntimeError)(
                message if kind in _ERROR_KINDS else f"{kind}: {message}")
        raise RuntimeError(f"{cls.__name__}'s DLPack allocator failed without saying why")
    return tensor_from_managed(m, False)


cdef Tensor zeros_like_c(object like, int ndim, const int64_t* shape, DLDataType dtype,
                         DLDevice device):
    cdef Tensor t = empty_like_c(like, ndim, shape, dtype, device)
    zero_fill(t)
    return t


cdef Tensor _like(object x, object shape, object dtype, object device, bint zero):
    cdef DLTensor view
    cdef bint readonly = False
    cdef int64_t dims[MAX_NDIM]
    cdef int ndim
    cdef Py_ssize_t i
    cdef DLDataType dt
    cdef DLDevice dev
    cdef DType parsed
    keeper = _borrow(x, &view, &readonly, False)
    if shape is None:
        ndim = view.ndim
        for i in range(ndim):
            dims[i] = view.shape[i]
    else:
        ndim = dims_from_python(shape, dims, False)
    if dtype is None:
        dt = view.dtype
    else:
        parsed = _core.dtype(dtype)
        dt = parsed.dl
    dev = view.device if device is None else device_from_object(device)
    if zero:
        return zeros_like_c(x, ndim, dims, dt, dev)
    return empty_like_c(x, ndim, dims, dt, dev)


def empty_like(x, *, shape=None, dtype=None, device=None):
    """A new uninitialised, C-contiguous dl.Tensor shaped like `x` (or `shape`), of x's dtype
    (or `dtype`), on x's device (or `device`). Its memory comes from x's framework where x's
    type publishes the DLPack C exchange API (PyTorch: its caching allocator on CUDA), else
    from dlinterop's allocator. Hand it back with to_framework(t, like=x)."""
    return _like(x, shape, dtype, device, False)


def zeros_like(x, *, shape=None, dtype=None, device=None):
    """empty_like, filled with zeros."""
    return _like(x, shape, dtype, device, True)


# ---- handing a tensor back as the caller's type ------------------------------------------

@cython.final
@cython.no_gc
cdef class _Adapter:
    """How to make one framework's object from a Tensor: the exchange table of its tensor
    type when that publishes one (looked up per call through the core's per-type cache,
    which notices a changed type), else `from_dlpack`; `identity` for dlinterop's own
    Tensor. An adapter made for a type holds no reference to it (the cache must let the
    type die): its table type is the type it is looked up by."""
    cdef bint identity
    cdef bint numpy_native    # from_dlpack is NumPy's: the core makes the ndarray itself
    # The framework has no read-only arrays (PyTorch, CuPy), or the hand-back goes through
    # an exchange table, which cannot refuse what the framework cannot honour: a Tensor
    # that is read-only by flag is refused rather than handed over writable.
    cdef bint drops_read_only
    # The framework cannot import negative strides (PyTorch aborts the process on them,
    # pytorch/pytorch#188023): such a Tensor is handed over as a C-contiguous copy.
    cdef bint no_negative_strides
    cdef bint table_is_key    # the table type is the type this adapter was made for
    cdef object table_type    # else the module's tensor type, or None
    cdef object from_dlpack
    cdef str name
    cdef unsigned int version_tag   # the type's version tag, for adapters made for a type


# Adapters for modules and module names passed as `like` (the dict keeps them, as
# sys.modules does); adapters for types (an array's type, or a type passed as `like`) live
# in a cache that lets the types die (src/type_cache.h).
cdef dict _adapters = {}
cdef dli_type_cache _adapter_cache

# Module objects (and their top-level names) -> the type whose exchange table hands tensors
# back, for frameworks known to publish (or to be likely to publish) one.
cdef dict _TABLE_TYPES = {"torch": "Tensor", "numpy": "ndarray", "cupy": "ndarray",
                          "tvm_ffi": "Tensor"}
# Frameworks whose arrays are always writable, whatever DLPack's READ_ONLY flag says.
cdef frozenset _NO_READ_ONLY = frozenset(["torch", "cupy"])
# Frameworks that cannot import negative strides: torch 2.13's from_dlpack, torch.tensor and
# as_tensor abort the interpreter on them (pytorch/pytorch#188023, fixed after 2.13 to raise).
cdef frozenset _NO_NEGATIVE_STRIDES = frozenset(["torch"])


def _forget_adapter_type(ref):
    """The weak-reference callback of the adapter cache: the type died."""
    type_cache_forget(&_adapter_cache, <PyObject*>ref)


def _adapter_types_cached():
    """Testing aid: how many types the adapter cache holds."""
    return type_cache_size(&_adapter_cache)


cdef object _from_dlpack_of(str top, str what):
    if top in ("jax", "jaxlib"):
        return importlib.import_module("jax.numpy").from_dlpack
    # import_module, not sys.modules: it waits out an import of `top` in another thread.
    function = getattr(importlib.import_module(top), "from_dlpack", None)
    if function is None or not callable(function):
        raise TypeError(f"cannot hand a tensor back as {what}: package {top!r} has no "
                        "from_dlpack; pass like= a module or type whose package has one")
    return function


cdef bint _is_numpy_from_dlpack(object function):
    numpy = sys.modules.get("numpy")
    return numpy is not None and function is getattr(numpy, "from_dlpack", None)


cdef _Adapter _adapter_for_type(type cls):
    cdef _Adapter a = _Adapter.__new__(_Adapter)
    cdef str top = cls.__module__.partition(".")[0]
    a.name = f"{cls.__module__}.{cls.__qualname__}"
    if issubclass(cls, Tensor):
        a.identity = True
        return a
    if cls is type or cls is str or issubclass(cls, types.ModuleType):
        raise TypeError(f"like= must be an array, an array type or a module name, got "
                        f"{cls.__name__}")
    a.table_is_key = True
    a.from_dlpack = _from_dlpack_of(top, a.name)
    a.numpy_native = _is_numpy_from_dlpack(a.from_dlpack)
    a.drops_read_only = top in _NO_READ_ONLY
    a.no_negative_strides = top in _NO_NEGATIVE_STRIDES
    return a


cdef _Adapter _adapter_for_module(object module):
    cdef _Adapter a = _Adapter.__new__(_Adapter)
    cdef str top = module.__name__.partition(".")[0]
    a.name = module.__name__
    if top == "dlinterop":
        a.identity = True
        return a
    type_name = _TABLE_TYPES.get(top)
    if type_name is not None:
        table_type = getattr(importlib.import_module(top), type_name, None)
        if isinstance(table_type, type):
            a.table_type = table_type
    function = getattr(module, "from_dlpack", None)
    if function is None or not callable(function):
        function = _from_dlpack_of(top, f"module {module.__name__!r}")
    a.from_dlpack = function
    a.numpy_native = _is_numpy_from_dlpack(function)
    a.drops_read_only = top in _NO_READ_ONLY
    a.no_negative_strides = top in _NO_NEGATIVE_STRIDES
    return a


cdef inline _Adapter _adapter_of_type(type cls):
    """The adapter for arrays of type `cls` (or for `cls` passed as like=), cached."""
    cdef PyObject* last = type_cache_last(&_adapter_cache, <PyObject*>cls, type_version(cls))
    if last != NULL:
        return <_Adapter>last
    return _adapter_lookup(cls)


cdef _Adapter _adapter_lookup(type cls):
    cdef _Adapter a
    cdef PyObject* cached = type_cache_get(&_adapter_cache, <PyObject*>cls, type_version(cls))
    if cached != NULL:
        a = <_Adapter>cached
        Py_DECREF(a)
        return a
    a = _adapter_for_type(cls)
    getattr(cls, "__dlpack__", None)   # a type lookup assigns the version tag if it has none
    a.version_tag = type_version(cls)
    type_cache_put(&_adapter_cache, <PyObject*>cls, a.version_tag, <PyObject*>a,
                   <PyObject*>_forget_adapter_type)
    return a


cdef _Adapter _resolve(object like):
    cdef _Adapter a
    cdef PyObject* last
    cdef type cls
    if isinstance(like, type):
        return _adapter_of_type(<type>like)
    # An array whose type was the last one asked about: before any other test of `like`.
    cls = type(like)
    last = type_cache_last(&_adapter_cache, <PyObject*>cls, type_version(cls))
    if last != NULL:
        return <_Adapter>last
    if not (isinstance(like, str) or PyModule_Check(like)):
        return _adapter_lookup(cls)
    a = dict_get(_adapters, like)
    if a is None:
        if isinstance(like, str):
            try:
                module = importlib.import_module(like)
            except ImportError as e:
                raise TypeError(f"like={like!r}: no such framework is installed ({e})") from None
            a = _adapter_for_module(module)
        else:
            a = _adapter_for_module(like)
        _adapters[like] = a
    return a


cdef object _through_table(Tensor t, const DLPackExchangeAPI* api):
    cdef DLManagedTensorVersioned* m
    cdef void* out = NULL
    order_for_consumer(t, api)
    m = to_managed(t)
    # The table steals m, on failure too.
    if api.managed_tensor_to_py_object_no_sync(m, &out) != 0 or out == NULL:
        if PyErr_Occurred() != NULL:
            raise_pending_error()
        raise RuntimeError("the framework's DLPack exchange table failed without saying why")
    result = <object>out
    Py_DECREF(result)   # <object> took a new reference; the table's is the one we keep
    return result


cdef int _refuse_read_only(Tensor t, _Adapter a) except -1:
    raise BufferError(f"the tensor is read-only and {a.name} cannot hold read-only memory: "
                      "it would be handed over writable; pass copy=True for a writable copy")


cdef bint _has_negative_stride(Tensor t) noexcept:
    cdef int i
    for i in range(t.dl.ndim):
        if t.dl.strides[i] < 0 and t.dl.shape[i] > 1:
            return True
    return False


cdef object to_framework_c(Tensor t, object like):
    cdef const DLPackExchangeAPI* api = NULL
    cdef _Adapter a = _resolve(like)
    cdef object table_type
    if a.identity:
        return t
    if a.no_negative_strides and _has_negative_stride(t):
        t = t.copy()
    # NumPy first: the core's own hand-back is probed equal to np.from_dlpack and costs
    # less than any table call (and ndarray publishes no table today, so looking one up
    # first would be a wasted cache probe on every call).
    if a.numpy_native:
        result = numpy_array_from(t)
        if result is not None:
            return result
    if a.table_is_key:
        table_type = like if isinstance(like, type) else type(like)
    else:
        table_type = a.table_type
    if table_type is not None:
        api = exchange_api_of(<type>table_type)
        if api != NULL and api.managed_tensor_to_py_object_no_sync != NULL:
            if read_only_by_flag(t):
                _refuse_read_only(t, a)
            return _through_table(t, api)
    if a.drops_read_only and read_only_by_flag(t):
        _refuse_read_only(t, a)
    return a.from_dlpack(t)


def to_framework(t, like, *, copy=None):
    """An object of like's framework sharing t's memory. `like` is an array of that
    framework, its type, the framework's module or its name ("torch", "numpy", "jax",
    "cupy", ...). Where the type publishes the DLPack C exchange API (PyTorch) the hand-back
    is a C call (managed_tensor_to_py_object_no_sync); for NumPy the core makes the ndarray
    through NumPy's C API, as np.from_dlpack(t) would but with t itself as its base;
    otherwise that framework's from_dlpack(t), looked up once. `t` may be anything
    dl.from_dlpack takes.

    A Tensor that is read-only by flag is never handed over writable: NumPy and JAX receive
    it read-only; frameworks that have no read-only arrays (PyTorch, CuPy) get BufferError.
    A Tensor with negative strides reaches PyTorch, which cannot import them, as a
    C-contiguous copy (copy=False: BufferError). copy=True hands back a new writable copy
    instead (always a copy, as elsewhere)."""
    cdef Tensor tensor = t if type(t) is Tensor else tensor_from_object(t)
    if copy is True:
        tensor = tensor.copy()
    elif copy is False:
        if _has_negative_stride(tensor) and _resolve(like).no_negative_strides:
            raise CopyError(f"{_resolve(like).name} cannot hold negative strides, so it "
                            "takes a copy of this tensor, and copy=False forbids one")
    elif copy is not None:
        raise TypeError(f"copy must be True, False or None, got {copy!r}")
    return to_framework_c(tensor, like)
