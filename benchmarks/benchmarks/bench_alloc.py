"""Allocation: dl.empty and dl.zeros beside np.empty and np.zeros."""

import numpy as np

import dlinterop as dl

from .common import Benchmark

SHAPES = [(1,), (1024,), (1024, 1024), (4096, 4096)]


class Allocate(Benchmark):
    params = [
        ["dlinterop", "numpy"],
        ["float32", "float64", "int8"],
        [str(shape) for shape in SHAPES],
    ]
    param_names = ["library", "dtype", "shape"]

    def setup(self, library, dtype, shape):
        self.module = dl if library == "dlinterop" else np
        self.dtype = dl.dtype(dtype) if library == "dlinterop" else np.dtype(dtype)
        self.shape = SHAPES[[str(s) for s in SHAPES].index(shape)]

    def time_empty(self, library, dtype, shape):
        self.module.empty(self.shape, dtype=self.dtype)

    def time_zeros(self, library, dtype, shape):
        self.module.zeros(self.shape, dtype=self.dtype)

    def time_full(self, library, dtype, shape):
        self.module.full(self.shape, 1, dtype=self.dtype)


class AllocateDefaults(Benchmark):
    """The calls as users write them: dtype left to each library's default."""

    params = [["dlinterop", "numpy"]]
    param_names = ["library"]

    def setup(self, library):
        self.module = dl if library == "dlinterop" else np

    def time_empty_1024x1024(self, library):
        self.module.empty((1024, 1024))

    def time_zeros_1024x1024(self, library):
        self.module.zeros((1024, 1024))


class Alignment(Benchmark):
    params = [[16, 64, 256, 4096]]
    param_names = ["alignment"]

    def time_empty(self, alignment):
        dl.empty((1024,), dl.float32, alignment=alignment)
