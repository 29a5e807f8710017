"""CUDA IPC's protocol, in one place: how a CUDA Tensor is sent to another process and
received there, whatever carries the message (multiprocessing's reducers today).

The native half is dlinterop/core/cuda_ipc.pxi (the IPC handles, the mapping, the receipt
that counts a receiver down); the formats are dlinterop/_lib/handles.py's. CUDA IPC maps
the sender's own allocation into the receiver, so the sender keeps each Tensor it sent, and
the event the receiver's stream waited on, until the count of its receivers (an int64 in
shared memory, which each receiver's Tensor decrements when it dies) is back to 0; what is
let go is found at each send.
"""

import _thread

# CUDA Tensors sent and not yet let go by every receiver: (tensor, receivers' count, event,
# device).
_sent: list = []
_sent_lock = _thread.allocate_lock()  # (threading would cost import time)


def send(tensor):
    """The CudaIpcHandle another process receives `tensor` by; `tensor` (or the device copy
    sent in its place) is kept until every receiver let go."""
    from dlinterop import _core
    from dlinterop._lib.handles import CudaIpcHandle

    sent = tensor
    try:
        export = _core._cuda_ipc_handle(tensor)
    except _core.CUDAError:
        # Memory from a stream-ordered pool (dlinterop's own CUDA allocations where the
        # device has one) has no IPC handle: send a device copy in memory that has.
        sent = _core._share_cuda_tensor(tensor)
        export = _core._cuda_ipc_handle(sent)
    counter = _core.zeros((1,), "int64", shared=True)
    _core._shared_counter_add(counter, 1)  # one receiver, in flight
    device = tensor.device.index
    with _sent_lock:
        _sent.append((sent, counter, export.event, device))
    release_received()
    return CudaIpcHandle(
        export.handle,
        export.offset,
        device,
        export.event_handle,
        tensor.shape,
        tensor.strides,
        tensor.dtype.__dlpack_data_type__(),
        tensor.readonly,
        counter,
    )


def receive(handle):
    """The CUDA Tensor over the sender's allocation that a CudaIpcHandle describes (every
    field checked by the core)."""
    from dlinterop import _core

    return _core._tensor_from_cuda_ipc(*handle)


def release_received():
    """Lets go of the CUDA Tensors every receiver has let go of."""
    from dlinterop import _core

    with _sent_lock:
        done = [entry for entry in _sent if _core._shared_counter_add(entry[1], 0) <= 0]
        for entry in done:
            _sent.remove(entry)
    if not done:
        return
    module = _core._cuda_module()
    for _tensor, _counter, event, device in done:
        module.event_destroy(device, event)
