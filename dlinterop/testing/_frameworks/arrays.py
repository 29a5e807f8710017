"""The array libraries: NumPy, array-api-strict, CuPy and Apache Arrow."""

from __future__ import annotations

import importlib

from dlinterop.testing._frameworks.dtypes import _np, _numpy_dtype, numpy_shared_dtypes
from dlinterop.testing._frameworks.model import Framework


def _numpy_framework():
    np = _np()

    def view(kind, values):
        base = np.array(values)
        if kind == "reversed":
            return base[::-1]
        if kind == "strided":
            return base[::2]
        if kind == "broadcast":
            return np.broadcast_to(base[:1], (4,))
        return None

    def readonly(values):
        a = np.array(values)
        a.flags.writeable = False
        return a

    return Framework(
        "numpy",
        lambda v, d: np.asarray(v).astype(_numpy_dtype(d)),
        np.from_dlpack,
        frozenset(numpy_shared_dtypes()),
        view,
        readonly,
        lambda a: bool(a.flags.writeable),
        unexportable=lambda: np.array(["text"]),
    )


def _array_api_strict_framework():
    xp = importlib.import_module("array_api_strict")
    np = _np()
    names = [n for n in numpy_shared_dtypes() if hasattr(xp, n)]

    def make(values, dtype):
        return xp.asarray(np.asarray(values).astype(_numpy_dtype(dtype)))

    def writable(x):
        inner = getattr(x, "_array", None)
        return None if inner is None else bool(inner.flags.writeable)

    return Framework(
        "array_api_strict", make, xp.from_dlpack, frozenset(names), None, None, writable
    )


def _cupy_framework():
    cupy = importlib.import_module("cupy")
    np = _np()
    return Framework(
        "cupy",
        lambda v, d: cupy.asarray(np.asarray(v).astype(_numpy_dtype(d))),
        cupy.from_dlpack,
        frozenset(n for n in numpy_shared_dtypes() if n != "bool") | {"bool"},
    )


def _pyarrow_framework():
    # Arrow's arrays are immutable and exported READ_ONLY; pa.Array.from_dlpack takes only
    # contiguous 1-D data, pa.Tensor.from_dlpack any strides but negative ones, so the
    # checker's consumer is pa.Tensor's (arrays are checked as producers).
    pa = importlib.import_module("pyarrow")
    numbers = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    numbers += ("float16", "float32", "float64")

    def make(values, dtype):
        base = _np().asarray(values).astype(_numpy_dtype(dtype))
        return pa.array(base) if base.ndim == 1 else pa.Tensor.from_numpy(base)

    return Framework(
        "pyarrow",
        make,
        pa.Tensor.from_dlpack,
        frozenset(numbers),
        immutable=True,
        # bit-packed booleans: Arrow has no DLPack layout for them
        unexportable=lambda: pa.array([True, False]),
    )
