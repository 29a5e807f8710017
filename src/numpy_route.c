/* The native import route for exact numpy.ndarray objects: the array read through NumPy's
 * public C API, with no Python call, as NumPy's own __dlpack__ would describe it.
 *
 * Built against NumPy's headers when the build finds them (DLI_HAVE_NUMPY); otherwise every
 * function reports the route as absent. NumPy's C API is imported lazily, by dli_numpy_init,
 * which the core calls only once `numpy` is in sys.modules: dlinterop never imports NumPy.
 */
#include "numpy_route.h"

#ifdef DLI_HAVE_NUMPY

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>

int dli_numpy_built(void) { return 1; }

int dli_numpy_init(void)
{
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    return 0;
}

/* DLPack's code for the builtin NumPy types whose __dlpack__ export is unconditional;
 * -1 for the rest (long double, user types such as ml_dtypes', structured, object, ...),
 * which take the __dlpack__ route and so get exactly NumPy's answer. */
static int dl_code_of(int type_num)
{
    switch (type_num) {
    case NPY_BOOL:
        return kDLBool;
    case NPY_BYTE: case NPY_SHORT: case NPY_INT: case NPY_LONG: case NPY_LONGLONG:
        return kDLInt;
    case NPY_UBYTE: case NPY_USHORT: case NPY_UINT: case NPY_ULONG: case NPY_ULONGLONG:
        return kDLUInt;
    case NPY_HALF: case NPY_FLOAT: case NPY_DOUBLE:
        return kDLFloat;
    case NPY_CFLOAT: case NPY_CDOUBLE:
        return kDLComplex;
    default:
        return -1;
    }
}

int dli_numpy_view(PyObject *obj, DLTensor *out, int64_t *storage, int max_ndim,
                   int *readonly)
{
    PyArrayObject *array = (PyArrayObject *)obj;
    PyArray_Descr *descr = PyArray_DESCR(array);
    PyObject *base;
    npy_intp itemsize, *shape, *strides;
    int ndim = PyArray_NDIM(array);
    int code = dl_code_of(descr->type_num);
    int i;

    if (code < 0 || ndim > max_ndim || PyDataType_ISBYTESWAPPED(descr)) {
        return 1;   /* NumPy's own export decides (and raises its own error) */
    }
    /* An array made by np.from_dlpack reports its capsule's device: leave it to NumPy. */
    base = PyArray_BASE(array);
    while (base != NULL && PyArray_Check(base)) {
        base = PyArray_BASE((PyArrayObject *)base);
    }
    if (base != NULL && PyCapsule_CheckExact(base)) {
        return 1;
    }
    itemsize = PyArray_ITEMSIZE(array);
    shape = PyArray_SHAPE(array);
    strides = PyArray_STRIDES(array);
    if (!PyArray_IS_C_CONTIGUOUS(array) && PyArray_SIZE(array) != 1) {
        for (i = 0; i < ndim; i++) {
            if (shape[i] != 1 && strides[i] % itemsize != 0) {
                return 1;   /* NumPy refuses these strides with its BufferError */
            }
        }
    }
    out->data = PyArray_DATA(array);
    out->device.device_type = kDLCPU;
    out->device.device_id = 0;
    out->ndim = ndim;
    out->dtype.code = (uint8_t)code;
    out->dtype.bits = (uint8_t)(8 * itemsize);
    out->dtype.lanes = 1;
    out->byte_offset = 0;
    out->shape = ndim > 0 ? storage : NULL;
    out->strides = ndim > 0 ? storage + ndim : NULL;
    for (i = 0; i < ndim; i++) {
        storage[i] = shape[i];
        storage[ndim + i] = strides[i] / itemsize;   /* as NumPy divides: toward zero */
    }
    *readonly = !PyArray_CHKFLAGS(array, NPY_ARRAY_WRITEABLE);
    return 0;
}

#else   /* built without NumPy's headers: the route is absent */

int dli_numpy_built(void) { return 0; }

int dli_numpy_init(void)
{
    PyErr_SetString(PyExc_ImportError, "dlinterop was built without NumPy's headers");
    return -1;
}

int dli_numpy_view(PyObject *obj, DLTensor *out, int64_t *storage, int max_ndim,
                   int *readonly)
{
    (void)obj; (void)out; (void)storage; (void)max_ndim; (void)readonly;
    return 1;
}

#endif
