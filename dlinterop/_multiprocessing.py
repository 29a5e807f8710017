"""Tensors in shared memory crossing process boundaries through multiprocessing.

multiprocessing pickles what it sends with its ForkingPickler, whose reducers can pass a
file descriptor to the receiving process (multiprocessing.reduction.DupFd: SCM_RIGHTS over
a socket, or the descriptor handed to a spawned child at start). A Tensor whose memory is a
shared-memory segment (dl.share, shared=True) is reduced to that segment's descriptor and
its layout, and arrives as a Tensor over the same memory; any other Tensor goes by value,
as pickle sends it. Ordinary pickling (pickle.dumps) is left alone: it always goes by value.

The reducer is registered with ForkingPickler as soon as multiprocessing.reduction is
imported, without importing it here: import dlinterop must not import multiprocessing (it
costs milliseconds), so until it is imported an import hook waits for it (_after_import).
"""
import _thread

_REDUCTION = "multiprocessing.reduction"


def _reduce_tensor(tensor):
    from dlinterop import _core

    if tensor.device.type == "cuda":
        return _reduce_cuda(tensor)
    handle = _core._shared_handle(tensor)
    if handle is None:
        return tensor.__reduce_ex__(4)   # by value, in the pickle
    from multiprocessing import reduction

    fd, *layout = handle
    return (_rebuild_tensor, (reduction.DupFd(fd), *layout))


def _rebuild_tensor(dup_fd, length, offset, shape, strides, dtype_triple, readonly):
    """In the receiving process: the Tensor over the segment the sender's descriptor names
    (every part of the handle is checked: a pickle can be written by anyone)."""
    from dlinterop import _core

    try:
        fd = dup_fd.detach()
    except (FileNotFoundError, ConnectionError, EOFError) as e:
        # multiprocessing hands the descriptor over from a thread of the sending process
        # (multiprocessing.resource_sharer): gone with it, it says only "No such file".
        raise OSError("cannot take a shared Tensor's memory from the process that sent it: "
                      "that process has exited (a sender must keep running until its "
                      f"receivers have taken what it sent) [{type(e).__name__}: {e}]") from e
    return _core._tensor_from_shared(fd, length, offset, shape, strides, dtype_triple,
                                     readonly)


# CUDA Tensors sent and not yet let go by every receiver: (tensor, receivers' count, event,
# device). CUDA IPC maps the sender's own allocation into the receiver, so the sender keeps
# the Tensor (and the event the receiver's stream waited on) until the count, a shared
# int64 each receiver decrements when its Tensor dies, is back to 0. Checked at each send.
_cuda_sent: list = []
_cuda_sent_lock = _thread.allocate_lock()   # (threading would cost import time)


def _reduce_cuda(tensor):
    from dlinterop import _core

    sent = tensor
    try:
        handle, offset, event_handle, event = _core._cuda_ipc_handle(tensor)
    except _core.CUDAError:
        # Memory from a stream-ordered pool (dlinterop's own CUDA allocations where the
        # device has one) has no IPC handle: send a device copy in memory that has.
        sent = _core._share_cuda_tensor(tensor)
        handle, offset, event_handle, event = _core._cuda_ipc_handle(sent)
    counter = _core.zeros((1,), "int64", shared=True)
    _core._shared_counter_add(counter, 1)       # one receiver, in flight
    device = tensor.device.index
    with _cuda_sent_lock:
        _cuda_sent.append((sent, counter, event, device))
    _release_received()
    return (_rebuild_cuda, (handle, offset, device, event_handle, tensor.shape, tensor.strides,
                            tensor.dtype.__dlpack_data_type__(), tensor.readonly, counter))


def _release_received():
    """Lets go of the CUDA Tensors every receiver has let go of."""
    from dlinterop import _core

    with _cuda_sent_lock:
        done = [entry for entry in _cuda_sent if _core._shared_counter_add(entry[1], 0) <= 0]
        for entry in done:
            _cuda_sent.remove(entry)
    if not done:
        return
    module = _core._cuda_module()
    for _tensor, _counter, event, device in done:
        module.event_destroy(device, event)


def _rebuild_cuda(handle, offset, device, event_handle, shape, strides, dtype_triple,
                  readonly, counter):
    """In the receiving process: the CUDA Tensor over the sender's allocation."""
    from dlinterop import _core

    return _core._tensor_from_cuda_ipc(handle, offset, device, event_handle, shape, strides,
                                       dtype_triple, readonly, counter)


def _register(reduction):
    from dlinterop import _core

    reduction.ForkingPickler.register(_core.Tensor, _reduce_tensor)


def install():
    """Registers the reducer now when multiprocessing.reduction is imported already, else
    when it will be."""
    from dlinterop._after_import import when_imported

    when_imported(_REDUCTION, _register)
