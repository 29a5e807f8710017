"""Export: a dlinterop Tensor handed out as a DLPack capsule, and its device query."""

import dlinterop as dl

from .common import DTYPES, LAYOUTS, SIZES, Benchmark, dlinterop_tensor


class Export(Benchmark):
    """The capsule a consumer asks for: legacy (no max_version) or versioned (1.x).
    The capsule is dropped at once, so its destructor (and the deleter) is timed too."""

    params = [DTYPES, SIZES, LAYOUTS]
    param_names = ["dtype", "size", "layout"]

    def setup(self, dtype, size, layout):
        self.tensor = dlinterop_tensor(dtype, size, layout)

    def time_dlpack_legacy(self, dtype, size, layout):
        self.tensor.__dlpack__()

    def time_dlpack_versioned(self, dtype, size, layout):
        self.tensor.__dlpack__(max_version=(1, 3))

    def time_to_dlpack(self, dtype, size, layout):
        dl.to_dlpack(self.tensor, versioned=True)


class ExportOptions(Benchmark):
    """Keywords a consumer may pass that change nothing for a CPU tensor."""

    params = [["none", "stream=None", "dl_device=(1, 0)", "copy=False"]]
    param_names = ["keywords"]

    def setup(self, keywords):
        self.tensor = dl.zeros((16,), dl.float32)
        self.kwargs = {
            "none": {},
            "stream=None": {"stream": None},
            "dl_device=(1, 0)": {"dl_device": (1, 0)},
            "copy=False": {"copy": False},
        }[keywords]

    def time_dlpack_versioned(self, keywords):
        self.tensor.__dlpack__(max_version=(1, 3), **self.kwargs)


class Device(Benchmark):
    params = [["float32", "complex128"]]
    param_names = ["dtype"]

    def setup(self, dtype):
        self.tensor = dl.zeros((16,), dtype)

    def time_dlpack_device(self, dtype):
        self.tensor.__dlpack_device__()
