"""Copies: Tensor.copy and from_dlpack(copy=True), beside NumPy's."""

import numpy as np

import dlinterop as dl

from .common import DTYPES, LAYOUTS, SIZES, Benchmark, dlinterop_tensor, numpy_array


def _source(library, dtype, size, layout):
    # Filled, so that the copy reads real pages rather than the shared zero page.
    if library == "dlinterop":
        return dlinterop_tensor(dtype, size, layout, fill=True)
    return numpy_array(dtype, size, layout, fill=True)


class Copy(Benchmark):
    params = [["dlinterop", "numpy"], SIZES, LAYOUTS]
    param_names = ["library", "size", "layout"]

    def setup(self, library, size, layout):
        self.source = _source(library, "float32", size, layout)

    def time_copy(self, library, size, layout):
        self.source.copy()


class CopyDtype(Benchmark):
    params = [["dlinterop", "numpy"], DTYPES]
    param_names = ["library", "dtype"]

    def setup(self, library, dtype):
        self.source = _source(library, dtype, "1 MiB", "contiguous")

    def time_copy(self, library, dtype):
        self.source.copy()


class FromDlpackCopy(Benchmark):
    """from_dlpack(a, copy=True) of a NumPy array: the copy on import."""

    params = [["dlinterop", "numpy"], SIZES, LAYOUTS]
    param_names = ["library", "size", "layout"]

    def setup(self, library, size, layout):
        self.array = numpy_array("float32", size, layout, fill=True)
        self.from_dlpack = dl.from_dlpack if library == "dlinterop" else np.from_dlpack

    def time_from_dlpack_copy(self, library, size, layout):
        self.from_dlpack(self.array, copy=True)
