# cython: language_level=3, freethreading_compatible=True, auto_pickle=False
"""The kernel author's way out: outputs allocated by the caller's framework and handed back
as that framework's own type, borrowed views of inputs, and argument checks.

    out = dl.empty_like(x)               # PyTorch input: torch's allocator made the memory
    ... fill out ...
    return dl.to_framework(out, like=x)  # a torch.Tensor (a NumPy array for NumPy input)

Where the caller's type publishes the DLPack C exchange API (PyTorch), allocation and the
hand-back go through its table (managed_tensor_allocator, managed_tensor_to_py_object_no_sync)
with no Python call; otherwise dlinterop's allocator and that framework's `from_dlpack`,
looked up once per type. The C-level versions are declared in dlinterop/frameworks.pxd."""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromVoidPtr
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from cpython.object cimport Py_TYPE, PyTypeObject
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from libc.stdint cimport int64_t, uint8_t, uint64_t, uintptr_t
from libc.string cimport strncpy

from dlinterop.dlpack cimport *
from dlinterop._lib.rules cimport MAX_NDIM, dims_from_python, is_c_contiguous
from dlinterop._lib.threadsafe cimport dict_get, type_version
from dlinterop._lib.type_cache cimport (
    dli_type_cache, type_cache_fetch, type_cache_forget, type_cache_last, type_cache_size,
)
from dlinterop._core cimport (
    DType, Device, Tensor, borrow_dltensor, check_copy_arg, checked_nbytes, device_from_dl,
    device_from_object, dtype_text, empty_tensor, exchange_api_of, keep_layout,
    numpy_array_from, offset_in_pointer, order_for_consumer, owned_export_block,
    raise_pending_error,
    read_only_by_flag, refuse_torch_tensor, tensor_from_managed, tensor_from_object,
    tensor_from_producer,
    to_managed, torch_native_reads, TorchNativeReads, zero_fill,
)

import importlib
import operator
import os
import sys
import threading
import types
import warnings
import weakref

from dlinterop._core import CopyError

from dlinterop import _core

cdef extern from "Python.h":
    PyObject* PyErr_Occurred()
    int PyErr_ExceptionMatches(object exc)
    void PyErr_Clear()
    bint PyModule_Check(object obj)

# Held while an exchange table is made (once per framework, whichever thread asks first);
# reentrant: making the torch table runs PyTorch code, which may ask again.
_tables_lock = threading.RLock()

# The module's files, in the order they build on each other (each uses only those above it).
include "framework_parts/checks.pxi"       # arg_spec, check_arg, check_tensor
include "framework_parts/borrow.pxi"       # borrowed views of inputs
include "framework_parts/allocation.pxi"   # empty_like, zeros_like: the caller's allocator
include "framework_parts/adapters.pxi"     # how to make each framework's object, cached
include "framework_parts/handback.pxi"     # to_framework: a Tensor as the caller's type
include "framework_parts/exchange_jax.pxi" # the exchange table for jax.Array objects
include "framework_parts/exchange_torch.pxi"  # the exchange table for torch.Tensor objects
include "framework_parts/exchange_fixed.pxi"  # tables for pyarrow's and Warp's arrays
