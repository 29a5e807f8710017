"""The frameworks the checker knows by name (NumPy, PyTorch, JAX, tvm-ffi, array-api-strict,
dlinterop, CuPy, Apache Arrow, cuda.core, MLX, Warp and nanobind), each described as a
Framework; peers are imported by name only when checked, so an installation without them is
not looked for.

One module per family: arrays.py the array libraries (NumPy, array-api-strict, CuPy,
Apache Arrow), ml.py the frameworks with types of their own (PyTorch, JAX, MLX, Warp),
bindings.py those that hold another's memory (tvm-ffi, dlinterop, cuda.core, nanobind);
model.py what a Framework is, dtypes.py the dtype names they share. FRAMEWORKS below is
the table of them by name.
"""

from __future__ import annotations

import importlib

from dlinterop.testing._frameworks.arrays import (
    _array_api_strict_framework,
    _cupy_framework,
    _numpy_framework,
    _pyarrow_framework,
)
from dlinterop.testing._frameworks.bindings import (
    _cuda_core_framework,
    _dlinterop_framework,
    _nanobind_framework,
    _tvm_ffi_framework,
)
from dlinterop.testing._frameworks.ml import (
    _jax_framework,
    _mlx_framework,
    _torch_framework,
    _warp_framework,
)
from dlinterop.testing._frameworks.model import Framework

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
