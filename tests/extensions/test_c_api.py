"""The C API for plain C extensions: the stable ABI's header, dlinterop/abi.h, installed under
dl.get_include() (the one C door: the older dlinterop/_capi_api.h is gone). A small C
extension, compiled here once per session with the full C API, includes it and calls the
table's entries the way a C consumer does: tensors in and out, managed tensors, new
tensors, capsules."""

import gc
import importlib.util
import os
import subprocess
import sysconfig

import numpy as np
import pytest

import dlinterop as dl

C_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include <dlpack/dlpack.h>
#include <dlinterop/abi.h>

static long deleter_calls = 0;

static void free_block(DLManagedTensorVersioned *managed) {
    free(managed);
    deleter_calls++;   /* dlinterop runs the deleter from the Tensor's dealloc, GIL held */
}

static int is_float32_cpu(const DLTensor *t) {
    return t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1
        && t->device.device_type == kDLCPU;
}

/* Sum of a float32 CPU tensor of any strides (dlinterop always fills strides). */
static double sum_strided(const float *first, int ndim, const int64_t *shape,
                          const int64_t *strides) {
    int64_t index[64] = {0};
    int64_t offset = 0;
    double total = 0.0;
    int d;
    if (ndim == 0) return first[0];
    for (d = 0; d < ndim; d++)
        if (shape[d] == 0) return 0.0;
    for (;;) {
        for (int64_t i = 0; i < shape[ndim - 1]; i++)
            total += first[offset + i * strides[ndim - 1]];
        for (d = ndim - 2; d >= 0; d--) {
            offset += strides[d];
            if (++index[d] < shape[d]) break;
            offset -= strides[d] * shape[d];
            index[d] = 0;
        }
        if (d < 0) return total;
    }
}

static PyObject *sum_float32(PyObject *self, PyObject *obj) {
    PyObject *tensor = DLInterop_TensorFromObject(obj);
    DLTensor *t;
    double total;
    if (tensor == NULL) return NULL;
    t = DLInterop_DLTensor(tensor);
    if (t == NULL) goto fail;
    if (!is_float32_cpu(t)) {
        PyErr_SetString(PyExc_TypeError, "sum_float32 needs a float32 CPU tensor");
        goto fail;
    }
    Py_BEGIN_ALLOW_THREADS
    total = sum_strided((const float *)((const char *)t->data + t->byte_offset), t->ndim,
                        t->shape, t->strides);
    Py_END_ALLOW_THREADS
    Py_DECREF(tensor);
    return PyFloat_FromDouble(total);
fail:
    Py_DECREF(tensor);
    return NULL;
}

static PyObject *describe(PyObject *self, PyObject *tensor) {
    DLTensor *t = DLInterop_DLTensor(tensor);
    PyObject *shape, *strides;
    if (t == NULL) return NULL;
    shape = PyTuple_New(t->ndim);
    strides = PyTuple_New(t->ndim);
    if (shape == NULL || strides == NULL) goto fail;
    for (int i = 0; i < t->ndim; i++) {
        PyObject *extent = PyLong_FromLongLong(t->shape[i]);
        PyObject *step = PyLong_FromLongLong(t->strides[i]);
        if (extent == NULL || step == NULL) {
            Py_XDECREF(extent);
            Py_XDECREF(step);
            goto fail;
        }
        PyTuple_SET_ITEM(shape, i, extent);
        PyTuple_SET_ITEM(strides, i, step);
    }
    return Py_BuildValue("(iNNK(iii)(ii))", t->ndim, shape, strides,
                         (unsigned long long)((uintptr_t)t->data + t->byte_offset),
                         t->dtype.code, t->dtype.bits, t->dtype.lanes,
                         (int)t->device.device_type, (int)t->device.device_id);
fail:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
}

/* arange(n, readonly, major): a float32 [0..n) Tensor over one malloc'd block. */
static PyObject *arange(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    int readonly, major;
    size_t header = sizeof(DLManagedTensorVersioned) + sizeof(int64_t);
    DLManagedTensorVersioned *m;
    float *data;
    if (!PyArg_ParseTuple(args, "npi", &n, &readonly, &major)) return NULL;
    m = (DLManagedTensorVersioned *)malloc(header + (size_t)n * sizeof(float));
    if (m == NULL) return PyErr_NoMemory();
    data = (float *)((char *)m + header);
    for (Py_ssize_t i = 0; i < n; i++) data[i] = (float)i;
    *(int64_t *)(m + 1) = n;
    m->version.major = (uint32_t)major;
    m->version.minor = DLPACK_MINOR_VERSION;
    m->manager_ctx = NULL;
    m->deleter = free_block;
    m->flags = 0;
    m->dl_tensor.data = data;
    m->dl_tensor.device.device_type = kDLCPU;
    m->dl_tensor.device.device_id = 0;
    m->dl_tensor.ndim = 1;
    m->dl_tensor.dtype.code = kDLFloat;
    m->dl_tensor.dtype.bits = 32;
    m->dl_tensor.dtype.lanes = 1;
    m->dl_tensor.shape = (int64_t *)(m + 1);
    m->dl_tensor.strides = NULL;
    m->dl_tensor.byte_offset = 0;
    return DLInterop_TensorFromManaged(m, readonly);   /* owns m, even on failure */
}

static PyObject *empty(PyObject *self, PyObject *args) {
    int64_t shape[2];
    DLDataType float32 = {kDLFloat, 32, 1};
    DLDevice cpu = {kDLCPU, 0};
    if (!PyArg_ParseTuple(args, "LL", &shape[0], &shape[1])) return NULL;
    return DLInterop_Empty(2, shape, float32, cpu);
}

/* empty_any(ndim, null_shape, device_type, code, bits): anything a C caller can pass. */
static PyObject *empty_any(PyObject *self, PyObject *args) {
    int64_t shape[4] = {2, 2, 2, 2};
    int ndim, null_shape, device_type, code, bits;
    if (!PyArg_ParseTuple(args, "ipiii", &ndim, &null_shape, &device_type, &code, &bits))
        return NULL;
    DLDataType dtype = {(uint8_t)code, (uint8_t)bits, 1};
    DLDevice device = {(DLDeviceType)device_type, 0};
    return DLInterop_Empty(ndim, null_shape ? NULL : shape, dtype, device);
}

static PyObject *capsule(PyObject *self, PyObject *args) {
    PyObject *tensor;
    int versioned;
    if (!PyArg_ParseTuple(args, "Op", &tensor, &versioned)) return NULL;
    return DLInterop_ToCapsule(tensor, versioned);
}

static PyObject *is_tensor(PyObject *self, PyObject *obj) {
    int found = DLInterop_IsTensor(obj);
    return found < 0 ? NULL : PyBool_FromLong(found);
}

static PyObject *get_deleter_calls(PyObject *self, PyObject *unused) {
    return PyLong_FromLong(deleter_calls);
}

static PyMethodDef methods[] = {
    {"sum_float32", sum_float32, METH_O, NULL},
    {"describe", describe, METH_O, NULL},
    {"arange", arange, METH_VARARGS, NULL},
    {"empty", empty, METH_VARARGS, NULL},
    {"empty_any", empty_any, METH_VARARGS, NULL},
    {"capsule", capsule, METH_VARARGS, NULL},
    {"is_tensor", is_tensor, METH_O, NULL},
    {"deleter_calls", get_deleter_calls, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dl_c_consumer", NULL, -1, methods};

PyMODINIT_FUNC PyInit_dl_c_consumer(void) {
    if (DLInterop_Import() < 0) return NULL;
    return PyModule_Create(&module);
}
"""


@pytest.fixture(scope="session")
def c_consumer(tmp_path_factory):
    directory = tmp_path_factory.mktemp("c_consumer")
    source = directory / "dl_c_consumer.c"
    source.write_text(C_SOURCE)
    out = str(directory / ("dl_c_consumer" + sysconfig.get_config_var("EXT_SUFFIX")))
    flags = [sysconfig.get_config_var(v) or "" for v in ("LDSHARED", "CFLAGS", "CCSHARED")]
    result = subprocess.run(
        " ".join(flags).split()
        + [
            "-std=c11",
            "-Werror",
            "-I",
            sysconfig.get_paths()["include"],
            "-I",
            dl.get_include(),
            str(source),
            "-o",
            out,
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"compiling the C consumer failed:\n{result.stderr}")
    spec = importlib.util.spec_from_file_location("dl_c_consumer", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_one_c_header_is_abi_h():
    """dlinterop/abi.h is the C door; the older Cython-generated _capi_api.h is retired, and
    dlinterop._capi exports no `cdef api` functions any more."""
    assert os.path.isfile(os.path.join(dl.get_include(), "dlinterop", "abi.h"))
    assert not os.path.exists(os.path.join(dl.get_include(), "dlinterop", "_capi_api.h"))
    from dlinterop import _capi

    assert not hasattr(_capi, "__pyx_capi__") or not [
        name for name in _capi.__pyx_capi__ if name.startswith("dlinterop_")
    ]


VIEWS = {
    "contiguous": lambda a: a,
    "sliced": lambda a: a[:, 1::2],
    "negative": lambda a: a[::-1, ::-3],
    "transposed": lambda a: a.T,
    "empty": lambda a: a[:0],
    "0-d": lambda a: a[1, 2, ...],
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_sum_float32_of_numpy_views(c_consumer, view):
    a = VIEWS[view](np.arange(30, dtype=np.float32).reshape(5, 6) - 7)
    assert c_consumer.sum_float32(a) == pytest.approx(float(np.sum(a, dtype=np.float64)))


def test_sum_float32_errors_propagate(c_consumer):
    with pytest.raises(TypeError, match="float32"):
        c_consumer.sum_float32(np.arange(3))
    with pytest.raises(TypeError):
        c_consumer.sum_float32(object())


def test_describe_matches_python_attributes(c_consumer):
    t = dl.from_dlpack(np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::-1, 1:])
    ndim, shape, strides, address, dtype, device = c_consumer.describe(t)
    assert (ndim, shape, strides, address) == (t.ndim, t.shape, t.strides, t.data_ptr)
    assert dtype == (0, 16, 1) and device == (1, 0)


@pytest.mark.parametrize("obj", [None, 3, np.zeros(2)])
def test_dltensor_rejects_non_tensors(c_consumer, obj):
    assert not c_consumer.is_tensor(obj)
    with pytest.raises(TypeError, match="dlinterop Tensor"):
        c_consumer.describe(obj)


@pytest.mark.parametrize("readonly", [False, True])
def test_tensor_from_managed(c_consumer, readonly):
    before = c_consumer.deleter_calls()
    t = c_consumer.arange(4, readonly, 1)
    assert c_consumer.is_tensor(t)
    assert t.readonly is readonly and t.shape == (4,) and t.dtype == dl.float32
    assert np.from_dlpack(t).tolist() == [0, 1, 2, 3]
    del t
    gc.collect()
    assert c_consumer.deleter_calls() == before + 1


def test_tensor_from_managed_failure_runs_the_deleter_once(c_consumer):
    before = c_consumer.deleter_calls()
    with pytest.raises(BufferError, match="major version"):
        c_consumer.arange(4, False, 2)
    gc.collect()
    assert c_consumer.deleter_calls() == before + 1


def test_empty_tensor(c_consumer):
    t = c_consumer.empty(3, 5)
    assert t.shape == (3, 5) and t.dtype == dl.float32 and t.data_ptr % 256 == 0
    with pytest.raises(ValueError, match="negative"):
        c_consumer.empty(-1, 2)


def test_empty_tensor_null_shape_is_value_error(c_consumer):
    # Was a segfault: the NULL shape was read.
    with pytest.raises(ValueError, match="NULL shape"):
        c_consumer.empty_any(1, True, 1, 2, 32)
    assert c_consumer.empty_any(0, True, 1, 2, 32).shape == ()


@pytest.mark.parametrize("device_type", [0, 5, 99, -1])
def test_empty_tensor_unknown_device_is_buffer_error_naming_it(c_consumer, device_type):
    # Was an IndexError raised while the error message was being formatted.
    with pytest.raises(BufferError, match=f"unknown device type {device_type}"):
        c_consumer.empty_any(2, False, device_type, 2, 32)


@pytest.mark.parametrize("code,bits", [(2, 0), (2, 7), (99, 8), (0, 0)])
def test_empty_tensor_bad_dtype_is_value_error(c_consumer, code, bits):
    with pytest.raises(ValueError, match="unsupported data type"):
        c_consumer.empty_any(2, False, 1, code, bits)


@pytest.mark.parametrize("versioned,name", [(True, "dltensor_versioned"), (False, "dltensor")])
def test_to_capsule(c_consumer, versioned, name):
    t = dl.full((2, 2), 3.0)
    c = c_consumer.capsule(t, versioned)
    assert f'"{name}"' in repr(c)
    assert dl.from_dlpack(c).data_ptr == t.data_ptr
    with pytest.raises(TypeError, match="dlinterop Tensor"):
        c_consumer.capsule(None, versioned)
