"""The dtype names the frameworks share, as dlinterop names them, and their NumPy dtypes."""

import importlib

_STANDARD = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)


_ML_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
)
# The packed sub-byte integers (DLPack packs them as it packs float6/float4; ml_dtypes and
# JAX have them).
_SUB_BYTE_INTS = ("int1", "int2", "int4", "uint1", "uint2", "uint4")


def _np():
    return importlib.import_module("numpy")


def _numpy_dtype(name):
    np = _np()
    if name in _STANDARD:
        return np.dtype(name if name != "bool" else "bool")
    return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))
