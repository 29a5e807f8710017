"""The frameworks the checker knows by name (NumPy, PyTorch, JAX, tvm-ffi, array-api-strict,
dlinterop, CuPy, Apache Arrow, cuda.core, MLX, Warp and nanobind), each described as a
Framework; peers are imported by name only when checked, so an installation without them is
not looked for."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass
class Framework:
    """What the checker needs of a framework.

    make(values, dtype): a new array of this framework with the values of the NumPy array
    `values` cast to `dtype` (a dlinterop dtype name: "float32", "bfloat16", ...).
    dtypes: the dtype names it has. from_dlpack(obj, **kwargs): its consumer.
    view(kind, values): an array of the framework whose layout is `kind` ("reversed",
    "strided", "broadcast") over `values`, or None when it cannot make one.
    readonly(values): a read-only array, or None when it has none. writable(obj): whether
    an array may be written (None: cannot say). unexportable(): an array of the framework
    whose data type DLPack cannot carry (a string array, a quantized tensor), or None when
    it has none. Missing optional parts make their rules n/a.
    """

    name: str
    make: Callable[[Any, str], Any]
    from_dlpack: Callable[..., Any]
    dtypes: frozenset
    view: Callable[[str, Any], Any] | None = None
    readonly: Callable[[Any], Any] | None = None
    writable: Callable[[Any], bool | None] | None = None
    immutable: bool = False  # its arrays can never be written (JAX, array-api-strict)
    unexportable: Callable[[], Any] | None = None


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
        frozenset(_STANDARD),
        view,
        readonly,
        lambda a: bool(a.flags.writeable),
        unexportable=lambda: np.array(["text"]),
    )


def _torch_framework():
    torch = importlib.import_module("torch")
    np = _np()
    names = [
        n
        for n in _STANDARD + _ML_DTYPES
        if n != "float8_e4m3"
        and isinstance(getattr(torch, n if n != "bool" else "bool", None), torch.dtype)
    ]

    def make(values, dtype):
        target = getattr(torch, dtype)
        base = np.asarray(values)
        if base.dtype.kind in "biu" and dtype in _STANDARD:
            return torch.from_numpy(base.astype(_numpy_dtype(dtype)).copy())
        return torch.from_numpy(
            base.astype(np.complex128 if base.dtype.kind == "c" else np.float64).copy()
        ).to(target)

    def view(kind, values):
        base = torch.from_numpy(np.array(values))
        if kind == "strided":
            return base[::2]
        if kind == "broadcast":
            return base[:1].expand(4)
        return None  # torch has no negative strides

    return Framework(
        "torch",
        make,
        torch.from_dlpack,
        frozenset(names),
        view,
        None,
        lambda x: True,
        unexportable=lambda: torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.quint8),
    )


def _jax_framework():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    jax = importlib.import_module("jax")
    jnp = importlib.import_module("jax.numpy")
    np = _np()
    jax.config.update("jax_enable_x64", True)
    names = [
        n
        for n in _STANDARD + _ML_DTYPES + _SUB_BYTE_INTS
        if hasattr(jnp, n if n != "bool" else "bool_")
    ]

    def make(values, dtype):
        return jnp.asarray(np.asarray(values).astype(_numpy_dtype(dtype)))

    def unexportable():
        # XLA's S4 has "no DLPack equivalent" in JAX (DLPack's packed int4 is one).
        return jnp.zeros(4, jnp.int4)

    return Framework(
        "jax",
        make,
        jnp.from_dlpack,
        frozenset(names),
        None,
        None,
        lambda x: False,
        immutable=True,
        unexportable=unexportable,
    )


def _tvm_ffi_framework():
    tvm_ffi = importlib.import_module("tvm_ffi")
    numpy = _numpy_framework()

    def make(values, dtype):
        return tvm_ffi.from_dlpack(numpy.make(values, dtype))

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else tvm_ffi.from_dlpack(v)

    return Framework("tvm_ffi", make, tvm_ffi.from_dlpack, numpy.dtypes, view)


def _array_api_strict_framework():
    xp = importlib.import_module("array_api_strict")
    np = _np()
    names = [n for n in _STANDARD if hasattr(xp, n)]

    def make(values, dtype):
        return xp.asarray(np.asarray(values).astype(_numpy_dtype(dtype)))

    def writable(x):
        inner = getattr(x, "_array", None)
        return None if inner is None else bool(inner.flags.writeable)

    return Framework(
        "array_api_strict", make, xp.from_dlpack, frozenset(names), None, None, writable
    )


def _dlinterop_framework():
    import dlinterop as dl

    numpy = _numpy_framework()
    np = _np()

    def make(values, dtype):
        base = np.asarray(values)
        if dtype in _STANDARD:
            return dl.from_dlpack(base.astype(_numpy_dtype(dtype))).copy()
        return dl.asarray(base.astype(_numpy_dtype(dtype))).copy()

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else dl.from_dlpack(v)

    def readonly(values):
        return dl.from_dlpack(numpy.readonly(values))

    return Framework(
        "dlinterop",
        make,
        dl.from_dlpack,
        frozenset(_STANDARD + _ML_DTYPES + _SUB_BYTE_INTS + ("complex32", "bcomplex32")),
        view,
        readonly,
        lambda t: not t.readonly,
    )


def _cupy_framework():
    cupy = importlib.import_module("cupy")
    np = _np()
    return Framework(
        "cupy",
        lambda v, d: cupy.asarray(np.asarray(v).astype(_numpy_dtype(d))),
        cupy.from_dlpack,
        frozenset(n for n in _STANDARD if n != "bool") | {"bool"},
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


def _cuda_core_framework():
    # cuda.core's StridedMemoryView: a consumer (from_dlpack) and, through its own
    # __dlpack__ and the C exchange table its type publishes, a producer.
    view_type = importlib.import_module("cuda.core.utils").StridedMemoryView
    numpy = _numpy_framework()

    def from_dlpack(obj, **kwargs):
        if kwargs:
            raise TypeError(f"StridedMemoryView.from_dlpack takes no {', '.join(kwargs)}")
        # stream_ptr=-1: no stream ordering (CPU memory, or the caller synchronised).
        return view_type.from_dlpack(obj, stream_ptr=-1)

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else from_dlpack(v)

    return Framework(
        "cuda_core",
        lambda v, d: from_dlpack(numpy.make(v, d)),
        from_dlpack,
        numpy.dtypes,
        view,
        lambda values: from_dlpack(numpy.readonly(values)),
        lambda smv: not smv.readonly,
    )


def _mlx_framework():
    # MLX exports legacy capsules only and copies every CPU import.
    mx = importlib.import_module("mlx.core")
    np = _np()
    names = [n for n in _STANDARD + ("bfloat16",) if isinstance(getattr(mx, n, None), mx.Dtype)]

    def make(values, dtype):
        base = np.asarray(values)
        if dtype == "bfloat16":
            return mx.array(base.astype(np.float32)).astype(mx.bfloat16)
        return mx.array(base.astype(_numpy_dtype(dtype)), dtype=getattr(mx, dtype))

    def view(kind, values):
        base = mx.array(np.asarray(values))
        if kind == "reversed":
            return base[::-1]
        if kind == "strided":
            return base[::2]
        if kind == "broadcast":
            return mx.broadcast_to(base[:1], (4,))
        return None

    return Framework("mlx", make, mx.from_dlpack, frozenset(names), view)


def _warp_framework():
    # Warp's CPU device: legacy capsules only, no max_version, dl_device or copy keywords.
    wp = importlib.import_module("warp")
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    np = _np()
    names = [n for n in _STANDARD if not n.startswith("complex")]
    if getattr(wp, "bfloat16", None) is not None:
        names.append("bfloat16")

    def make(values, dtype):
        base = np.asarray(values)
        if dtype == "bfloat16":
            return wp.array(base.astype(np.float32), dtype=wp.float32, device="cpu").view(
                wp.bfloat16
            )
        kind = getattr(wp, dtype) if dtype != "bool" else wp.bool
        return wp.array(base.astype(_numpy_dtype(dtype)), dtype=kind, device="cpu")

    def view(kind, values):
        base = np.array(values)
        views = {"reversed": base[::-1], "strided": base[::2]}
        return wp.from_dlpack(views[kind]) if kind in views else None

    return Framework("warp", make, wp.from_dlpack, frozenset(names), view, None, lambda x: True)


def _nanobind_framework():
    # nb::ndarray as a nanobind extension uses it: a small module built for the purpose
    # (dlinterop.testing._nanobind), whose from_dlpack is nanobind's import and whose arrays
    # are nanobind's own ndarray objects.
    peer = importlib.import_module("dlinterop.testing._nanobind").peer()
    np = _np()

    def make(values, dtype):
        base = np.asarray(values).astype(_numpy_dtype(dtype))
        if dtype in _STANDARD:
            return peer.copy(base)
        import dlinterop as dl

        return peer.copy(dl.asarray(base))

    def view(kind, values):
        v = _numpy_framework().view(kind, values)
        return None if v is None else peer.from_dlpack(v)

    return Framework(
        "nanobind",
        make,
        peer.from_dlpack,
        frozenset(_STANDARD + _ML_DTYPES[:9]),
        view,
        # what nb::ndarray<nb::ro> takes is exported READ_ONLY
        lambda values: peer.from_dlpack(np.array(values)),
        lambda x: False,
    )


FRAMEWORKS = {
    "numpy": _numpy_framework,
    "torch": _torch_framework,
    "jax": _jax_framework,
    "tvm_ffi": _tvm_ffi_framework,
    "array_api_strict": _array_api_strict_framework,
    "dlinterop": _dlinterop_framework,
    "cupy": _cupy_framework,
    "pyarrow": _pyarrow_framework,
    "cuda_core": _cuda_core_framework,
    "mlx": _mlx_framework,
    "warp": _warp_framework,
    "nanobind": _nanobind_framework,
}


def framework(spec):
    """A Framework from a builtin name, "module:callable" or a Framework (returned as is)."""
    if isinstance(spec, Framework):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"a framework is a name, 'module:callable' or a Framework, got {type(spec).__name__}"
        )
    if ":" in spec:
        module, _, attribute = spec.partition(":")
        made = getattr(importlib.import_module(module), attribute)()
        if not isinstance(made, Framework):
            raise TypeError(
                f"{spec} returned {type(made).__name__}, not a dlinterop.testing.Framework"
            )
        return made
    if spec not in FRAMEWORKS:
        raise ValueError(
            f"unknown framework {spec!r}; builtin ones: {', '.join(FRAMEWORKS)}"
            " (or give module:callable)"
        )
    return FRAMEWORKS[spec]()
