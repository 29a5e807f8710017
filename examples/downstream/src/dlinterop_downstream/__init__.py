"""An example downstream package: Cython kernels that exchange tensors with dlinterop."""
from dlinterop_downstream._kernels import (
    arange,
    arange_capsule,
    describe,
    live_blocks,
    ones,
    sum_float32,
)

__all__ = ["arange", "arange_capsule", "describe", "live_blocks", "ones", "sum_float32"]
