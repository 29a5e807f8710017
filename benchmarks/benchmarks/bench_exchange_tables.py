"""The C exchange tables (DLPack 1.3's DLPackExchangeAPI) called in a C loop, as a C consumer
calls them: dl.exchange_api_for's NumPy, torch, pyarrow and Warp tables, dl.Tensor's own and
PyTorch's own ("torch-own"), beside each object's __dlpack__(max_version=(1, 3)) called
from C. Each timed call makes CALLS calls: asv's numbers are per CALLS
(docs/exchange-tables.md)."""

import numpy as np

import dlinterop as dl
from dlinterop.testing._conformance import exchange_loop

from .common import Benchmark, peer

CALLS = 1000


class ExchangeTable(Benchmark):
    """`call` of a 16-element float32 `owner` object: "view" (dltensor_from_py_object_no_sync),
    "owned" (managed_tensor_from_py_object_no_sync, then the deleter) or "dlpack" (its
    __dlpack__ called from C, the capsule released)."""

    params = [
        ["numpy", "dlinterop", "torch", "torch-own", "pyarrow", "warp"],
        ["view", "owned", "dlpack"],
    ]
    param_names = ["owner", "call"]

    def setup(self, owner, call):
        if owner == "numpy":
            self.obj = np.arange(16, dtype=np.float32)
            self.table = dl.exchange_api_for(np.ndarray)
        elif owner == "dlinterop":
            self.obj = dl.zeros((16,), dl.float32)
            self.table = dl.Tensor.__dlpack_c_exchange_api__
        elif owner == "pyarrow":
            self.obj = peer("pyarrow").array(np.arange(16, dtype=np.float32))
            self.table = dl.exchange_api_for(self.obj)
        elif owner == "warp":
            wp = peer("warp")
            wp.config.quiet = True
            self.obj = wp.array(np.arange(16, dtype=np.float32), device="cpu")
            self.table = dl.exchange_api_for(self.obj)
        else:
            torch = peer("torch")
            self.table = dl.exchange_api_for(torch.Tensor)
            if owner == "torch-own":
                self.table = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
                if self.table is None:
                    raise NotImplementedError("this PyTorch publishes no exchange table")
            self.obj = torch.zeros(16, dtype=torch.float32)
        exchange_loop(self.table, self.obj, 1, call)

    def time_calls(self, owner, call):
        exchange_loop(self.table, self.obj, CALLS, call)
