"""The handles a Tensor crosses a process boundary as, each format defined here once: the
sender's core makes them (dlinterop/core/shared.pxi, dlinterop/core/cuda_ipc.pxi), a
pickle carries their fields, and the receiver's core checks every field again (a pickle can
be written by anyone: dlinterop/core/layouts.pxi's _read_handle_layout)."""

from collections import namedtuple

SharedHandle = namedtuple(
    "SharedHandle", ["segment", "offset", "shape", "strides", "dtype", "readonly"]
)
SharedHandle.__doc__ = """A Tensor over a shared-memory segment: the segment (a _SharedMemory,
whose descriptor and length are sent once per message however many Tensors over it the
message holds), the byte offset of element 0 in it, the shape, the strides in elements,
the data type as DLPack's (code, bits, lanes), and whether the Tensor is read-only."""

CudaIpcExport = namedtuple("CudaIpcExport", ["handle", "offset", "event_handle", "event"])
CudaIpcExport.__doc__ = """What a sender's CUDA Tensor gives CUDA IPC: the IPC handle of its
allocation, the byte offset of element 0 into it, and the IPC handle of an event recorded
on the sender's current stream (with the event itself, which the sender destroys once
every receiver let go)."""

CudaIpcHandle = namedtuple(
    "CudaIpcHandle",
    [
        "handle",
        "offset",
        "device",
        "event_handle",
        "shape",
        "strides",
        "dtype",
        "readonly",
        "counter",
    ],
)
CudaIpcHandle.__doc__ = """A CUDA Tensor over another process's allocation: CudaIpcExport's
handles and offset, the CUDA device index, the layout as SharedHandle's, and the shared
int64 counter of its receivers (an int64 Tensor in shared memory), which each receiver's
Tensor counts down when it dies."""
