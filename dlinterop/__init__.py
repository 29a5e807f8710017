"""dlinterop: zero-copy tensor interchange through DLPack.

Importing dlinterop never imports NumPy, PyTorch, JAX or CuPy, and never fails for lack
of CUDA: `dl.cuda` is loaded on first use.
"""

TYPE_CHECKING = False  # not typing's: importing dlinterop stays free of typing


def _in_subinterpreter():
    import _thread

    is_main = getattr(_thread, "_is_main_interpreter", None)  # CPython 3.12+
    if is_main is not None:
        return not is_main()
    try:
        interpreters = __import__("_xxsubinterpreters")  # CPython 3.10, 3.11
    except ImportError:
        return False
    return interpreters.get_current() != interpreters.get_main()


# dlinterop's compiled modules keep per-process state (single-phase Cython modules), so they
# load into one interpreter per process, and the first one to load them would keep them:
# after a subinterpreter, the main interpreter could never import them. Refused here,
# before any of them is loaded.
if _in_subinterpreter():
    raise ImportError(
        "dlinterop cannot be imported in a subinterpreter; import it in the main interpreter"
    )

try:
    from dlinterop import _core
except ImportError:
    # Run from a source checkout (python -m dlinterop in the repository root): the checkout
    # shadows the installed package but has no compiled modules. Let the installed copy
    # serve them.
    import os as _os
    import sys as _sys

    _here = _os.path.realpath(__path__[0])
    for _entry in _sys.path:
        _candidate = _os.path.realpath(_os.path.join(_entry or ".", "dlinterop"))
        _built = _os.path.join(_candidate, "_lib", "build_config.py")  # written by the build
        if _candidate != _here and _os.path.isfile(_built):
            __path__.append(_candidate)
            _borrowed_compiled_modules = True
            break
    from dlinterop import _core

from dlinterop._core import (
    CopyError,
    Device,
    DeviceType,
    DType,
    Tensor,
    __dlpack_version__,
    arange,
    asarray,
    bcomplex32,
    bfloat16,
    bool_,
    complex32,
    complex64,
    complex128,
    dtype,
    empty,
    exchange_api_for,
    float4_e2m1fn,
    float4_e2m1fn_x2,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    from_dlpack,
    full,
    int1,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    memory_stats,
    ones,
    publish_exchange_api,
    share,
    tensor,
    to_dlpack,
    uint1,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
    unpublish_exchange_api,
    zeros,
)
from dlinterop._integrations import multiprocessing as _multiprocessing
from dlinterop._lib.info import build_info, get_include

_multiprocessing.install()  # shared Tensors cross multiprocessing by handle (once it is used)
from dlinterop.frameworks import check_tensor, empty_like, to_framework, zeros_like

# DLINTEROP_SANITIZE=1: the lifetime sanitizer from the start (dlinterop.sanitizer).
if __import__("os").environ.get("DLINTEROP_SANITIZE", "0") not in ("", "0"):
    from dlinterop import sanitizer as _sanitizer

    _sanitizer._enable_from_environment()

if TYPE_CHECKING:
    # Type checkers see dl.cuda; at run time it is loaded on first use (__getattr__).
    from dlinterop import cuda as cuda

# The one place the version is written: pyproject.toml reads it from here.
__version__ = "0.2.0"

__all__ = [
    "CopyError",
    "DType",
    "Device",
    "DeviceType",
    "Tensor",
    "arange",
    "asarray",
    "bcomplex32",
    "bfloat16",
    "bool_",
    "build_info",
    "check_tensor",
    "complex128",
    "complex32",
    "complex64",
    "cuda",
    "dtype",
    "empty",
    "empty_like",
    "exchange_api_for",
    "publish_exchange_api",
    "unpublish_exchange_api",
    "float16",
    "float32",
    "float4_e2m1fn",
    "float4_e2m1fn_x2",
    "float64",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "from_dlpack",
    "full",
    "get_include",
    "int1",
    "int16",
    "int2",
    "int32",
    "int4",
    "int64",
    "int8",
    "memory_stats",
    "ones",
    "share",
    "tensor",
    "to_dlpack",
    "to_framework",
    "uint1",
    "uint16",
    "uint2",
    "uint32",
    "uint4",
    "uint64",
    "uint8",
    "zeros",
    "zeros_like",
]


def __getattr__(name: str) -> object:
    if name == "cuda":
        import importlib

        module = importlib.import_module("dlinterop.cuda")
        globals()["cuda"] = module
        return module
    raise AttributeError(f"module 'dlinterop' has no attribute {name!r}")
