"""What the multiprocessing tests run in child processes (importable by name: spawned and
forkserver children import it again)."""

import os
import signal
import time

import numpy as np

import dlinterop as dl


def put_result(q, fn, *args):
    q.put(fn(*args))


def describe(t):
    """What the child sees: whether shared, its layout and flags, and its values."""
    return (
        t.is_shared,
        t.shape,
        t.strides,
        str(t.dtype),
        t.readonly,
        np.from_dlpack(t).tolist() if t.dtype != dl.bfloat16 else None,
    )


def write(t, index, value):
    """Writes one value (flat index into a C-contiguous tensor) and says what it saw."""
    np.from_dlpack(t).reshape(-1)[index] = value
    return describe(t)


def add_one(t):
    a = np.from_dlpack(t)
    a += 1
    return t


def queue_round_trip(inbox, outbox):
    t = inbox.get(timeout=60)
    np.from_dlpack(t).reshape(-1)[0] = 99
    outbox.put(t)
    # A sender hands its descriptor over only while it runs: wait until it is taken.
    inbox.get(timeout=60)


def pipe_echo(conn):
    t = conn.recv()
    np.from_dlpack(t).reshape(-1)[-1] = -1
    conn.send(describe(t))
    conn.close()


def send_and_exit(conn, t):
    """Sends `t` and returns: the process exits right after sending."""
    conn.send(t)


def send_and_exit_without_waiting(conn, t):
    """Sends `t` and a word after it, and exits without waiting for its receiver."""
    from dlinterop._integrations import multiprocessing as _multiprocessing

    _multiprocessing._HANDOVER_WAIT = 0
    conn.send(t)
    conn.send("after")


def same_segment(a, b):
    """Whether two Tensors received together lie in one segment object (one owner of its
    descriptor in this process)."""
    from dlinterop import _core

    return _core._shared_handle(a)[0] is _core._shared_handle(b)[0]


class _GoneSegment:
    """A segment whose descriptor was to come from a resource sharer that is gone."""

    def __reduce__(self):
        from dlinterop._integrations import multiprocessing as _multiprocessing

        gone = _multiprocessing._Handover.__new__(_multiprocessing._Handover)
        gone._id, gone._sender = ("\0dlinterop-tests-nobody-listens", 1), os.getpid()
        return (_multiprocessing._rebuild_segment, (gone, 4096))


class _UnreceivableTensor:
    """Pickles as a shared Tensor whose memory cannot be taken when it arrives (its sender
    gone, as a worker killed right after returning it)."""

    def __reduce__(self):
        from dlinterop._integrations import multiprocessing as _multiprocessing

        return (
            _multiprocessing._rebuild_tensor,
            (_GoneSegment(), 0, (4,), (1,), (2, 32, 1), False),
        )


def unreceivable(*args):
    return _UnreceivableTensor()


def hold_forever(inbox, ready):
    t = inbox.get(timeout=60)
    np.from_dlpack(t).reshape(-1)[0] = 5
    ready.put(os.getpid())
    while True:
        time.sleep(1)


def kill(pid):
    os.kill(pid, signal.SIGKILL)


def cuda_add_one(t):
    """In a child: `t` maps the parent's CUDA allocation (CUDA IPC); add one to it there,
    through the host (no framework needed in the child), and return the first value."""
    assert t.device == "cuda:0" and not t.is_shared
    out = np.from_dlpack(t.to("cpu")) + 1
    back = dl.from_dlpack(out).to("cuda")
    dl.cuda._require().copy_contiguous(t.data_ptr, back.data_ptr, back.nbytes, 0, True)
    return float(out.reshape(-1)[0])


def tensor_summary(t):
    """What a Dask or Ray worker sees of a Tensor: its layout, flags and a checksum."""
    values = np.from_dlpack(t)
    return (type(t).__name__, t.shape, str(t.dtype), t.readonly, float(values.sum()))


def scaled(t, factor):
    """A new Tensor made in a worker, sent back."""
    return dl.from_dlpack(np.from_dlpack(t) * factor)


def die_once(t, marker):
    """Kills the worker process running it the first time (marker: a path), then behaves
    as tensor_summary: Dask reschedules the task on another worker."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return tensor_summary(t)
