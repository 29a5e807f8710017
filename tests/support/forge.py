"""Forge DLPack capsules with ctypes (standard library only), for the test suite.

The importer under test must be fed well-formed *and* malformed DLPack tensors; no real
producer will hand out a tensor with ``ndim=-1`` or a NULL shape, so this module builds
them by hand on the DLPack 1.3 ABI (64-bit Linux layouts, checked at import time).

Ownership model
---------------
Every byte a forged tensor points to (the managed-tensor struct, the shape and strides
arrays, the data buffer, the deleter callback) is owned by Python objects held by the
:class:`Forged` returned by :func:`forge`. The deleter installed in the struct only counts
its calls (``Forged.deleter_calls``); it frees nothing.

**The Forged object must outlive the capsule and any consumer of the tensor** (for
example the array an importer built from it). ``Forged`` holds a strong reference to its
capsule, so the usual pattern is simply to keep the ``Forged`` in a local variable and
drop the capsule through it (``forged.release()`` or ``del forged.capsule``) before
checking ``deleter_calls``. As a safety net, a ``Forged`` that is garbage-collected while
its capsule is still referenced elsewhere, or while a consumer may still call the deleter,
parks its buffers in a module-level list (a deliberate leak) instead of freeing memory a
C consumer may still read; a capsule orphaned this way also loses its destructor (its
deleter is then never called on an unconsumed death).

Capsule destructor
------------------
Capsules made by :func:`forge` get a ctypes destructor implementing the DLPack rule: the
managed tensor's deleter is called (through the function pointer stored in the struct,
so a test may overwrite it) only while the capsule still carries the name it was created
with, and only if that name is not a ``used_*`` name; a NULL deleter is tolerated.

Caveat (inherent to ctypes callbacks): CPython checks the result of every Python callback
a ctypes thunk makes, so if a capsule destructor or a deleter *implemented in Python* runs
while a C caller has an exception set, that exception is replaced by a SystemError
(printed as "Exception ignored on calling ctypes callback function") and lost.
(When that happens during exception unwinding in the eval loop, CPython 3.11 segfaults.)
``Forged`` avoids the common case: because it keeps its capsule alive, a consumer's
error-path ``Py_DECREF`` never destroys the capsule, and ``Forged.__del__`` (which CPython
runs with the current exception saved) releases it. Still unsafe: taking the capsule away
from a live Forged (``cap = f.capsule; f.release()``) and letting ``cap`` die while an
exception is set, or a C consumer calling the deleter while an exception is set (instead
of after catching it).
"""

import ctypes
import inspect
import sys
from ctypes import (
    CFUNCTYPE,
    POINTER,
    PYFUNCTYPE,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)

__all__ = [
    "DLPackVersion",
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DELETER_VERSIONED",
    "DELETER_LEGACY",
    "READ_ONLY",
    "IS_COPIED",
    "IS_SUBBYTE_TYPE_PADDED",
    "DLPACK_VERSION",
    "NAME_VERSIONED",
    "NAME_LEGACY",
    "NAME_USED_VERSIONED",
    "NAME_USED_LEGACY",
    "Forged",
    "PENDING_SEEN",
    "forge",
    "capsule_name",
    "managed_pointer",
    "make_capsule",
    "capsule_strides",
    "same_layout",
    "CountingProducer",
]

# ---------------------------------------------------------------------------------------
# ABI
# ---------------------------------------------------------------------------------------

READ_ONLY = 1  #: DLPACK_FLAG_BITMASK_READ_ONLY
IS_COPIED = 2  #: DLPACK_FLAG_BITMASK_IS_COPIED
IS_SUBBYTE_TYPE_PADDED = 4  #: DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED

DLPACK_VERSION = (1, 3)

NAME_VERSIONED = "dltensor_versioned"
NAME_LEGACY = "dltensor"
NAME_USED_VERSIONED = "used_dltensor_versioned"
NAME_USED_LEGACY = "used_dltensor"


class DLPackVersion(Structure):
    """``DLPackVersion``: ``{uint32_t major; uint32_t minor;}``."""

    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLDevice(Structure):
    """``DLDevice``: ``{DLDeviceType (int32 enum) device_type; int32_t device_id;}``."""

    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    """``DLDataType``: ``{uint8_t code; uint8_t bits; uint16_t lanes;}``."""

    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    """``DLTensor`` (48 bytes): data, device, ndim, dtype, shape, strides, byte_offset."""

    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    """Legacy (pre-1.0) ``DLManagedTensor``: dl_tensor, manager_ctx, deleter (64 bytes)."""


#: ``void (*)(DLManagedTensor*)``
DELETER_LEGACY = CFUNCTYPE(None, POINTER(DLManagedTensor))

DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER_LEGACY),
]


class DLManagedTensorVersioned(Structure):
    """``DLManagedTensorVersioned``: version, manager_ctx, deleter, flags, dl_tensor (80 bytes)."""


#: ``void (*)(DLManagedTensorVersioned*)``
DELETER_VERSIONED = CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))

DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DELETER_VERSIONED),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]


def _check_layout():
    assert ctypes.sizeof(c_void_p) == 8, "forge.py assumes a 64-bit platform"
    expect = {
        DLPackVersion: (8, {}),
        DLDevice: (8, {}),
        DLDataType: (4, {"bits": 1, "lanes": 2}),
        DLTensor: (
            48,
            {"device": 8, "ndim": 16, "dtype": 20, "shape": 24, "strides": 32, "byte_offset": 40},
        ),
        DLManagedTensor: (64, {"manager_ctx": 48, "deleter": 56}),
        DLManagedTensorVersioned: (
            80,
            {"manager_ctx": 8, "deleter": 16, "flags": 24, "dl_tensor": 32},
        ),
    }
    for struct, (size, offsets) in expect.items():
        assert ctypes.sizeof(struct) == size, (struct.__name__, ctypes.sizeof(struct))
        for field, off in offsets.items():
            assert getattr(struct, field).offset == off, (struct.__name__, field)


_check_layout()

# ---------------------------------------------------------------------------------------
# Private Python C-API bindings. Fresh function objects (PYFUNCTYPE: GIL held, Python
# error checked) so that setting argtypes never clobbers ctypes.pythonapi.<name>, which
# tests may configure differently.
# ---------------------------------------------------------------------------------------

_api = ctypes.pythonapi
_PyCapsule_New = PYFUNCTYPE(ctypes.py_object, c_void_p, c_char_p, c_void_p)(("PyCapsule_New", _api))
# The capsule is passed as a raw address (no incref/decref): safe inside its destructor.
_PyCapsule_IsValid = PYFUNCTYPE(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", _api))
_PyCapsule_GetPointer = PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))
_PyCapsule_GetName = PYFUNCTYPE(c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_PyCapsule_SetDestructor = PYFUNCTYPE(c_int, ctypes.py_object, c_void_p)(
    ("PyCapsule_SetDestructor", _api)
)

# Capsules keep a raw pointer to their name: every name ever used stays alive here.
_NAMES = {}


def _name_bytes(name):
    """The interned, never-freed bytes object for a capsule name."""
    if isinstance(name, str):
        name = name.encode()
    if not isinstance(name, bytes):
        raise TypeError(f"capsule name must be str or bytes, not {type(name).__name__}")
    if b"\0" in name:
        raise ValueError("capsule name must not contain NUL")
    return _NAMES.setdefault(name, name)


# capsule address -> (creation name bytes, offset of the deleter in the managed struct)
_CAPSULE_INFO = {}
_RAW_DELETER = CFUNCTYPE(None, c_void_p)
_DESTRUCTOR_T = CFUNCTYPE(None, c_void_p)


# PyDLL-style, so ctypes raises the exception it finds pending after the call.
_PyErr_Occurred = PYFUNCTYPE(c_void_p)(("PyErr_Occurred", _api))

# One line per forged destructor or deleter call that found its C caller's exception still
# pending (which CPython forbids for Python code; see the caveat above). Tests of consumers'
# error paths assert that this stays empty.
PENDING_SEEN = []


def _note_pending(where, _probe=_PyErr_Occurred, _seen=PENDING_SEEN):
    try:
        _probe()
    except BaseException as e:  # the caller's exception, now taken from it
        _seen.append(f"{where}: {type(e).__name__}: {e}")


def _capsule_destructor(
    cap,
    _info=_CAPSULE_INFO,
    _is_valid=_PyCapsule_IsValid,
    _get_pointer=_PyCapsule_GetPointer,
    _raw=_RAW_DELETER,
    _vp=c_void_p,
):
    _note_pending("capsule destructor")
    info = _info.pop(cap, None)
    if info is None:
        return
    name, deleter_offset = info
    if name.startswith(b"used_"):
        return  # forged as already consumed
    if not _is_valid(cap, name):
        return  # renamed by a consumer: the consumer owns the tensor now
    managed = _get_pointer(cap, name)
    if not managed:
        return
    fn = _vp.from_address(managed + deleter_offset).value
    if fn:
        _raw(fn)(managed)


# Module level: a capsule holds a raw pointer to it for as long as the capsule lives.
_DESTRUCTOR = _DESTRUCTOR_T(_capsule_destructor)
_DESTRUCTOR_ADDR = ctypes.cast(_DESTRUCTOR, c_void_p).value

# Internals of Forged objects that died while their tensor might still be in use.
_ORPHANS = []

# ---------------------------------------------------------------------------------------
# Public helpers
# ---------------------------------------------------------------------------------------


def capsule_name(capsule):
    """The capsule's current name as str, or None for a NULL name."""
    raw = _PyCapsule_GetName(capsule)
    return None if raw is None else raw.decode(errors="replace")


def managed_pointer(capsule):
    """The address the capsule holds (the DLManagedTensor[Versioned]*), as an int."""
    raw = _PyCapsule_GetName(capsule)
    return _PyCapsule_GetPointer(id(capsule), raw) or 0


def make_capsule(address, name):
    """A capsule holding ``address`` under ``name`` with NO destructor (raw control).

    ``address`` must be non-zero (PyCapsule_New rejects NULL with ValueError). Whatever
    it points to must outlive every consumer; nothing is ever released.
    """
    return _PyCapsule_New(address, _name_bytes(name), None)


def c_strides(shape):
    """C-contiguous strides in elements, as dlinterop fills in NULL strides: a dimension of
    0 or 1 does not advance the step."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def capsule_strides(capsule):
    """The element strides an unconsumed capsule's DLTensor carries (C order for NULL)."""
    name = capsule_name(capsule)
    struct = DLManagedTensorVersioned if name == NAME_VERSIONED else DLManagedTensor
    t = struct.from_address(managed_pointer(capsule)).dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if not t.strides:
        return c_strides(shape)
    return tuple(t.strides[i] for i in range(t.ndim))


def same_layout(shape, strides, other):
    """Whether two stride tuples address the same elements of `shape`: the strides of
    dimensions of size 1 say nothing, and nor does any stride of a zero-size tensor (NumPy
    versions differ in what they export for those)."""
    if 0 in shape:
        return len(strides) == len(other) == len(shape)
    return all(a == b for n, a, b in zip(shape, strides, other, strict=True) if n != 1)


def _prod(values):
    out = 1
    for v in values:
        out *= v
    return out


def _ceil_div(a, b):
    return -(-a // b)


def _auto_layout(shape, strides, dtype, byte_offset, padded):
    """(buffer size, offset of the data pointer inside the buffer) for data="auto"."""
    code, bits, lanes = dtype
    bpe = bits * lanes  # bits per element
    if padded:
        bpe = 8 * _ceil_div(bpe, 8)
    dims = [max(int(s), 0) for s in shape]
    if 0 in dims:
        return max(1, byte_offset), 0
    # Contiguous extent (also covers malformed strides arrays shorter than the shape).
    size = _ceil_div(_prod(dims) * bpe, 8)
    shift = 0
    if strides is not None:
        lo = sum((d - 1) * s for d, s in zip(dims, strides) if s < 0)
        hi = sum((d - 1) * s for d, s in zip(dims, strides) if s > 0)
        shift = _ceil_div(-lo * bpe, 8)  # data pointer sits this far into the buffer
        size = max(size, shift + _ceil_div((hi + 1) * bpe, 8))
    return max(1, byte_offset + size), shift


_MAX_PAD = 1 << 16  # longest zero padding of shape/strides arrays for a lying ndim


def _int64_array(values, length):
    arr = (c_int64 * max(length, len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = v
    return arr


class Forged:
    """A forged DLPack tensor and the capsule holding it; built by :func:`forge`.

    Attributes: ``capsule`` (the PyCapsule, None after :meth:`release`), ``managed`` (the
    ctypes DLManagedTensorVersioned / DLManagedTensor), ``deleter_calls`` (how many times
    the deleter ran), ``data`` (the ctypes buffer backing the data, or None),
    ``data_ptr`` (the data pointer stored in the tensor, int or None), ``shape_array`` /
    ``strides_array`` (ctypes int64 arrays or None), ``deleter`` (the ctypes callback or
    None), and the forge arguments ``shape``, ``strides``, ``dtype``, ``device``,
    ``byte_offset``, ``versioned``, ``name``.

    The Forged must outlive the capsule and any consumer of the tensor: it owns all the
    memory the struct points to (see the module docstring).
    """

    def __init__(self):
        self._count = [0]
        self._keep = []
        self.capsule = None

    @property
    def deleter_calls(self):
        """How many times the installed deleter has run."""
        return self._count[0]

    @property
    def tensor(self):
        """The embedded ctypes DLTensor (``managed.dl_tensor``)."""
        return self.managed.dl_tensor

    @property
    def address(self):
        """Address of the managed struct (what the capsule holds)."""
        return ctypes.addressof(self.managed)

    @property
    def element_ptr(self):
        """Address of element 0: ``data + byte_offset`` (None for a NULL data pointer)."""
        return None if self.data_ptr is None else self.data_ptr + self.byte_offset

    def release(self):
        """Drop this object's reference to the capsule (destroying it if it was the last)."""
        self.capsule = None

    def __repr__(self):
        return (
            f"<Forged {'versioned' if self.versioned else 'legacy'} name={self.name!r} "
            f"shape={self.shape} dtype={self.dtype} deleter_calls={self.deleter_calls}>"
        )

    def __del__(self):
        # CPython runs __del__ with any pending exception saved, so releasing the capsule
        # here never runs the ctypes destructor with an exception set.
        try:
            cap = self.__dict__.pop("capsule", None)
            consumed = False
            if cap is not None:
                shared = sys.getrefcount(cap) > 2  # `cap` + getrefcount's argument
                name = _PyCapsule_GetName(cap)
                consumed = name != _NAMES.get(self.name.encode())
                if shared:
                    # Someone else still holds the capsule: keep the memory forever and
                    # detach the Python destructor, so the capsule's eventual death runs
                    # no ctypes callback (which could clobber a pending exception).
                    _PyCapsule_SetDestructor(cap, None)
                    _CAPSULE_INFO.pop(id(cap), None)
                    _ORPHANS.append(self.__dict__.copy())
                    return
                del cap  # destructor runs now, while everything it touches is alive
            else:
                consumed = True  # the capsule was released earlier: state unknown
            if consumed and self.deleter is not None and self._count[0] == 0:
                # A consumer may still hold the tensor and call the deleter later.
                _ORPHANS.append(self.__dict__.copy())
        except Exception:  # interpreter shutdown: err on the side of leaking
            try:
                _ORPHANS.append(self.__dict__.copy())
            except Exception:
                pass


def forge(
    shape=(2, 3),
    dtype=(2, 32, 1),
    *,
    versioned=True,
    strides=None,
    byte_offset=0,
    device=(1, 0),
    data="auto",
    readonly=False,
    flags=None,
    version=(1, 3),
    ndim=None,
    null_shape=False,
    null_deleter=False,
    name=None,
    nbytes=None,
):
    """Forge a DLPack tensor and its capsule; returns a :class:`Forged`.

    shape, dtype=(code, bits, lanes), device=(device_type, device_id), byte_offset,
    version=(major, minor): stored as given (no validation, so tests can lie).
    versioned: DLManagedTensorVersioned in a "dltensor_versioned" capsule, else a legacy
        DLManagedTensor in a "dltensor" capsule.
    strides: None -> NULL strides pointer; a tuple -> that int64 array.
    data: "auto" -> a zeroed ctypes buffer big enough for the (strided) extent plus
        byte_offset, at least 1 byte; with negative strides the data pointer is placed
        inside the buffer so that element 0 and the whole strided extent are in it.
        None -> NULL data pointer; an int -> that address as-is (no buffer).
    nbytes: with data="auto", allocate exactly this many bytes (min 1) instead.
    readonly / flags: flags defaults to READ_ONLY if readonly else 0 (versioned only).
    ndim: None -> len(shape); anything else is stored as-is (-1, 100, ...). The shape and
        strides arrays are zero-padded up to ndim entries (at most 65536) so an importer
        that believes the lie reads zeros, not foreign memory.
    null_shape: NULL shape pointer. null_deleter: NULL deleter.
    name: capsule name override ("foo", "used_dltensor", ...). The destructor calls the
        deleter only if the capsule still has this name and it is not a "used_*" name.
    """
    if not versioned and (flags is not None or readonly):
        raise ValueError("flags/readonly exist only in versioned (DLPack >= 1.0) tensors")
    shape = tuple(int(s) for s in shape)
    strides = None if strides is None else tuple(int(s) for s in strides)
    dtype = tuple(int(x) for x in dtype)
    device = tuple(int(x) for x in device)
    if flags is None:
        flags = READ_ONLY if readonly else 0
    if ndim is None:
        ndim = len(shape)
    pad = min(max(ndim, 0), _MAX_PAD)

    f = Forged()
    f.versioned = bool(versioned)
    f.shape, f.strides, f.dtype, f.device = shape, strides, dtype, device
    f.byte_offset = int(byte_offset)
    f.flags = int(flags) if versioned else None
    f.version = tuple(version) if versioned else None
    f.ndim = int(ndim)

    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    f.managed = m

    # data
    f.data = None
    if isinstance(data, str) and data == "auto":
        size, shift = _auto_layout(
            shape, strides, dtype, f.byte_offset, bool(versioned and flags & IS_SUBBYTE_TYPE_PADDED)
        )
        if nbytes is not None:
            size = max(int(nbytes), 1)
            shift = shift if shift < size else 0
        f.data = (c_uint8 * size)()
        f.data_ptr = ctypes.addressof(f.data) + shift
    elif data is None:
        f.data_ptr = None
    elif isinstance(data, int) and not isinstance(data, bool):
        f.data_ptr = data
    else:
        raise TypeError('data must be "auto", None or an int address')
    t.data = f.data_ptr

    t.device.device_type, t.device.device_id = device
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype

    f.shape_array = None if null_shape else _int64_array(shape, pad)
    if f.shape_array is not None:
        t.shape = ctypes.cast(f.shape_array, POINTER(c_int64))
    f.strides_array = None if strides is None else _int64_array(strides, pad)
    if f.strides_array is not None:
        t.strides = ctypes.cast(f.strides_array, POINTER(c_int64))
    t.byte_offset = f.byte_offset

    # deleter: counts, nothing else (closure over the counter only, so no cycle)
    count = f._count

    def _deleter(_ptr, _count=count):
        _note_pending("deleter")
        _count[0] += 1

    if null_deleter:
        f.deleter = None
    else:
        f.deleter = (DELETER_VERSIONED if versioned else DELETER_LEGACY)(_deleter)
        m.deleter = f.deleter

    if versioned:
        m.version.major, m.version.minor = version
        m.flags = flags
        deleter_offset = DLManagedTensorVersioned.deleter.offset
    else:
        deleter_offset = DLManagedTensor.deleter.offset

    if name is None:
        name = NAME_VERSIONED if versioned else NAME_LEGACY
    f.name = name if isinstance(name, str) else name.decode()
    raw_name = _name_bytes(name)
    cap = _PyCapsule_New(ctypes.addressof(m), raw_name, _DESTRUCTOR_ADDR)
    _CAPSULE_INFO[id(cap)] = (raw_name, deleter_offset)
    f.capsule = cap
    return f


class CountingProducer:
    """A minimal DLPack producer around a Forged (or a factory of Forged objects).

    ``__dlpack__`` records its keyword arguments in ``.calls`` (a list of dicts) and
    returns ``forged.capsule``: the same capsule every time for a Forged, a fresh one per
    call for a factory. A factory is called with the call's kwargs dict if it accepts a
    parameter, else with no arguments. Every Forged handed out is kept in ``.forged``
    (so its memory outlives the consumer). ``__dlpack_device__`` returns ``device`` if
    given, else the (last) forged device, else (1, 0); its calls are counted in
    ``.device_calls``.
    """

    def __init__(self, forged_or_factory, device=None):
        self.calls = []
        self.device_calls = 0
        self.forged = []
        self._device = None if device is None else tuple(device)
        if isinstance(forged_or_factory, Forged):
            self._factory = None
            self.forged.append(forged_or_factory)
        elif callable(forged_or_factory):
            self._factory = forged_or_factory
            try:
                self._pass_kwargs = bool(inspect.signature(forged_or_factory).parameters)
            except (TypeError, ValueError):
                self._pass_kwargs = False
        else:
            raise TypeError("CountingProducer needs a Forged or a callable returning one")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Record the call and return the forged capsule."""
        kwargs = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        self.calls.append(kwargs)
        if self._factory is None:
            return self.forged[0].capsule
        f = self._factory(dict(kwargs)) if self._pass_kwargs else self._factory()
        self.forged.append(f)
        return f.capsule

    def __dlpack_device__(self):
        """The forged device as a (device_type, device_id) tuple."""
        self.device_calls += 1
        if self._device is not None:
            return self._device
        if self.forged:
            return tuple(self.forged[-1].device)
        return (1, 0)
