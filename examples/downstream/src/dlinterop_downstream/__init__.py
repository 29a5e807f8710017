"""An example downstream package: Cython kernels that exchange tensors with dlinterop."""

from dlinterop_downstream._kernels import (
    arange,
    arange_capsule,
    describe,
    dot,
    fill_,
    identity,
    live_blocks,
    ones,
    scaled,
    sum_float32,
    zeros_as,
)

__all__ = [
    "arange",
    "arange_capsule",
    "describe",
    "dot",
    "fill_",
    "identity",
    "live_blocks",
    "ones",
    "scaled",
    "sum_float32",
    "zeros_as",
]
