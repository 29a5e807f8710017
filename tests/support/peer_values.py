"""What the interop tests of the frameworks share: the DLPack types every framework names
alike (dlinterop.testing's list, the checker's), and varied values of each."""

import numpy as np

from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

# bool, the signed and unsigned integers, float16/32/64, complex64/128
STANDARD = list(numpy_shared_dtypes())


def values_of(name, n=6):
    """n varied values of dtype `name` as a NumPy array: alternating booleans, negative
    integers where signed, quarters for floats and complex numbers (float32 ones for
    bfloat16, which NumPy lacks)."""
    base = np.arange(n) * 37 % 23 - 7
    if name == "bool":
        return base % 2 == 0
    if name.startswith("uint"):
        return (base + 7).astype(name)
    if name == "bfloat16":
        return (base / 4).astype(np.float32)
    if name.startswith("complex"):
        return (base / 4 + 1j * base / 8).astype(name)
    if name.startswith("float"):
        return (base / 4).astype(name)
    return base.astype(name)
