"""The frameworks that hold memory another made: tvm-ffi, dlinterop, cuda.core and nanobind
(their arrays are made here from NumPy's)."""

from __future__ import annotations

import importlib

from dlinterop.testing._frameworks.arrays import _numpy_framework
from dlinterop.testing._frameworks.dtypes import (
    _ML_DTYPES,
    _SUB_BYTE_INTS,
    _np,
    _numpy_dtype,
    numpy_shared_dtypes,
)
from dlinterop.testing._frameworks.model import Framework


def _tvm_ffi_framework():
    tvm_ffi = importlib.import_module("tvm_ffi")
    numpy = _numpy_framework()

    def make(values, dtype):
        return tvm_ffi.from_dlpack(numpy.make(values, dtype))

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else tvm_ffi.from_dlpack(v)

    return Framework("tvm_ffi", make, tvm_ffi.from_dlpack, numpy.dtypes, view)


def _dlinterop_framework():
    import dlinterop as dl

    numpy = _numpy_framework()
    np = _np()

    def make(values, dtype):
        base = np.asarray(values)
        if dtype in numpy_shared_dtypes():
            return dl.from_dlpack(base.astype(_numpy_dtype(dtype))).copy()
        return dl.asarray(base.astype(_numpy_dtype(dtype))).copy()

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else dl.from_dlpack(v)

    def readonly(values):
        return dl.from_dlpack(numpy.readonly(values))

    return Framework(
        "dlinterop",
        make,
        dl.from_dlpack,
        frozenset(
            numpy_shared_dtypes() + _ML_DTYPES + _SUB_BYTE_INTS + ("complex32", "bcomplex32")
        ),
        view,
        readonly,
        lambda t: not t.readonly,
    )


def _cuda_core_framework():
    # cuda.core's StridedMemoryView: a consumer (from_dlpack) and, through its own
    # __dlpack__ and the C exchange table its type publishes, a producer.
    view_type = importlib.import_module("cuda.core.utils").StridedMemoryView
    numpy = _numpy_framework()

    def from_dlpack(obj, **kwargs):
        if kwargs:
            raise TypeError(f"StridedMemoryView.from_dlpack takes no {', '.join(kwargs)}")
        # stream_ptr=-1: no stream ordering (CPU memory, or the caller synchronised).
        return view_type.from_dlpack(obj, stream_ptr=-1)

    def view(kind, values):
        v = numpy.view(kind, values)
        return None if v is None else from_dlpack(v)

    return Framework(
        "cuda_core",
        lambda v, d: from_dlpack(numpy.make(v, d)),
        from_dlpack,
        numpy.dtypes,
        view,
        lambda values: from_dlpack(numpy.readonly(values)),
        lambda smv: not smv.readonly,
    )


def _nanobind_framework():
    # nb::ndarray as a nanobind extension uses it: a small module built for the purpose
    # (dlinterop.testing._nanobind), whose from_dlpack is nanobind's import and whose arrays
    # are nanobind's own ndarray objects.
    peer = importlib.import_module("dlinterop.testing._nanobind").peer()
    np = _np()

    def make(values, dtype):
        base = np.asarray(values).astype(_numpy_dtype(dtype))
        if dtype in numpy_shared_dtypes():
            return peer.copy(base)
        import dlinterop as dl

        return peer.copy(dl.asarray(base))

    def view(kind, values):
        v = _numpy_framework().view(kind, values)
        return None if v is None else peer.from_dlpack(v)

    return Framework(
        "nanobind",
        make,
        peer.from_dlpack,
        frozenset(numpy_shared_dtypes() + _ML_DTYPES[:9]),
        view,
        # what nb::ndarray<nb::ro> takes is exported READ_ONLY
        lambda values: peer.from_dlpack(np.array(values)),
        lambda x: False,
    )
