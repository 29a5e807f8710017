"""dl.exchange_api_for's NumPy table called from C, beside what a C consumer does without
it: NumPy's __dlpack__(max_version=(1, 3)) called from C, the capsule read and released
(its deleter run). Per array: the table's non-owning view, the table's owning export (then
its deleter), and __dlpack__; each the median of interleaved repeats of a C loop, with its
ratio to __dlpack__ of the same run.

    python benchmarks/exchange_tables.py [--repeats N] [--number CALLS]

The loops are a small C extension, built once into the kernels' cache (kernels.py)."""

import argparse
import os
import statistics
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.kernels import EXT, _compiler_base, _key, _load, cache_dir  # noqa: E402

LOOPS_SOURCE = r"""
#include <Python.h>
#include "dlpack/dlpack.h"

static const DLPackExchangeAPI* api_of(PyObject* capsule) {
    return (const DLPackExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
}

/* n views through the table's dltensor_from_py_object_no_sync. */
static PyObject* view_loop(PyObject* self, PyObject* args) {
    PyObject *capsule, *obj;
    Py_ssize_t n, i;
    DLTensor view;
    int64_t sum = 0;
    if (!PyArg_ParseTuple(args, "OOn", &capsule, &obj, &n)) return NULL;
    const DLPackExchangeAPI* api = api_of(capsule);
    if (api == NULL) return NULL;
    for (i = 0; i < n; i++) {
        if (api->dltensor_from_py_object_no_sync(obj, &view) != 0) return NULL;
        sum += view.strides[view.ndim - 1];
    }
    return PyLong_FromLongLong(sum);
}

/* n owning exports through managed_tensor_from_py_object_no_sync, each deleted. */
static PyObject* owning_loop(PyObject* self, PyObject* args) {
    PyObject *capsule, *obj;
    Py_ssize_t n, i;
    DLManagedTensorVersioned* managed;
    int64_t sum = 0;
    if (!PyArg_ParseTuple(args, "OOn", &capsule, &obj, &n)) return NULL;
    const DLPackExchangeAPI* api = api_of(capsule);
    if (api == NULL) return NULL;
    for (i = 0; i < n; i++) {
        if (api->managed_tensor_from_py_object_no_sync(obj, &managed) != 0) return NULL;
        sum += managed->dl_tensor.strides[managed->dl_tensor.ndim - 1];
        managed->deleter(managed);
    }
    return PyLong_FromLongLong(sum);
}

/* n calls of obj.__dlpack__(max_version=(1, 3)), each capsule read and released. */
static PyObject* dlpack_loop(PyObject* self, PyObject* args) {
    PyObject *obj, *name, *kwnames, *version;
    Py_ssize_t n, i;
    int64_t sum = 0;
    if (!PyArg_ParseTuple(args, "On", &obj, &n)) return NULL;
    name = PyUnicode_InternFromString("__dlpack__");
    kwnames = Py_BuildValue("(s)", "max_version");
    version = Py_BuildValue("(ii)", 1, 3);
    if (name == NULL || kwnames == NULL || version == NULL) goto fail;
    for (i = 0; i < n; i++) {
        PyObject* call[2] = {obj, version};
        PyObject* capsule = PyObject_VectorcallMethod(name, call, 1, kwnames);
        if (capsule == NULL) goto fail;
        DLManagedTensorVersioned* managed =
            (DLManagedTensorVersioned*)PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (managed == NULL) { Py_DECREF(capsule); goto fail; }
        sum += managed->dl_tensor.ndim;
        Py_DECREF(capsule); /* unconsumed: its destructor runs the deleter */
    }
    Py_DECREF(name); Py_DECREF(kwnames); Py_DECREF(version);
    return PyLong_FromLongLong(sum);
fail:
    Py_XDECREF(name); Py_XDECREF(kwnames); Py_XDECREF(version);
    return NULL;
}

static PyMethodDef methods[] = {
    {"view_loop", view_loop, METH_VARARGS, NULL},
    {"owning_loop", owning_loop, METH_VARARGS, NULL},
    {"dlpack_loop", dlpack_loop, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "exchange_loops", NULL, -1, methods};

PyMODINIT_FUNC PyInit_exchange_loops(void) { return PyModule_Create(&module); }
"""


def build_loops():
    """The C loops' extension, built once per source, Python and dlinterop version."""
    import subprocess

    import dlinterop as dl

    key = _key(LOOPS_SOURCE.encode(), EXT, sys.version, dl.__version__)
    directory = os.path.join(cache_dir(), f"exchange-loops-{key}")
    target = os.path.join(directory, "exchange_loops" + EXT)
    if not os.path.isfile(target):
        os.makedirs(directory, exist_ok=True)
        c_file = os.path.join(directory, "exchange_loops.c")
        with open(c_file, "w") as f:
            f.write(LOOPS_SOURCE)
        include = [sysconfig.get_paths()["include"], dl.get_include()]
        command = _compiler_base() + ["-O2"] + [f"-I{path}" for path in include]
        subprocess.run(command + [c_file, "-o", target + ".tmp"], check=True)
        os.replace(target + ".tmp", target)
    return _load("exchange_loops", target)


def cases():
    import numpy as np

    yield "16 float32", np.arange(16, dtype=np.float32)
    yield "(64, 64) float32 [::2, ::-1]", np.ones((64, 64), np.float32)[::2, ::-1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--number", type=int, default=20000, help="calls per repeat")
    args = parser.parse_args(argv)
    import numpy as np

    import dlinterop as dl

    loops = build_loops()
    table = dl.exchange_api_for(np.ndarray)
    for title, array in cases():
        variants = {
            "view (table)": (loops.view_loop, table, array),
            "owning (table)": (loops.owning_loop, table, array),
            "__dlpack__": (loops.dlpack_loop, array),
        }
        samples = {name: [] for name in variants}
        for repeat in range(args.repeats):
            order = list(variants)[repeat % 3 :] + list(variants)[: repeat % 3]
            for name in order:
                loop, *loop_args = variants[name]
                start = time.perf_counter()
                loop(*loop_args, args.number)
                samples[name].append((time.perf_counter() - start) / args.number * 1e9)
        medians = {name: statistics.median(values) for name, values in samples.items()}
        print(title)
        for name, median in medians.items():
            ratio = median / medians["__dlpack__"]
            print(f"  {name:<15} {median:8.1f} ns  {ratio:6.2f}x __dlpack__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
