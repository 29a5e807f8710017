"""The dtype names the frameworks share, as dlinterop names them, and their NumPy dtypes."""

import importlib

_numpy_shared = None  # numpy_shared_dtypes()'s answer, once asked


def numpy_shared_dtypes():
    """The names of dlinterop's data types that NumPy has as its own (bool, the 8- to 64-bit
    integers, float16/32/64, complex64/128; not those ml_dtypes adds to it), in the order
    dlinterop registers them. The one home of this list for the checker, the benchmarks and
    the tests: derived from dlinterop's registered types and NumPy's, never written out."""
    global _numpy_shared
    if _numpy_shared is not None:
        return _numpy_shared
    import dlinterop._core as core

    np = _np()
    names = []
    for value in vars(core).values():  # the module's names, in the order they are registered
        if not isinstance(value, core.DType) or value.name in names:
            continue
        try:
            own = np.dtype(value.name).type.__module__ == "numpy"
        except TypeError:  # a name NumPy does not know (ml_dtypes' when it is not imported)
            continue
        if own:
            names.append(value.name)
    _numpy_shared = tuple(names)
    return _numpy_shared


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
    if name in numpy_shared_dtypes():
        return np.dtype(name if name != "bool" else "bool")
    return np.dtype(getattr(importlib.import_module("ml_dtypes"), name))
