/* Every entry of dlinterop/abi.h called once, so that .ci/abi-header.sh compiles all of the
   header with the strictest warnings of gcc and clang, as C and as C++ (this file is both).
   Never run: a compile check only. */
#include <Python.h>

#include "dlpack/dlpack.h"
#include "dlinterop/abi.h"

int dlinterop_call_every_entry(PyObject* obj);

int dlinterop_call_every_entry(PyObject* obj) {
  DLTensor view;
  DLDataType dtype;
  DLDevice device;
  int readonly = 0;
  int64_t shape[1] = {3};
  DLInteropArgSpec spec = DLInterop_ArgSpec();
  PyObject *tensor, *keeper, *other, *error;
  DLTensor* dl;
  if (DLInterop_Import() < 0 || DLInterop_ABIMinor() < 0) return -1;
  if (DLInterop_IsTensor(obj) < 0) return -1;
  tensor = DLInterop_TensorFromObject(obj);
  if (tensor == NULL) return -1;
  dl = DLInterop_DLTensor(tensor);
  keeper = DLInterop_Borrow(obj, &view, &readonly);
  if (dl == NULL || keeper == NULL || DLInterop_CheckArg(&view, readonly, "x", &spec) < 0 ||
      DLInterop_ParseDType(obj, &dtype) < 0 || DLInterop_ParseDevice(obj, &device) < 0) {
    Py_DECREF(tensor);
    Py_XDECREF(keeper);
    return -1;
  }
  Py_XDECREF(DLInterop_ToCapsule(tensor, 1));
  Py_XDECREF(DLInterop_Empty(1, shape, dtype, device));
  Py_XDECREF(DLInterop_EmptyLike(obj, 1, shape, dtype, device));
  Py_XDECREF(DLInterop_ZerosLike(obj, 1, shape, dtype, device));
  Py_XDECREF(DLInterop_ToFramework(tensor, obj));
  Py_XDECREF(DLInterop_DTypeObject(dtype));
  Py_XDECREF(DLInterop_DeviceObject(device));
  Py_XDECREF(DLInterop_TensorFromManaged(NULL, 0));
  error = DLInterop_CopyError();
  Py_XDECREF(error);
#if DLINTEROP_TARGET_MINOR >= 1 || defined(DLINTEROP_ALLOW_NEWER_ENTRIES)
  {
    uint64_t flags = 0;
    other = DLInterop_FromDLPack(obj, &device, -1);
    Py_XDECREF(other);
    if (DLInterop_TensorFlags(tensor, &flags) < 0) PyErr_Clear();
    if (DLInterop_ExchangeAPIFor(Py_TYPE(obj)) == NULL) PyErr_Clear();
  }
#else
  other = NULL;
  (void)other;
#endif
  Py_DECREF(keeper);
  Py_DECREF(tensor);
  return 0;
}
