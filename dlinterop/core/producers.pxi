# Provides: what the importer knows about each producer type (its exchange table, its
# __dlpack__, the PyTorch and NumPy routes), cached per type without keeping the type alive.
# Uses: runtime.pxi, once.pxi, torch_bits.pxi, numpy_route.pxi.

cdef const char* EXCHANGE_API_NAME = "dlpack_exchange_api"


@cython.final
@cython.no_gc
cdef class _Producer:
    """What the importer needs to know about a producer type, looked up once per type and
    trusted while the type's version tag (which CPython changes whenever one of the type's
    attributes does, or a base's) stays the same. It holds no reference to the type or to
    anything that may refer to it (a method does): the cache must let the type die."""
    cdef unsigned int version_tag
    cdef const DLPackExchangeAPI* api   # the type's exchange table, or NULL
    # The table whose view gives the layout alone (borrow_dltensor without sharing): the
    # type's own. `api` may be dlinterop's torch table instead, which refuses, as an import
    # does, the tensors whose memory must not be shared.
    cdef const DLPackExchangeAPI* layout_api
    # The type's __dlpack__ as a plain function or method descriptor, called unbound with
    # the object first; NULL: look it up per call. Borrowed from the type's (or a base's)
    # dict, so valid only while the type's version tag is still version_tag: callers check.
    cdef PyObject* dlpack
    # A PyTorch tensor type: requires_grad and the lazy conjugate and negative bits are
    # checked before each import (torch_bits.pxi). torch_native_offset: where the bits are
    # read natively (>= 0), TORCH_BITS_UNUSABLE (ask the Python methods), or a set-up
    # state (< -1: ask again).
    cdef bint torch
    cdef Py_ssize_t torch_native_offset
    # numpy.ndarray itself (not subclasses): 1 when the native NumPy route is usable, 0 when
    # not, -1 while that is being decided (ask again).
    cdef int numpy_native


# type -> _Producer, without keeping the type alive (src/type_cache.h).
cdef dli_type_cache _producer_cache
# How many times a producer type has been described (a testing aid's count, atomic where
# there is no GIL: ThreadSanitizer found the plain increment racing).
cdef Py_ssize_t _producer_descriptions = 0


def _producer_descriptions_made():
    """Testing aid: how many times the importer has described a producer type (its
    per-type cache missed, or the type changed since)."""
    return dli_atomic_load(&_producer_descriptions)


def _producer_types_cached():
    """Testing aid: how many producer types the importer's cache holds."""
    return type_cache_size(&_producer_cache)


def _forget_producer_type(ref):
    """The weak-reference callback of the producer cache: the type died."""
    type_cache_forget(&_producer_cache, <PyObject*>ref)


cdef inline bint _still_valid(type cls, unsigned int tag) noexcept:
    return tag != 0 and type_version(cls) == tag


cdef inline _Producer _producer_of(type cls):
    cdef PyObject* last = type_cache_last(&_producer_cache, <PyObject*>cls, type_version(cls))
    if last != NULL:
        return <_Producer>last
    return _producer_lookup(cls)


cdef _Producer _producer_lookup(type cls):
    return <_Producer>type_cache_fetch(&_producer_cache, cls, _describe_producer,
                                       _forget_producer_type)


cdef object _describe_producer(type cls, unsigned int* tag):
    cdef _Producer p = _Producer.__new__(_Producer)
    p.api = <const DLPackExchangeAPI*>_lookup_exchange_api(cls)
    method = None
    for base in cls.__mro__:
        method = base.__dict__.get("__dlpack__")
        if method is not None:
            break
    # Only these are called with the object as first argument; a staticmethod, a property
    # or another descriptor goes through ordinary attribute lookup on every call. Without a
    # GIL another thread may replace the method between our check of the version tag and
    # the call: there it is looked up per call.
    if not FREE_THREADED and type(method) in _UNBOUND_CALLABLE_TYPES:
        p.dlpack = <PyObject*>method
    p.torch = _is_torch_tensor_type(cls)
    p.torch_native_offset = _torch_native_offset_for(cls) if p.torch else TORCH_BITS_UNUSABLE
    p.layout_api = p.api
    if p.torch and p.api != NULL:
        p.api = <const DLPackExchangeAPI*>_torch_table_instead(cls, <uintptr_t>p.api)
    p.numpy_native = _numpy_native_for(cls)
    getattr(cls, "__dlpack__", None)   # a type lookup assigns the version tag if it has none
    p.version_tag = tag[0] = type_version(cls)
    dli_atomic_add(&_producer_descriptions, 1)
    return p


cdef uintptr_t _torch_table_instead(type cls, uintptr_t own) except? 0:
    """For a PyTorch tensor type whose table is PyTorch's own (torch.Tensor's): dlinterop's
    torch table where it reads that type's tensors natively, through PyTorch's C shim (about
    half the cost of PyTorch's own: docs/exchange-tables.md); else `own`."""
    torch = sys.modules.get("torch")
    published = getattr(getattr(torch, "Tensor", None), "__dlpack_c_exchange_api__", None)
    if (published is None or not PyCapsule_CheckExact(published)
            or <uintptr_t>PyCapsule_GetPointer(<PyObject*>published, EXCHANGE_API_NAME) != own):
        PyErr_Clear()
        return own
    from dlinterop import frameworks
    table = frameworks._torch_native_table_for(cls)
    if table is None:
        return own
    return <uintptr_t>PyCapsule_GetPointer(<PyObject*>table, EXCHANGE_API_NAME)


cdef tuple _UNBOUND_CALLABLE_TYPES = (
    type(lambda: None),            # a function defined in a class body
    type(str.join),                # a C method descriptor (NumPy, PyTorch)
    type(_Producer.__reduce__),    # a Cython method
)


cdef uintptr_t _lookup_exchange_api(type cls) except? 0:
    """The address of the exchange table `cls` publishes, or 0. Only a PyCapsule named
    "dlpack_exchange_api" is read: its name says what it holds. The withdrawn DLPack 1.2
    spelling, an int address under __c_dlpack_exchange_api__, carries nothing to check (a
    class attribute that happens to be an int would be dereferenced), so it is ignored; a
    capsule under that old name (tvm-ffi 0.1.4's torch patch) is read like the new one."""
    cdef const DLPackExchangeAPI* api = NULL
    table = getattr(cls, "__dlpack_c_exchange_api__", None)
    if table is None:
        table = getattr(cls, "__c_dlpack_exchange_api__", None)
    if table is not None and PyCapsule_CheckExact(table):
        api = <const DLPackExchangeAPI*>PyCapsule_GetPointer(<PyObject*>table, EXCHANGE_API_NAME)
        if api == NULL:
            PyErr_Clear()
    # Only a 1.x table has the layout declared in dlpack.h; anything else is ignored and
    # the import falls back to __dlpack__.
    if api == NULL or api.header.version.major != 1:
        return 0
    if api.managed_tensor_from_py_object_no_sync == NULL:
        return 0
    return <uintptr_t>api


cdef const DLPackExchangeAPI* exchange_api_of(type cls) except? NULL:
    """The DLPack C exchange table `cls` publishes (checked as the importer checks it,
    cached per type with the importer's producer cache), or NULL."""
    return _producer_of(cls).api


def _torch_native_bits(cls=None):
    """Testing aid: the at::Tensor offset used to read PyTorch's conjugate and negative
    bits natively, or -1 when the Python methods are asked instead (-2: not decided yet);
    given a type, whether imports of that type read them natively."""
    if cls is None:
        return _torch_native_offset
    if not isinstance(cls, type):
        raise TypeError("expected a type")
    return _producer_of(<type>cls).torch_native_offset >= 0


def _producer_exchange_api(cls):
    """Testing aid: the address of the exchange table the importer uses for objects of type
    `cls` (0 for none)."""
    if not isinstance(cls, type):
        raise TypeError("expected a type")
    return <uintptr_t>_producer_of(<type>cls).api


def _set_numpy_route(bint enabled):
    """Testing aid: switch the native NumPy route on (where it is built and its probes
    pass) or off, so that tests run through both routes; returns the previous setting."""
    global _numpy_route_state, _numpy_handback_state
    previous = _numpy_route_state == 1
    _numpy_route_state = SETUP_UNDECIDED if enabled else 0
    _numpy_handback_state = SETUP_UNDECIDED if enabled else 0
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        # The producer recorded for ndarray is told apart by its version tag: bump it.
        PyType_Modified(<PyTypeObject*>numpy.ndarray)
    return previous
