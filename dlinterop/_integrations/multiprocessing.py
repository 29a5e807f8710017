"""Tensors in shared memory crossing process boundaries through multiprocessing.

multiprocessing pickles what it sends with its ForkingPickler, whose reducers can pass a
file descriptor to the receiving process. A Tensor whose memory is a shared-memory segment
(dl.share, shared=True) is reduced to that segment and its layout in it; the segment to its
descriptor and length, once per message however many Tensors over it the message holds
(so that a spawned child, which inherits each descriptor once, gets one owner for each).
It arrives as a Tensor over the same memory; a CUDA Tensor goes through CUDA IPC
(cuda_ipc.py); any other Tensor goes by value, as pickle sends it. Ordinary pickling
(pickle.dumps) is left alone: it always goes by value.

A descriptor travels with a child's start (Process arguments under spawn and forkserver),
or else through multiprocessing's resource sharer, a thread of the sending process that
hands it to the receiver when the receiver unpickles (resource_sharer.DupFd). That needs
the sender running then: a process that sent segments waits at exit, up to _HANDOVER_WAIT
seconds, until its receivers have taken them, so that a pool worker that retires right
after returning a shared Tensor (maxtasksperchild, max_tasks_per_child) or a process that
sends and exits still delivers. A Tensor that cannot be received all the same raises a
RuntimeError saying why, in the receiver; in the result thread of a multiprocessing.Pool
or a ProcessPoolExecutor, where an exception would end the thread (and every later result
of the pool with it), it becomes the exception of that one result instead.

The reducers are registered with ForkingPickler as soon as multiprocessing.reduction is
imported, without importing it here: import dlinterop must not import multiprocessing (it
costs milliseconds), so until it is imported an import hook waits for it (after_import).
"""

import _thread
import os

_REDUCTION = "multiprocessing.reduction"

# How long a process waits at exit for the receivers of the segments it sent to take them.
# A pool's result thread takes a result's at once; a receiver that joins its sender before
# receiving from it cannot, and gets the sender back after this long.
_HANDOVER_WAIT = 30.0


def _reduce_tensor(tensor):
    from dlinterop import _core

    if _core._device_kind(tensor.device).cuda_ipc:
        return _reduce_cuda(tensor)
    handle = _core._shared_handle(tensor)
    if handle is None:
        return tensor.__reduce_ex__(4)  # by value, in the pickle
    return (_rebuild_tensor, tuple(handle))


def _reduce_segment(segment):
    from multiprocessing import context, reduction

    if context.get_spawning_popen() is not None:
        descriptor = reduction.DupFd(segment.fd)  # goes with the child when it starts
    else:
        descriptor = _Handover(segment.fd)
    return (_rebuild_segment, (descriptor, segment.length))


def _rebuild_segment(descriptor, length):
    """In the receiving process: the segment the sender's descriptor names, mapped (its
    length is checked against the segment: a pickle can be written by anyone)."""
    from dlinterop import _core

    try:
        return _core._segment_from_fd(descriptor.detach(), length)
    except Exception as e:
        return _failed(e)


def _rebuild_tensor(segment, offset, shape, strides, dtype_triple, readonly):
    """In the receiving process: the Tensor over a segment received (every part of the
    layout is checked)."""
    from dlinterop import _core

    if segment is None and getattr(_receiving, "failures", None):
        return None  # its segment did not arrive: that is the failure reported
    try:
        return _core._tensor_in_segment(segment, offset, shape, strides, dtype_triple, readonly)
    except Exception as e:
        return _failed(e)


# -- handing descriptors over ------------------------------------------------------------

# Per sending process (a forked child inherits its parent's entry, and leaves it alone):
# descriptors registered with the resource sharer and not yet taken or dropped.
_pending: dict = {}
_pending_lock = _thread.allocate_lock()  # (threading would cost import time)
_waits_at_exit = None  # the pid of the process whose exit waits for receivers


class _Handover:
    """A duplicate of a segment's descriptor that multiprocessing's resource sharer hands to
    the process that unpickles this: resource_sharer.DupFd, counted while pending so that
    the sending process can wait for its receivers at exit."""

    def __init__(self, fd):
        from multiprocessing import reduction, resource_sharer

        kept = os.dup(fd)
        sender = os.getpid()

        def send(conn, pid):
            reduction.send_handle(conn, kept, pid)

        def close():  # the sharer calls it once: after send, or when it stops
            os.close(kept)
            _count_pending(sender, -1)

        try:
            self._id = resource_sharer._resource_sharer.register(send, close)
        except BaseException:
            os.close(kept)
            raise
        _count_pending(sender, 1)  # (the sharer's listener exists now: see below)
        self._sender = sender

    def detach(self):
        from multiprocessing import reduction, resource_sharer

        try:
            with resource_sharer._resource_sharer.get_connection(self._id) as conn:
                return reduction.recv_handle(conn)
        except (OSError, EOFError) as e:
            raise RuntimeError(
                f"cannot receive a shared Tensor: process {self._sender}, which sent it, "
                f"no longer hands its memory over ({type(e).__name__}: {e}). A sender waits "
                f"{_HANDOVER_WAIT:g} s at exit for its receivers: receive before joining it "
                "(a message is also received once only)"
            ) from e


def _count_pending(sender, change):
    global _waits_at_exit
    with _pending_lock:
        _pending[sender] = _pending.get(sender, 0) + change
        first = change > 0 and _waits_at_exit != sender
        if first:
            _waits_at_exit = sender
    if first:
        from multiprocessing import util

        # At exit, multiprocessing removes the resource sharer's socket at priority 0, and
        # runs finalizers of one priority newest first: this one, made after the sharer's
        # listener, runs before, and after Queues are told to finish (priority 10).
        util.Finalize(None, _wait_for_receivers, exitpriority=0)


def _wait_for_receivers():
    """At exit: waits, up to _HANDOVER_WAIT seconds, until the receivers of every segment
    this process sent have taken them (the resource sharer's thread hands them over), while
    a process that could take one runs (_receivers_alive)."""
    import threading
    import time

    deadline = time.monotonic() + _HANDOVER_WAIT
    if not _receivers_alive():
        return
    # A Queue's feeder thread pickles what was put last (its segments among them) until it
    # is joined at priority -5, after the sharer's socket is gone: join it now.
    for thread in threading.enumerate():
        if thread.name == "QueueFeederThread" and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    while _pending.get(os.getpid(), 0) > 0 and time.monotonic() < deadline and _receivers_alive():
        time.sleep(0.005)


def _receivers_alive():
    """Whether this process's parent or a child of it still runs. Only processes of its
    family hold the key its resource sharer asks for, and they come and go with these: a
    main process whose pool was terminated has nobody left to take what it sent."""
    from multiprocessing import process

    parent = process.parent_process()
    return (parent is not None and parent.is_alive()) or bool(process.active_children())


# -- failures on arrival -----------------------------------------------------------------

# Per thread: None, or, while a pool's result thread receives one result, the failures of
# the rebuilds in it, which must not raise there.
_receiving = _thread._local()


def _failed(error):
    """Raises `error` (a Tensor could not be received); in a pool's result thread, keeps it
    as the failure of the result being received and returns None in the Tensor's place."""
    failures = getattr(_receiving, "failures", None)
    if failures is None:
        raise error
    failures.append(error)
    return None


def _received(receive):
    """receive() and the failures of the Tensors in what it received."""
    _receiving.failures = failures = []
    try:
        return receive(), failures
    finally:
        _receiving.failures = None


def _pool_task(get):
    """The next (job, index, (success, value)) off a multiprocessing.Pool's result queue;
    one holding a Tensor that could not be received is that task's failure."""
    task, failures = _received(get)
    if not failures:
        return task
    if type(task) is tuple and len(task) == 3:
        job, i, _ = task
        return (job, i, (False, failures[0]))
    raise failures[0]


def _receive_pool_results(pool):
    """Gives multiprocessing.Pool's result thread _pool_task as its way to receive: an
    exception there ends the thread without a word, and every later result of the pool
    with it (python/cpython#79492, open; the thread takes its `get` when the Pool is
    made)."""
    handle_results = pool.Pool.__dict__.get("_handle_results")
    if not isinstance(handle_results, staticmethod):
        return
    handle = handle_results.__func__

    def _handle_results(outqueue, get, cache):
        return handle(outqueue, lambda: _pool_task(get), cache)

    pool.Pool._handle_results = staticmethod(_handle_results)


def _receive_executor_results(process):
    """Makes a result of a ProcessPoolExecutor holding a Tensor that could not be received
    that future's exception: raised in its manager thread, it would break the executor."""
    manager = getattr(process, "_ExecutorManagerThread", None)
    wait = getattr(manager, "wait_result_broken_or_wakeup", None)
    result_type = getattr(process, "_ResultItem", None)
    if wait is None or result_type is None:
        return

    def wait_result_broken_or_wakeup(self):
        (result_item, is_broken, cause), failures = _received(lambda: wait(self))
        if failures and isinstance(result_item, result_type):
            result_item.exception, result_item.result = failures[0], None
        return result_item, is_broken, cause

    manager.wait_result_broken_or_wakeup = wait_result_broken_or_wakeup


def _reduce_cuda(tensor):
    from dlinterop._integrations import cuda_ipc

    return (_rebuild_cuda, tuple(cuda_ipc.send(tensor)))


def _rebuild_cuda(
    handle, offset, device, event_handle, shape, strides, dtype_triple, readonly, counter
):
    """In the receiving process: the CUDA Tensor over the sender's allocation (the fields
    of a CudaIpcHandle, dlinterop/_lib/handles.py)."""
    from dlinterop._integrations import cuda_ipc
    from dlinterop._lib.handles import CudaIpcHandle

    if counter is None and getattr(_receiving, "failures", None):
        return None  # its receivers' count did not arrive: that is the failure reported
    try:
        return cuda_ipc.receive(
            CudaIpcHandle(
                handle,
                offset,
                device,
                event_handle,
                shape,
                strides,
                dtype_triple,
                readonly,
                counter,
            )
        )
    except Exception as e:
        return _failed(e)


def _register(reduction):
    from dlinterop import _core

    reduction.ForkingPickler.register(_core.Tensor, _reduce_tensor)
    reduction.ForkingPickler.register(_core._SharedMemory, _reduce_segment)


def install():
    """Registers the reducers, and the pools' ways to receive, now for the modules imported
    already, else when they will be. (Each of the pools' modules imports
    multiprocessing.reduction while it runs: waited for from there, they would be found
    half made.)"""
    from dlinterop._integrations.after_import import when_imported

    when_imported(_REDUCTION, _register)
    when_imported("multiprocessing.pool", _receive_pool_results)
    when_imported("concurrent.futures.process", _receive_executor_results)
