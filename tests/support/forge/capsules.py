"""Capsules made, named and read through CPython's C API, the destructor of forged capsules
(the DLPack rule), and the record of callbacks that found an exception pending."""

import ctypes
from ctypes import CFUNCTYPE, PYFUNCTYPE, c_char_p, c_int, c_void_p

from .abi import NAME_VERSIONED, DLManagedTensor, DLManagedTensorVersioned

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
# pending (which CPython forbids for Python code; see the caveat in forge's docstring).
# Tests of consumers' error paths assert that this stays empty.
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
