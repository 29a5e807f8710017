"""The way out (issue 15): a dlinterop Tensor handed back as the caller's type, and a trivial
kernel (one float32 tensor in, a new one of the caller's type out) written with dlinterop's
Cython API beside the same kernel written with nanobind's nb::ndarray."""

import os
import sys

import numpy as np

import dlinterop as dl

from .common import Benchmark, peer

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _kernels(which):
    """The compiled kernels of benchmarks/kernels.py (built once, cached); NotImplementedError
    where they cannot be built here, which asv takes as a skip."""
    sys.path.insert(0, _HERE)
    try:
        import kernels
    finally:
        sys.path.pop(0)
    try:
        module = (
            kernels.build_cython_kernels if which == "dlinterop" else kernels.build_nanobind_kernels
        )()
    except Exception as exc:
        raise NotImplementedError(f"the {which} kernel does not build here: {exc}") from None
    if module is None:
        raise NotImplementedError(f"{which} is not installed")
    return module


def _input(framework):
    if framework == "numpy":
        return np.zeros(16, np.float32)
    return peer("torch").zeros(16)


class ToFramework(Benchmark):
    """dl.to_framework(t, like=x) beside x's framework's own from_dlpack(t)."""

    params = [["numpy", "torch"], ["to_framework", "from_dlpack"]]
    param_names = ["framework", "route"]

    def setup(self, framework, route):
        self.like = _input(framework)
        self.tensor = dl.zeros((16,), "float32")
        module = np if framework == "numpy" else peer("torch")
        if route == "to_framework":
            tensor, like = self.tensor, self.like
            self.call = lambda: dl.to_framework(tensor, like=like)
        else:
            tensor, from_dlpack = self.tensor, module.from_dlpack
            self.call = lambda: from_dlpack(tensor)

    def time_hand_back(self, framework, route):
        self.call()


class Kernel(Benchmark):
    """Per-call overhead of the trivial kernel, dlinterop's and nanobind's, per input type."""

    params = [["numpy", "torch"], ["dlinterop", "nanobind"]]
    param_names = ["framework", "written_with"]

    def setup(self, framework, written_with):
        self.input = _input(framework)
        module = _kernels(written_with)
        if written_with == "nanobind" and framework == "torch":
            self.kernel = module.identity_torch
        else:
            self.kernel = module.identity
        out = self.kernel(self.input)
        if type(out) is not type(self.input):
            raise RuntimeError(f"{written_with}'s kernel returned {type(out).__name__}")

    def time_kernel(self, framework, written_with):
        self.kernel(self.input)
