# Provides: the adapters that make a framework's object from a Tensor (its exchange table
# or its from_dlpack), cached per type without keeping the type alive, and per module or
# module name: _Adapter and _resolve.
# Uses: nothing.

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
    # pytorch/pytorch#188023; pyarrow and MLX refuse them): such a Tensor is handed over as
    # a C-contiguous copy.
    cdef bint no_negative_strides
    # Its from_dlpack takes C-contiguous data only (pa.Array.from_dlpack: 1-D, contiguous):
    # any other layout is handed over as a C-contiguous copy.
    cdef bint contiguous_only
    # It reads DLPack's `data` and ignores `byte_offset` (Warp 1.19: a view would read the
    # wrong elements, negative strides memory before the buffer): the offset is moved into
    # the data pointer of the view handed over.
    cdef bint ignores_byte_offset
    # It copies whatever it imports (MLX on the CPU): copy=False cannot be honoured.
    cdef bint always_copies
    # Its exchange table honours DLPack's READ_ONLY flag (cuda.core's StridedMemoryView):
    # a read-only Tensor may go through it.
    cdef bint table_keeps_read_only
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
cdef dict _TABLE_TYPES = {"torch": ("torch", "Tensor"), "numpy": ("numpy", "ndarray"),
                          "cupy": ("cupy", "ndarray"), "tvm_ffi": ("tvm_ffi", "Tensor"),
                          "cuda.core": ("cuda.core.utils", "StridedMemoryView")}
# Frameworks whose arrays are always writable, whatever DLPack's READ_ONLY flag says.
cdef frozenset _NO_READ_ONLY = frozenset(["torch", "cupy", "warp"])
# Frameworks that cannot import negative strides: torch 2.13's from_dlpack, torch.tensor and
# as_tensor abort the interpreter on them (pytorch/pytorch#188023, fixed after 2.13 to raise);
# pa.Tensor.from_dlpack and mx.from_dlpack refuse them.
cdef frozenset _NO_NEGATIVE_STRIDES = frozenset(["torch", "pyarrow", "mlx"])
# Frameworks whose import ignores byte_offset (docs/frameworks.md).
cdef frozenset _IGNORES_BYTE_OFFSET = frozenset(["warp"])
# Frameworks whose CPU import always copies.
cdef frozenset _ALWAYS_COPIES = frozenset(["mlx"])


cdef object _strided_memory_view(object t):
    """cuda.core's StridedMemoryView of t, with no stream ordering (stream_ptr=-1): the
    hand-back is made on the producer's side, after its work is ordered (CPU memory, or a
    device tensor whose writer synchronised)."""
    return importlib.import_module("cuda.core.utils").StridedMemoryView.from_dlpack(
        t, stream_ptr=-1)


def _to_mlx(t):
    """An MLX array of t's values and dtype. mx.from_dlpack narrows float64 to float32 and
    complex128 to complex64 without a word; mx.array(t, dtype=...) keeps the dtype, and a
    dtype MLX lacks is refused rather than narrowed."""
    mx = importlib.import_module("mlx.core")
    name = t.dtype.name
    kind = getattr(mx, "bool_" if name == "bool" else name, None)
    if not isinstance(kind, mx.Dtype):
        raise BufferError(f"MLX has no {name} arrays (mx.from_dlpack would change the "
                          "values' type); convert the tensor first")
    return mx.array(t, dtype=kind)


def _to_warp(t):
    """wp.from_dlpack(t), with Warp's runtime started first, as Warp's own entry points
    (wp.array, wp.from_numpy) start it: its from_dlpack alone raises RuntimeError in a
    process where nothing else has. wp.init() does nothing once the runtime runs."""
    wp = importlib.import_module("warp")
    wp.init()
    return wp.from_dlpack(t)


cdef void _set_rules(_Adapter a, str top):
    a.drops_read_only = top in _NO_READ_ONLY
    a.no_negative_strides = top in _NO_NEGATIVE_STRIDES
    a.ignores_byte_offset = top in _IGNORES_BYTE_OFFSET
    a.always_copies = top in _ALWAYS_COPIES
    a.table_keeps_read_only = top == "cuda"
    if top == "pyarrow":
        # pa.Tensor takes any strides but negative ones; pa.Array only contiguous 1-D data
        a.contiguous_only = a.from_dlpack is not getattr(
            importlib.import_module("pyarrow").Tensor, "from_dlpack", None)


def _forget_adapter_type(ref):
    """The weak-reference callback of the adapter cache: the type died."""
    type_cache_forget(&_adapter_cache, <PyObject*>ref)


def _adapter_types_cached():
    """Testing aid: how many types the adapter cache holds."""
    return type_cache_size(&_adapter_cache)


cdef object _from_dlpack_of(str top, str what, str module_name=None, type cls=None):
    """The function that makes an object of the framework from a Tensor: its package's
    from_dlpack, or where a package has none at its top the one its users call."""
    if top in ("jax", "jaxlib"):
        return importlib.import_module("jax.numpy").from_dlpack
    if top == "mlx":
        return _to_mlx
    if top == "pyarrow":
        # An Arrow tensor type hands back as pa.Tensor, anything else as pa.Array.
        pa = importlib.import_module("pyarrow")
        if cls is not None and issubclass(cls, pa.Tensor):
            return pa.Tensor.from_dlpack
        return pa.Array.from_dlpack
    if top == "cuda" and (module_name or "").startswith("cuda.core"):
        return _strided_memory_view
    if top == "warp":
        return _to_warp
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
    a.from_dlpack = _from_dlpack_of(top, a.name, cls.__module__, cls)
    a.numpy_native = _is_numpy_from_dlpack(a.from_dlpack)
    _set_rules(a, top)
    return a


cdef _Adapter _adapter_for_module(object module):
    cdef _Adapter a = _Adapter.__new__(_Adapter)
    cdef str top = module.__name__.partition(".")[0]
    a.name = module.__name__
    if top == "dlinterop":
        a.identity = True
        return a
    where = _TABLE_TYPES.get(top) or _TABLE_TYPES.get(module.__name__)
    if where is not None:
        table_type = getattr(importlib.import_module(where[0]), where[1], None)
        if isinstance(table_type, type):
            a.table_type = table_type
    # MLX's own from_dlpack narrows dtypes and Warp's needs its runtime started: their
    # hand-backs are _to_mlx and _to_warp, whichever of their modules is named.
    function = None if top in ("mlx", "warp") else getattr(module, "from_dlpack", None)
    if function is None or not callable(function):
        function = _from_dlpack_of(top, f"module {module.__name__!r}", module.__name__)
    a.from_dlpack = function
    a.numpy_native = _is_numpy_from_dlpack(function)
    _set_rules(a, top)
    return a


cdef inline _Adapter _adapter_of_type(type cls):
    """The adapter for arrays of type `cls` (or for `cls` passed as like=), cached."""
    cdef PyObject* last = type_cache_last(&_adapter_cache, <PyObject*>cls, type_version(cls))
    if last != NULL:
        return <_Adapter>last
    return _adapter_lookup(cls)


cdef _Adapter _adapter_lookup(type cls):
    return <_Adapter>type_cache_fetch(&_adapter_cache, cls, _describe_adapter,
                                      _forget_adapter_type)


cdef object _describe_adapter(type cls, unsigned int* tag):
    cdef _Adapter a = _adapter_for_type(cls)
    getattr(cls, "__dlpack__", None)   # a type lookup assigns the version tag if it has none
    a.version_tag = tag[0] = type_version(cls)
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
