"""What the capsule-ownership tests share: the max_version cases, a capsule's managed struct,
and the exports still live."""

import ctypes

import pytest

import dlinterop as dl

from forge import DLManagedTensor, DLManagedTensorVersioned, capsule_name

MAX_VERSIONS = [None, (0, 0), (1, 0), (1, 3), (2, 0)]


MV_IDS = ["None", "0.0", "1.0", "1.3", "2.0"]


parametrize_max_version = pytest.mark.parametrize("max_version", MAX_VERSIONS, ids=MV_IDS)


# Private function objects, so that ctypes.pythonapi's shared ones keep their settings.
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)


def managed_struct(capsule):
    """The capsule's DLManagedTensor[Versioned], read in place with forge's ctypes types."""
    name = capsule_name(capsule)
    address = _get_pointer(capsule, name.encode())
    assert address
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return struct.from_address(address)


def live_exports():
    return dl.memory_stats()["live_exports"]


class CapsuleProducer:
    """Hands a ready-made capsule to a consumer (NumPy) that only takes __dlpack__ objects."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        capsule, self.capsule = self.capsule, None
        return capsule

    def __dlpack_device__(self):
        return (1, 0)
