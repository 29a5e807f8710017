"""The everyday Tensor beside NumPy's ndarray: views, scalar reads, tolist, creation and the
buffer protocol, each call as a user writes it (the rows of python -m benchmarks' "everyday
Tensor" table)."""

import numpy as np

import dlinterop as dl

from .common import Benchmark

LIBRARIES = ["dlinterop", "numpy"]


def _pair(library, array):
    """array itself for NumPy, or a dlinterop Tensor of its own holding the same values."""
    return array if library == "numpy" else dl.asarray(array).copy()


class Views(Benchmark):
    params = [LIBRARIES]
    param_names = ["library"]

    def setup(self, library):
        self.x = _pair(library, np.arange(256, dtype=np.float32).reshape(16, 16))
        self.y = _pair(library, np.ones((16, 1, 16), np.float32))

    def time_index_int(self, library):
        self.x[3]

    def time_index_slice(self, library):
        self.x[1:3]

    def time_index_mixed(self, library):
        self.x[::-2, 1:]

    def time_index_scalar(self, library):
        self.x[3, 4]

    def time_T(self, library):
        return self.x.T

    def time_transpose(self, library):
        self.x.transpose(1, 0)

    def time_reshape(self, library):
        self.x.reshape((256,))

    def time_squeeze(self, library):
        self.y.squeeze(1)


class Scalars(Benchmark):
    params = [LIBRARIES]
    param_names = ["library"]

    def setup(self, library):
        self.f = _pair(library, np.ones((), np.float32))
        self.i = _pair(library, np.ones((), np.int64))

    def time_item(self, library):
        self.f.item()

    def time_float(self, library):
        float(self.f)

    def time_int(self, library):
        int(self.i)


NUMPY_DTYPES = ["bool", "int8", "int64", "uint32", "float16", "float32", "float64", "complex128"]
OTHER_DTYPES = ["bfloat16", "float8_e4m3fn", "float6_e2m3fn", "float4_e2m1fn", "int4", "uint2"]


class ToList(Benchmark):
    """16x16 values as nested lists; the types NumPy lacks are dlinterop's alone."""

    params = [LIBRARIES, NUMPY_DTYPES + OTHER_DTYPES]
    param_names = ["library", "dtype"]

    def setup(self, library, dtype):
        if dtype in OTHER_DTYPES:
            if library == "numpy":
                raise NotImplementedError("NumPy has no such type")
            self.x = dl.zeros((16, 16), dtype=dtype)
        else:
            self.x = _pair(library, (np.arange(256) % 2).astype(dtype).reshape(16, 16))

    def time_tolist(self, library, dtype):
        self.x.tolist()


class Create(Benchmark):
    """empty/zeros/ones/full of 16 float32 elements and of 4 MiB of them; arange(100); a
    16x16 float32 Tensor (array) from a list of lists."""

    params = [LIBRARIES, ["16", "4 MiB"]]
    param_names = ["library", "size"]

    def setup(self, library, size):
        self.module = dl if library == "dlinterop" else np
        self.shape = (16,) if size == "16" else (1024, 1024)
        self.dtype = self.module.float32
        self.rows = np.arange(256, dtype=np.float32).reshape(16, 16).tolist()

    def time_empty(self, library, size):
        self.module.empty(self.shape, dtype=self.dtype)

    def time_zeros(self, library, size):
        self.module.zeros(self.shape, dtype=self.dtype)

    def time_ones(self, library, size):
        self.module.ones(self.shape, dtype=self.dtype)

    def time_full(self, library, size):
        self.module.full(self.shape, 2.0, dtype=self.dtype)

    def time_arange(self, library, size):
        self.module.arange(100)

    def time_from_list(self, library, size):
        if self.module is np:
            np.array(self.rows, np.float32)
        else:
            dl.tensor(self.rows, dtype=dl.float32)


class BufferProtocol(Benchmark):
    """np.asarray over the buffer protocol: of a Tensor, and of a memoryview of an array."""

    params = [LIBRARIES]
    param_names = ["library"]

    def setup(self, library):
        a = np.arange(256, dtype=np.float32).reshape(16, 16)
        self.x = memoryview(a) if library == "numpy" else dl.asarray(a).copy()

    def time_asarray(self, library):
        np.asarray(self.x)
