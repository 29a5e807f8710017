"""DLPack 1.3's structs and flags as ctypes types (64-bit Linux layouts, checked at import
time)."""

import ctypes
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_uint64,
    c_void_p,
)

READ_ONLY = 1  #: DLPACK_FLAG_BITMASK_READ_ONLY
IS_COPIED = 2  #: DLPACK_FLAG_BITMASK_IS_COPIED
IS_SUBBYTE_TYPE_PADDED = 4  #: DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED

DLPACK_VERSION = (1, 3)

NAME_VERSIONED = "dltensor_versioned"
NAME_LEGACY = "dltensor"
NAME_USED_VERSIONED = "used_dltensor_versioned"
NAME_USED_LEGACY = "used_dltensor"


# DLPack's plain structs have one ctypes spelling, the checker's (dlinterop.testing._tables):
# forged tensors and the checker's tables then share their types.
from dlinterop.testing._tables import DLDataType, DLDevice, DLPackVersion, DLTensor  # noqa: E402


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
    assert ctypes.sizeof(c_void_p) == 8, "forge assumes a 64-bit platform"
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
