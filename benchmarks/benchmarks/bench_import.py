"""Import: dl.from_dlpack of each library's objects, and each library importing dlinterop's."""

import dlinterop as dl

from .common import (
    DTYPES,
    LAYOUTS,
    LIBRARIES,
    SIZES,
    Benchmark,
    check_consumable,
    dlinterop_tensor,
    from_dlpack_of,
    numpy_array,
    peer,
    peer_tensor,
)


class ImportFrom(Benchmark):
    """dl.from_dlpack(obj) for obj made by `producer`; zero-copy at every size."""

    params = [LIBRARIES, SIZES, LAYOUTS]
    param_names = ["producer", "size", "layout"]

    def setup(self, producer, size, layout):
        self.obj = peer_tensor(producer, "float32", size, layout)

    def time_from_dlpack(self, producer, size, layout):
        dl.from_dlpack(self.obj)


class ImportDtype(Benchmark):
    """dl.from_dlpack of NumPy arrays of each dtype: the dtype lookup on import."""

    params = [DTYPES, SIZES]
    param_names = ["dtype", "size"]

    def setup(self, dtype, size):
        self.array = numpy_array(dtype, size, "contiguous")

    def time_from_dlpack(self, dtype, size):
        dl.from_dlpack(self.array)

    def time_asarray(self, dtype, size):
        dl.asarray(self.array)


class ImportCapsule(Benchmark):
    """dl.from_dlpack of a bare capsule, as from a producer that predates __dlpack__."""

    params = [["legacy", "versioned"]]
    param_names = ["capsule"]

    def setup(self, capsule):
        self.array = numpy_array("float32", "1 element", "contiguous")
        self.kwargs = {} if capsule == "legacy" else {"max_version": (1, 0)}

    def time_from_dlpack(self, capsule):
        dl.from_dlpack(self.array.__dlpack__(**self.kwargs))


class ConsumeDlinterop(Benchmark):
    """`consumer`.from_dlpack(t) for a dlinterop Tensor t."""

    params = [LIBRARIES, SIZES, LAYOUTS]
    param_names = ["consumer", "size", "layout"]

    def setup(self, consumer, size, layout):
        check_consumable(consumer, layout)
        self.from_dlpack = from_dlpack_of(consumer)
        self.tensor = dlinterop_tensor("float32", size, layout)

    def time_from_dlpack(self, consumer, size, layout):
        self.from_dlpack(self.tensor)


class ConsumeNumpy(Benchmark):
    """The same consumers on a NumPy array: the yardstick for ConsumeDlinterop."""

    params = [LIBRARIES, SIZES]
    param_names = ["consumer", "size"]

    def setup(self, consumer, size):
        self.from_dlpack = from_dlpack_of(consumer)
        self.array = numpy_array("float32", size, "contiguous")

    def time_from_dlpack(self, consumer, size):
        self.from_dlpack(self.array)


class ImportTorchExchange(Benchmark):
    """A torch tensor imported by dlinterop through torch's C exchange table and through
    its __dlpack__ (the route copy=False takes), beside torch's and tvm-ffi's own imports
    of the same tensor."""

    params = [
        [
            "dl.from_dlpack (table)",
            "dl.from_dlpack (__dlpack__)",
            "torch.from_dlpack",
            "tvm_ffi.from_dlpack",
        ]
    ]
    param_names = ["importer"]

    def setup(self, importer):
        torch = peer("torch")
        self.tensor = torch.zeros((16,), dtype=torch.float32)
        if importer == "dl.from_dlpack (table)":
            self.call = dl.from_dlpack
        elif importer == "dl.from_dlpack (__dlpack__)":
            self.call = lambda x: dl.from_dlpack(x, copy=False)
        else:
            self.call = from_dlpack_of(importer.split(".")[0])

    def time_from_dlpack(self, importer):
        self.call(self.tensor)
