"""Tensors across processes (issue 31): 256 MiB of float32 to a child and back through
ProcessPoolExecutor (fork, spawn) and multiprocessing.Queue, as a shared dl.Tensor beside a
torch tensor in shared memory and a NumPy array pickled by value; and pickle.loads of a
protocol-4 pickle. The work itself is in benchmarks/processes.py (children import it)."""

import concurrent.futures
import multiprocessing
import os
import pickle
import sys

from .common import Benchmark

# Left on sys.path: spawned children (which get this process's path) import the work from
# benchmarks/processes.py by name.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _HERE not in sys.path:
    sys.path.append(_HERE)
# Under another name: asv reads module attributes named "processes", "number", "repeat", ...
# as benchmark settings.
import processes as work  # noqa: E402

ELEMENTS = work.ELEMENTS  # 256 MiB of float32


class AcrossProcesses(Benchmark):
    params = [["dlinterop", "torch", "numpy"], ["executor fork", "executor spawn", "queue"]]
    param_names = ["sent", "through"]
    timeout = 600

    def setup(self, sent, through):
        if not work.available(sent):
            raise NotImplementedError(f"{sent} is not installed")
        self.x = work.make(sent, ELEMENTS)
        if through == "queue":
            ctx = multiprocessing.get_context("fork")
            self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
            self.child = ctx.Process(
                target=work.queue_echo, args=(self.inbox, self.outbox), daemon=True
            )
            self.child.start()
            self.pool = None
        else:
            ctx = multiprocessing.get_context(through.split()[1])
            self.pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx)
            self.pool.submit(work.echo, 1).result()

    def teardown(self, sent, through):
        # asv runs it after a setup that raised NotImplementedError too: nothing to stop then.
        if getattr(self, "pool", None) is not None:
            self.pool.shutdown()
        elif getattr(self, "child", None) is not None:
            self.inbox.put(None)
            self.child.join(30)

    def time_there_and_back(self, sent, through):
        if self.pool is not None:
            self.pool.submit(work.echo, self.x).result()
        else:
            self.inbox.put(self.x)
            self.outbox.get()


class PickleLoads(Benchmark):
    """pickle.loads of a protocol-4 pickle (by value, in the pickle)."""

    params = [["dlinterop", "numpy"]]
    param_names = ["library"]

    def setup(self, library):
        if library == "dlinterop":
            import dlinterop as dl

            x = dl.full((ELEMENTS,), 1.0, "float32")
        else:
            x = work.make("numpy", ELEMENTS)
        self.data = pickle.dumps(x, protocol=4)

    def time_loads(self, library):
        pickle.loads(self.data)
