# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
# cython: embedsignature=True, embedsignature.format=clinic, binding=False
# cython: freethreading_compatible=True, auto_pickle=False
"""dlinterop's core: data types, devices, the Tensor, DLPack export and import, the bridge
for objects without DLPack and the C exchange table. One extension, so that the hot paths
never cross a module boundary; below, its files in the order they build on each other
(each uses only those above it; docs/architecture.md draws the paths through them)."""

cimport cython
from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_FORMAT, PyBUF_ND,
    PyBUF_RECORDS_RO, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_CheckBuffer,
    PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from cpython.object cimport Py_EQ, Py_GE, Py_GT, Py_LE, Py_LT, Py_NE
from cpython.pycapsule cimport PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_SetName
from cpython.ref cimport Py_INCREF, PyObject
from libc.float cimport FLT_MAX
from libc.math cimport ceil
from libc.stdint cimport (
    INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
    uint64_t, uintptr_t,
)
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset, strcmp

from dlinterop.dlpack cimport *
from dlinterop._cuda_table cimport dli_cuda_table
from dlinterop._lib.device_kinds cimport (
    DLI_DEVICE_TYPES, DLI_KIND_CUDA, DLI_KIND_CUDA_GPU, DLI_KIND_CUDA_IPC, DLI_KIND_HOST,
    DLI_KIND_HOST_READABLE, DLI_KIND_PINNED, DLI_KIND_STREAM_ZERO, DLI_KIND_STREAMS,
    dli_device_cuda, dli_device_cuda_gpu, dli_device_cuda_ipc, dli_device_host,
    dli_device_host_copies, dli_device_host_readable, dli_device_kind, dli_device_kind_of,
    dli_device_known, dli_device_pinned, dli_device_reachable, dli_device_stream_zero,
    dli_device_streams,
)
from dlinterop._lib.rules cimport (
    MAX_NDIM, dims_from_python, element_count, element_count_of, is_c_contiguous, item_bytes,
    refuse_ndim, same_device, storage_bytes,
)
from dlinterop._lib.threadsafe cimport FREE_THREADED, type_version
from dlinterop._lib.type_cache cimport (
    dli_type_cache, type_cache_fetch, type_cache_forget, type_cache_last, type_cache_size,
)

import math
import operator
import os
import struct
import sys
import weakref

include "core/runtime.pxi"         # C declarations, atomics, constants
include "core/once.pxi"            # one-time set-ups: no lock held across Python, fork-safe
include "core/dtypes.pxi"          # DType and dl.dtype()
include "core/devices.pxi"         # DeviceType, Device, device parsing
include "core/tensor_base.pxi"     # the Tensor's C-level life: constructors, owners, readers
include "core/layouts.pxi"         # layout checks: foreign DLTensors, new buffers; handles
include "core/cuda.pxi"            # the hooks into the CUDA layer (dlinterop._cuda)
include "core/allocator.pxi"       # the size rule, new buffers, the exchange allocator, memory_stats
include "core/copies.pxi"          # copies between devices and layouts, fills
include "core/values.pxi"          # element values as Python objects, read in C
include "core/casts.pxi"           # casts between data types, by NumPy's rules
include "core/placement.pxi"       # copy=, stream=, alignment: where a Tensor goes
include "core/export.pxi"          # __dlpack__, to_dlpack: capsules out
include "core/consume.pxi"         # capsules and managed tensors in
include "core/shared.pxi"          # shared-memory Tensors and their handles
include "core/cuda_ipc.pxi"        # CUDA Tensors across processes
include "core/torch_bits.pxi"      # PyTorch's requires_grad and lazy conj/neg views
include "core/numpy_route.pxi"     # NumPy's C API, both ways
include "core/producers.pxi"       # what is known per producer type, cached
include "core/importer.pxi"        # from_dlpack, the exchange table consumer
include "core/numbers.pxi"         # NumPy scalars and 0-d arrays as numbers
include "core/encoding.pxi"        # values as elements of every data type
include "core/creation.pxi"        # empty, zeros, ones, full; dl.share
include "core/python_data.pxi"     # arange, Tensors from nested sequences
include "core/bridge.pxi"          # asarray over the array interfaces and the buffer protocol
include "core/exchange.pxi"        # dlinterop's own exchange table, published
include "core/exchange_tables.pxi" # exchange tables for NumPy's and other types' objects
include "core/exchange_publishing.pxi"  # dl.publish_exchange_api: a table on a type
include "core/pickling.pxi"        # pickling by value
include "core/views.pxi"           # views: transpose, squeeze, dtype views
include "core/reshape.pxi"         # reshape: a view where the strides allow
include "core/orders.pxi"          # copy(order=), flatten, ravel
include "core/indexing.pxi"        # t[key]: basic indexing
include "core/assignment.pxi"      # t[key] = value: broadcast, cast
include "core/conversions.pxi"     # __array__: NumPy arrays of every type NumPy holds
include "core/sanitizer.pxi"       # the lifetime sanitizer's switch and records
include "core/release.pxi"         # a dying Tensor's releases
include "core/buffer_export.pxi"   # the buffer protocol's export
include "core/tensor.pxi"          # the Tensor class itself
include "core/same_build.pxi"      # the same-build tier's version check
