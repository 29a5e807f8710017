"""Tensors across processes: 256 MiB of float32 to a child process and back, through
concurrent.futures.ProcessPoolExecutor (fork and spawn) and multiprocessing.Queue, as a
shared dl.Tensor (dl.share), a torch tensor in shared memory (torch.multiprocessing's
reductions, registered when torch is imported) and a NumPy array (pickled by value); and
pickle.loads of a 256 MiB protocol-4 pickle, dlinterop beside NumPy.

Each measure is one round trip (the pool or the child started beforehand), repeated; the
median in ms is reported. Used by the side-by-side runner (timing.py) and the asv suite.
This file imports nothing from its own folder, and the child's work is defined here, so
that spawned children can import it by name."""

import concurrent.futures
import multiprocessing
import pickle
import statistics
import time

MIB = 1 << 20
ELEMENTS = 256 * MIB // 4


def echo(x):
    """The child's work: read the first element (so that shared memory is really mapped)
    and send the tensor back. A plain int (the warm-up) comes back as it is."""
    if isinstance(x, int):
        return x
    first = x[0].item() if hasattr(x, "numpy") else memoryview(x).cast("B")[0]
    del first
    return x


def queue_echo(inbox, outbox):
    while True:
        x = inbox.get()
        if x is None:
            return
        outbox.put(echo(x))
        del x


def make(kind, elements=ELEMENTS):
    """The float32 tensor `kind` sends: "dlinterop" (shared), "torch" (in shared memory),
    "numpy"."""
    if kind == "dlinterop":
        import dlinterop as dl

        return dl.full((elements,), 1.0, "float32", shared=True)
    if kind == "torch":
        import torch

        return torch.ones(elements, dtype=torch.float32).share_memory_()
    import numpy as np

    return np.ones(elements, dtype=np.float32)


def _median_ms(samples):
    return statistics.median(samples) * 1000


def executor_round_trip_ms(kind, method, repeats, elements=ELEMENTS):
    """Median ms of submit(echo, x).result() with a warm pool of one worker."""
    x = make(kind, elements)
    ctx = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        pool.submit(echo, 1).result()  # the worker is up
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            back = pool.submit(echo, x).result()
            samples.append(time.perf_counter() - start)
            del back
    return _median_ms(samples)


def queue_round_trip_ms(kind, repeats, elements=ELEMENTS):
    """Median ms of put(x) and get() back through a child (fork), the child started before."""
    x = make(kind, elements)
    ctx = multiprocessing.get_context("fork")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=queue_echo, args=(inbox, outbox), daemon=True)
    child.start()
    try:
        inbox.put(1)
        outbox.get()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            inbox.put(x)
            back = outbox.get()
            samples.append(time.perf_counter() - start)
            del back
    finally:
        inbox.put(None)
        child.join(30)
    return _median_ms(samples)


def pickle_loads_ms(kind, repeats, elements=ELEMENTS):
    """Median ms of pickle.loads of a protocol-4 pickle of the tensor (by value)."""
    if kind == "dlinterop":
        import dlinterop as dl

        x = dl.full((elements,), 1.0, "float32")
    else:
        x = make("numpy", elements)
    data = pickle.dumps(x, protocol=4)
    del x
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        y = pickle.loads(data)
        samples.append(time.perf_counter() - start)
        del y
    return _median_ms(samples)


def available(kind):
    try:
        __import__({"dlinterop": "dlinterop", "torch": "torch", "numpy": "numpy"}[kind])
    except ImportError:
        return False
    return True
