from typing import NamedTuple

from dlinterop._core import Tensor

class SharedHandle(NamedTuple):
    segment: object  # the private dlinterop._core._SharedMemory
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: tuple[int, int, int]
    readonly: bool

class CudaIpcExport(NamedTuple):
    handle: bytes
    offset: int
    event_handle: bytes
    event: int

class CudaIpcHandle(NamedTuple):
    handle: bytes
    offset: int
    device: int
    event_handle: bytes
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: tuple[int, int, int]
    readonly: bool
    counter: Tensor
