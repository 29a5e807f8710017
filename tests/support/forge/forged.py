"""A forged DLPack tensor (:class:`Forged`) and :func:`forge`, which builds one."""

import ctypes
import sys
from ctypes import POINTER, c_int64, c_uint8

from .abi import (
    DELETER_LEGACY,
    DELETER_VERSIONED,
    IS_SUBBYTE_TYPE_PADDED,
    NAME_LEGACY,
    NAME_VERSIONED,
    READ_ONLY,
    DLManagedTensor,
    DLManagedTensorVersioned,
)
from .capsules import (
    _CAPSULE_INFO,
    _DESTRUCTOR_ADDR,
    _NAMES,
    _ORPHANS,
    _name_bytes,
    _note_pending,
    _PyCapsule_GetName,
    _PyCapsule_New,
    _PyCapsule_SetDestructor,
)


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
    memory the struct points to (see forge's docstring).
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
