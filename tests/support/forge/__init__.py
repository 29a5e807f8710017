"""Forge DLPack capsules with ctypes (standard library only), for the test suite.

The importer under test must be fed well-formed *and* malformed DLPack tensors; no real
producer will hand out a tensor with ``ndim=-1`` or a NULL shape, so this package builds
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

Parts
-----
``abi``: DLPack's structs and flags as ctypes types; ``capsules``: capsules made, named and
read through CPython's C API, and their destructor; ``forged``: :class:`Forged` and
:func:`forge`; ``producer``: :class:`CountingProducer`.
"""

from .abi import (
    DELETER_LEGACY,
    DELETER_VERSIONED,
    DLPACK_VERSION,
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    NAME_LEGACY,
    NAME_USED_LEGACY,
    NAME_USED_VERSIONED,
    NAME_VERSIONED,
    READ_ONLY,
    DLDataType,
    DLDevice,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
)
from .capsules import (
    _ORPHANS,  # noqa: F401 (the fuzzer empties it between inputs)
    PENDING_SEEN,
    c_strides,
    capsule_name,
    capsule_strides,
    make_capsule,
    managed_pointer,
    same_layout,
)
from .forged import Forged, forge
from .producer import CountingProducer

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
    "c_strides",
    "same_layout",
    "CountingProducer",
]
