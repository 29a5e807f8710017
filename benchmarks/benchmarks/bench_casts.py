"""Casts and assignment, NumPy's habits on a Tensor: Tensor.astype and t[key] = value,
beside NumPy's astype and assignment."""

import numpy as np

from .common import SIZES, Benchmark, dlinterop_tensor, numpy_array

# source -> target: the plain C types (a loop per pair) and float16 (rounded per element)
CASTS = ["float64 -> float32", "float64 -> int32", "int64 -> float64", "float32 -> float16"]


class Astype(Benchmark):
    params = [["dlinterop", "numpy"], CASTS, SIZES]
    param_names = ["library", "cast", "size"]

    def setup(self, library, cast, size):
        source, self.target = cast.split(" -> ")
        make = dlinterop_tensor if library == "dlinterop" else numpy_array
        self.source = make(source, size, "contiguous", fill=True)

    def time_astype(self, library, cast, size):
        self.source.astype(self.target)


class SetItem(Benchmark):
    """t[key] = value: a number into one element, a list into a row, an array of another
    type into every other column (a strided destination, a cast)."""

    params = [["dlinterop", "numpy"], ["number", "row from a list", "strided cast"]]
    param_names = ["library", "assignment"]

    def setup(self, library, assignment):
        make = dlinterop_tensor if library == "dlinterop" else numpy_array
        self.destination = make("float64", "1 MiB", "contiguous", fill=True)
        rows, columns = self.destination.shape
        self.row = [1.5] * columns
        self.values = np.full((rows, columns // 2), 1, np.float32)

    def time_setitem(self, library, assignment):
        if assignment == "number":
            self.destination[3, 5] = 2.5
        elif assignment == "row from a list":
            self.destination[1] = self.row
        else:
            self.destination[:, ::2] = self.values
