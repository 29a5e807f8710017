"""The frameworks with data types of their own: PyTorch, JAX, MLX and Warp."""

from __future__ import annotations

import importlib
import os

from dlinterop.testing._frameworks.dtypes import (
    _ML_DTYPES,
    _SUB_BYTE_INTS,
    _np,
    _numpy_dtype,
    numpy_shared_dtypes,
)
from dlinterop.testing._frameworks.model import Framework


def _torch_framework():
    torch = importlib.import_module("torch")
    np = _np()
    names = [
        n
        for n in numpy_shared_dtypes() + _ML_DTYPES
        if n != "float8_e4m3"
        and isinstance(getattr(torch, n if n != "bool" else "bool", None), torch.dtype)
    ]

    def make(values, dtype):
        target = getattr(torch, dtype)
        base = np.asarray(values)
        if base.dtype.kind in "biu" and dtype in numpy_shared_dtypes():
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
        for n in numpy_shared_dtypes() + _ML_DTYPES + _SUB_BYTE_INTS
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


def _mlx_framework():
    # MLX exports legacy capsules only and copies every CPU import.
    mx = importlib.import_module("mlx.core")
    np = _np()
    names = [
        n
        for n in numpy_shared_dtypes() + ("bfloat16",)
        if isinstance(getattr(mx, n, None), mx.Dtype)
    ]

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
    names = [n for n in numpy_shared_dtypes() if not n.startswith("complex")]
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
