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
    return (t.is_shared, t.shape, t.strides, str(t.dtype), t.readonly,
            np.from_dlpack(t).tolist() if t.dtype != dl.bfloat16 else None)


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


def send_and_exit(q):
    """Sends a shared Tensor and exits at once, before anyone took it."""
    q.put(dl.zeros((3,), "float32", shared=True))
    q.close()
    q.join_thread()
