"""Build facts and the include directory for downstream builds."""

from __future__ import annotations

import importlib.util  # noqa: F401  (used below as importlib.util, where importlib is local)
import os

from dlinterop._core import __dlpack_version__
from dlinterop._lib import build_config as _build_config

TYPE_CHECKING = False  # not typing's: importing dlinterop stays free of typing
if TYPE_CHECKING:
    from typing import Any

# Distribution name for each optional peer dlinterop exchanges with.
PEERS = {
    "numpy": "numpy",
    "torch": "torch",
    "jax": "jax",
    "cupy": "cupy-cuda13x",
    "tvm_ffi": "apache-tvm-ffi",
    "array_api_strict": "array-api-strict",
    "ml_dtypes": "ml_dtypes",
    "pyarrow": "pyarrow",
    "cuda.core": "cuda-core",
    "mlx": "mlx",
    "warp": "warp-lang",
}


def get_include() -> str:
    """The directory holding dlpack/dlpack.h, for a downstream extension's -I."""
    # _build_config is written by the build, so it sits in the installed package (in its
    # _lib/) even when an editable install serves the Python sources from a checkout.
    package = os.path.dirname(os.path.dirname(os.path.abspath(_build_config.__file__)))
    return os.path.join(package, "include")


def _installed_version(module: str, distribution: str) -> str | None:
    import importlib.metadata  # 10+ ms to import: only when asked

    try:
        if importlib.util.find_spec(module) is None:
            return None
    except ModuleNotFoundError:  # a dotted name (cuda.core) whose parent is missing
        return None
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        for dist in importlib.metadata.distributions():
            if (dist.read_text("top_level.txt") or "").split() == [module]:
                return dist.version
        return "unknown"


def build_info() -> dict[str, Any]:
    """Versions, what was built, whether a GPU is usable, and which peers are installed.
    Finding the peers does not import them."""
    from dlinterop import __version__, cuda

    return {
        "dlinterop": __version__,
        "dlpack_abi": "{}.{}".format(*__dlpack_version__),
        "cython": _build_config.cython_version,
        "cuda_toolkit": _build_config.cuda_toolkit_version,
        "cuda_allocator_built": _build_config.cuda_built,
        "numpy_route_built": _build_config.numpy_route_built,
        "build_options": {
            "DLINTEROP_CUDA": _build_config.cuda_option,
            "DLINTEROP_NUMPY": _build_config.numpy_option,
        },
        "gpu_usable": cuda.is_available(),
        "frameworks": {
            name: version
            for name, dist in PEERS.items()
            if (version := _installed_version(name, dist)) is not None
        },
    }
