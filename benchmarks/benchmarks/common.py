"""Inputs shared by the benchmarks.

Append-only: asv compares results across commits by benchmark name and parameters, so the
names, shapes and fill values here never change once published; add new ones at the end.

Inputs are built in `setup`, never at import. The installed peers (PyTorch, JAX, tvm-ffi)
are imported here once, so that asv's forkserver (see asv.conf.json) pays for them once rather
than in every benchmark process. A benchmark whose peer is not installed, or that a peer
cannot do, raises NotImplementedError in setup, which asv reports as skipped.
"""

import functools
import importlib
import os

import numpy as np

import dlinterop as dl

DTYPES = ["int8", "float32", "float64", "complex128"]
# From one element to 64 MiB: exchanging a tensor must cost the same at every size.
SIZES = ["1 element", "4 KiB", "1 MiB", "64 MiB"]
LAYOUTS = ["contiguous", "strided", "transposed"]
PEERS = ["numpy", "torch", "jax", "tvm_ffi"]
LIBRARIES = ["dlinterop"] + PEERS
ROUND_TRIPS = 100_000

_SIZE_BYTES = {"1 element": 0, "4 KiB": 4 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}
_COLUMNS = 64


class Benchmark:
    """Base class, as in NumPy's suite: one place to hang suite-wide attributes."""

    timeout = 180


def element_count(size, dtype):
    return max(1, _SIZE_BYTES[size] // np.dtype(dtype).itemsize)


def shape_for(size, dtype):
    """A 2-D shape holding `size`: (1, 1) for one element, else 64 columns."""
    count = element_count(size, dtype)
    if count < _COLUMNS:
        return (1, count)
    return (count // _COLUMNS, _COLUMNS)


def numpy_array(dtype, size, layout, fill=False):
    """A NumPy array of `size` in `layout`. Zeros unless `fill`: zero pages are never
    touched, so building a 64 MiB input for an exchange benchmark costs nothing; copies
    need `fill=True` so that they read real memory."""
    rows, columns = shape_for(size, dtype)
    make = (
        (lambda shape: np.full(shape, 1, dtype)) if fill else (lambda shape: np.zeros(shape, dtype))
    )
    if layout == "contiguous":
        return make((rows, columns))
    if layout == "strided":
        return make((rows, 2 * columns))[:, ::2]
    if layout == "transposed":
        return make((columns, rows)).T
    raise ValueError(f"unknown layout {layout!r}")


def dlinterop_tensor(dtype, size, layout, fill=False):
    """A dlinterop Tensor of `size` in `layout`. Contiguous ones are dlinterop's own memory;
    dlinterop cannot slice, so strided and transposed ones view a NumPy array."""
    if layout == "contiguous":
        shape = shape_for(size, dtype)
        return dl.full(shape, 1, dtype) if fill else dl.zeros(shape, dtype)
    return dl.from_dlpack(numpy_array(dtype, size, layout, fill))


@functools.cache
def peer(name):
    """The peer's module (jax.numpy for jax), or NotImplementedError: asv skips the case."""
    try:
        if name == "jax":
            # CPU benchmarks: no probing for accelerators; 64-bit dtypes as NumPy has them.
            os.environ.setdefault("JAX_PLATFORMS", "cpu")
            jax = importlib.import_module("jax")
            jax.config.update("jax_enable_x64", True)
            return importlib.import_module("jax.numpy")
        module = importlib.import_module(name)
        if name == "torch":
            importlib.import_module("torch.utils.dlpack")
        return module
    except ImportError:
        raise NotImplementedError(f"{name} is not installed") from None


def peer_tensor(library, dtype, size, layout, fill=False):
    """`library`'s own tensor with the given contents and layout."""
    if library == "dlinterop":
        return dlinterop_tensor(dtype, size, layout, fill)
    array = numpy_array(dtype, size, layout, fill)
    if library == "numpy":
        return array
    module = peer(library)
    if library == "torch":
        return module.from_numpy(array)  # a view: keeps the layout
    if library == "jax":
        if layout != "contiguous":
            raise NotImplementedError("JAX arrays are always compact")
        return module.asarray(array).block_until_ready()
    if library == "tvm_ffi":
        return module.from_dlpack(array)  # tvm-ffi has no Python allocator of its own
    raise ValueError(f"unknown library {library!r}")


def from_dlpack_of(library):
    """The function `library` imports DLPack objects with."""
    if library == "dlinterop":
        return dl.from_dlpack
    if library == "numpy":
        return np.from_dlpack
    return peer(library).from_dlpack


def _preload_peers():
    for name in PEERS[1:]:
        try:
            peer(name)
        except NotImplementedError:
            pass


_preload_peers()


def check_consumable(consumer, layout):
    if consumer == "jax" and layout != "contiguous":
        raise NotImplementedError("JAX refuses non-compact strides")
