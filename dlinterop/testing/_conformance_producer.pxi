# Provides: the producers built to order (Producer, whose __dlpack__ hands out a capsule as
# its fields say, well-formed or malformed), their deleters and the C counters of their calls,
# and the capsule destructor that runs a deleter when nobody consumed the capsule.
# Uses: nothing; _conformance.pyx, which includes it, declares the capsule functions it calls
# (without Cython's checks) and cimports the DLPack structs.
cimport cython
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset


# ---- deleter counters ---------------------------------------------------------------------
# One counter per producer made here (ids wrap around), changed only by deleters, which are
# plain C and may run on any thread.

DEF COUNTERS = 4096
cdef long _calls[COUNTERS]
memset(_calls, 0, sizeof(_calls))
cdef int _next_id = 0


ctypedef struct Block:
    # One malloc: the managed tensor (versioned or legacy: the capsule points at the one in
    # use), the producer's id, the name the capsule was given, then shape, strides, data.
    DLManagedTensorVersioned versioned
    DLManagedTensor legacy
    int id


cdef void _versioned_deleter(DLManagedTensorVersioned* m) noexcept nogil:
    cdef Block* block = <Block*>m.manager_ctx
    _calls[block.id] += 1
    free(block)


cdef void _legacy_deleter(DLManagedTensor* m) noexcept nogil:
    cdef Block* block = <Block*>m.manager_ctx
    _calls[block.id] += 1
    free(block)


cdef void _destructor(PyObject* capsule) noexcept:
    # The producer's side: the deleter runs when the capsule dies under the name it was
    # given (nobody consumed it), never after a consumer renamed it. The context is the given
    # name, interned for good, behind a 'V' (versioned) or 'L' (legacy) mark.
    cdef const char* given = <const char*>PyCapsule_GetContext_raw(capsule)
    cdef const char* name = PyCapsule_GetName_raw(capsule)
    cdef void* pointer
    if given == NULL or name == NULL or strcmp(given + 1, name) != 0:
        PyErr_Clear()
        return
    pointer = PyCapsule_GetPointer_raw(capsule, name)
    if pointer == NULL:
        PyErr_Clear()
        return
    if given[0] == b'V':
        if (<DLManagedTensorVersioned*>pointer).deleter != NULL:
            (<DLManagedTensorVersioned*>pointer).deleter(<DLManagedTensorVersioned*>pointer)
    elif (<DLManagedTensor*>pointer).deleter != NULL:
        (<DLManagedTensor*>pointer).deleter(<DLManagedTensor*>pointer)


# Names a capsule can be given; the context points at one of these so it outlives the capsule.
cdef dict _NAMES = {}


cdef const char* _interned(bytes name):
    cdef bytes kept = _NAMES.setdefault(name, name)
    return <const char*>kept


@cython.auto_pickle(False)
cdef class Producer:
    """An object whose __dlpack__ returns a capsule built to order. Attributes (set before
    calling): versioned, major, minor, flags, shape, strides (None: NULL), code, bits,
    lanes, device_type, device_id, byte_offset, payload (the bytes placed at byte_offset),
    shift (bytes past byte_offset where the data begins), null_data, null_shape,
    name (None: the standard one),
    old_signature (reject every keyword but stream with TypeError, as producers older than
    DLPack 1.0 do). After a call, `kwargs` holds the keywords the consumer passed and
    `capsule` the capsule it was handed (kept until replaced) and `data_address` where its
    data (after byte_offset) is."""
    cdef public bint versioned
    cdef public int major, minor
    cdef public object flags
    cdef public object shape, strides
    cdef public int code, bits, lanes
    cdef public int device_type, device_id
    cdef public object byte_offset
    cdef public object shift
    cdef public bytes payload
    cdef public bint null_data, null_shape, old_signature, force_versioned
    cdef public object name
    cdef public object kwargs
    cdef public object capsule
    cdef public object ndim_override
    cdef readonly object data_address
    cdef readonly int id

    def __init__(self, payload=b"\0" * 4, shape=(1,), code=kDLUInt, bits=8, **fields):
        global _next_id
        self.versioned = True
        self.major, self.minor = 1, 3
        self.flags = 0
        self.shape = tuple(shape)
        self.strides = None
        self.code, self.bits, self.lanes = code, bits, 1
        self.device_type, self.device_id = kDLCPU, 0
        self.byte_offset = 0
        self.shift = 0
        self.payload = bytes(payload)
        self.null_data = self.null_shape = self.old_signature = self.force_versioned = False
        self.name = None
        self.kwargs = None
        self.capsule = None
        self.ndim_override = None
        self.data_address = None
        for key, value in fields.items():
            if not hasattr(self, key):
                raise TypeError(f"Producer has no field {key!r}")
            setattr(self, key, value)
        self.id = _next_id
        _next_id = (_next_id + 1) % COUNTERS
        _calls[self.id] = 0

    @property
    def deleter_calls(self):
        return _calls[self.id]

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, **kwargs):
        self.kwargs = dict(kwargs)
        if self.old_signature and any(k != "stream" for k in kwargs):
            raise TypeError(f"__dlpack__() got an unexpected keyword argument "
                            f"{next(k for k in kwargs if k != 'stream')!r}")
        # Honours copy=True as a producer must: every capsule here holds its own copy of the
        # payload anyway, so that one is flagged IS_COPIED.
        # And negotiates as a producer must: a versioned capsule only for a consumer that
        # asked for DLPack 1.x.
        max_version = kwargs.get("max_version")
        try:
            modern = max_version is not None and int(max_version[0]) >= 1
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"max_version must be a (major, minor) tuple, got {max_version!r}")
        self.capsule = self.make_capsule(kwargs.get("copy") is True,
                                         self.force_versioned or (self.versioned and modern))
        return self.capsule

    def make_capsule(self, bint copied=False, versioned=None):
        """A new capsule as the fields say; its deleter bumps this producer's counter."""
        cdef int ndim = len(self.shape) if self.ndim_override is None else self.ndim_override
        cdef Py_ssize_t stored = len(self.shape)
        cdef Py_ssize_t offset = self.byte_offset
        cdef size_t header = sizeof(Block) + 2 * stored * sizeof(int64_t)
        # The data pointer is 256-byte aligned (as XLA wants for zero-copy).
        cdef Block* block = <Block*>malloc(header + 256 + offset + len(self.payload) + 8)
        cdef int64_t* dims
        cdef DLTensor* t
        cdef Py_ssize_t i
        cdef bytes name
        cdef bint as_versioned = self.versioned if versioned is None else versioned
        if block == NULL:
            raise MemoryError()
        memset(block, 0, header)
        block.id = self.id
        dims = <int64_t*>(block + 1)
        for i in range(stored):
            dims[i] = self.shape[i]
            dims[stored + i] = self.strides[i] if self.strides is not None else 0
        cdef char* data = <char*>((<uintptr_t>block + header + 255) & ~(<uintptr_t>255))
        # The bytes before byte_offset hold a pattern no payload starts with: a consumer that
        # ignores byte_offset then reads them, every time, not whatever an earlier block left.
        memset(data, 0xA5, offset)
        memcpy(data + offset, <const char*>self.payload, len(self.payload))
        if as_versioned:
            t = &block.versioned.dl_tensor
            block.versioned.version.major = self.major
            block.versioned.version.minor = self.minor
            block.versioned.flags = (<uint64_t>self.flags
                                     | (DLPACK_FLAG_BITMASK_IS_COPIED if copied else 0))
            block.versioned.deleter = _versioned_deleter
            block.versioned.manager_ctx = block
            name = b"dltensor_versioned"
        else:
            t = &block.legacy.dl_tensor
            block.legacy.deleter = _legacy_deleter
            block.legacy.manager_ctx = block
            name = b"dltensor"
        t.data = NULL if self.null_data else <void*>data
        # The payload starts at byte_offset; `shift` more bytes in is where the data pointer
        # designates (negative strides walk back from there).
        t.byte_offset = offset + <Py_ssize_t>self.shift
        self.data_address = <uintptr_t>(data + t.byte_offset)
        t.ndim = ndim
        t.shape = NULL if (self.null_shape or stored == 0) else dims
        t.strides = NULL if (self.strides is None or stored == 0) else dims + stored
        t.dtype.code = <uint8_t>self.code
        t.dtype.bits = <uint8_t>self.bits
        t.dtype.lanes = <uint16_t>self.lanes
        t.device.device_type = <DLDeviceType>self.device_type
        t.device.device_id = self.device_id
        if self.name is not None:
            name = self.name.encode() if isinstance(self.name, str) else bytes(self.name)
        cdef const char* kept = _interned((b"V" if as_versioned else b"L") + name)
        cdef PyObject* capsule = PyCapsule_New_raw(
            <void*>block if as_versioned else <void*>&block.legacy, kept + 1, _destructor)
        if capsule == NULL:
            free(block)
            raise MemoryError()
        PyCapsule_SetContext_raw(capsule, <void*>kept)
        result = <object>capsule
        Py_DecRef(capsule)
        return result
