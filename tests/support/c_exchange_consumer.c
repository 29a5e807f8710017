/*
 * A C consumer of the DLPack 1.3 exchange API, built on the fly by tests/exchange_api/conftest.py
 * against dl.get_include(). It does what a compiled framework does: looks the table up on
 * the producer's type (never the instance) and calls its functions directly.
 *
 * Every function that gets -1 from the table checks that an exception was set, as the
 * exchange API requires; a silent failure becomes a SystemError naming the function.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>

static const char* API_NAME = "dlpack_exchange_api";

/* The table of type(owner); NULL with an exception set when there is none. The capsule may
 * be dropped: a published table lives as long as the process. */
static const DLPackExchangeAPI* api_of(PyObject* owner) {
  PyObject* capsule = PyObject_GetAttrString((PyObject*)Py_TYPE(owner),
                                             "__dlpack_c_exchange_api__");
  if (capsule == NULL) return NULL;
  const DLPackExchangeAPI* api = PyCapsule_GetPointer(capsule, API_NAME);
  Py_DECREF(capsule);
  return api;
}

static int failed(int rc, const char* function) {
  if (rc == 0) return 0;
  if (!PyErr_Occurred())
    PyErr_Format(PyExc_SystemError, "%s returned %d without setting an exception", function, rc);
  return -1;
}

/* The table's import: a new object owning `managed`, which it steals whatever the outcome. */
static PyObject* import_managed(const DLPackExchangeAPI* api, DLManagedTensorVersioned* managed) {
  void* out = NULL;
  if (failed(api->managed_tensor_to_py_object_no_sync(managed, &out),
             "managed_tensor_to_py_object_no_sync"))
    return NULL;
  return (PyObject*)out;
}

static PyObject* tuple_of(const int64_t* values, int n) {
  if (values == NULL) Py_RETURN_NONE;
  PyObject* t = PyTuple_New(n);
  if (t == NULL) return NULL;
  for (int i = 0; i < n; ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (v == NULL) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

/* header(owner) -> (major, minor, prev_api is NULL, all five functions set) */
static PyObject* header(PyObject* self, PyObject* owner) {
  const DLPackExchangeAPI* api = api_of(owner);
  if (api == NULL) return NULL;
  int all_set = api->managed_tensor_allocator && api->managed_tensor_from_py_object_no_sync &&
                api->managed_tensor_to_py_object_no_sync &&
                api->dltensor_from_py_object_no_sync && api->current_work_stream;
  return Py_BuildValue("(IIOO)", api->header.version.major, api->header.version.minor,
                       api->header.prev_api == NULL ? Py_True : Py_False,
                       all_set ? Py_True : Py_False);
}

/* round_trip(obj, table_from=obj): owning export then import; a new object sharing memory. */
static PyObject* round_trip(PyObject* self, PyObject* args) {
  PyObject *obj, *owner = NULL;
  if (!PyArg_ParseTuple(args, "O|O", &obj, &owner)) return NULL;
  const DLPackExchangeAPI* api = api_of(owner ? owner : obj);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned* managed = NULL;
  if (failed(api->managed_tensor_from_py_object_no_sync(obj, &managed),
             "managed_tensor_from_py_object_no_sync"))
    return NULL;
  return import_managed(api, managed);
}

/* export_info(obj): (version, flags, data, byte_offset) of the owning export; deleted after. */
static PyObject* export_info(PyObject* self, PyObject* obj) {
  const DLPackExchangeAPI* api = api_of(obj);
  if (api == NULL) return NULL;
  DLManagedTensorVersioned* managed = NULL;
  if (failed(api->managed_tensor_from_py_object_no_sync(obj, &managed),
             "managed_tensor_from_py_object_no_sync"))
    return NULL;
  PyObject* info = Py_BuildValue(
      "((II)KKK)", managed->version.major, managed->version.minor,
      (unsigned long long)managed->flags, (unsigned long long)(uintptr_t)managed->dl_tensor.data,
      (unsigned long long)managed->dl_tensor.byte_offset);
  if (managed->deleter) managed->deleter(managed);
  return info;
}

typedef struct {
  int calls;
} ErrorContext;

/* Raises the exception the allocator names; an unknown name becomes RuntimeError. */
static void set_error(void* error_ctx, const char* kind, const char* message) {
  ((ErrorContext*)error_ctx)->calls += 1;
  PyObject* exc = PyDict_GetItemString(PyEval_GetBuiltins(), kind);
  if (exc != NULL && PyExceptionClass_Check(exc))
    PyErr_SetString(exc, message);
  else
    PyErr_Format(PyExc_RuntimeError, "%s: %s", kind, message);
}

/* allocate(owner, shape, (code, bits, lanes), (device_type, device_id)) -> a new object made
 * by the table's own import from what its allocator returned. */
static PyObject* allocate(PyObject* self, PyObject* args) {
  PyObject *owner, *shape_obj;
  unsigned int code, bits, lanes;
  int device_type, device_id;
  if (!PyArg_ParseTuple(args, "OO(III)(ii)", &owner, &shape_obj, &code, &bits, &lanes,
                        &device_type, &device_id))
    return NULL;
  const DLPackExchangeAPI* api = api_of(owner);
  if (api == NULL) return NULL;
  PyObject* seq = PySequence_Fast(shape_obj, "shape must be a sequence");
  if (seq == NULL) return NULL;
  Py_ssize_t ndim = PySequence_Fast_GET_SIZE(seq);
  int64_t shape[128];
  if (ndim > 128) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "at most 128 dimensions in this test helper");
    return NULL;
  }
  for (Py_ssize_t i = 0; i < ndim; ++i) {
    shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (shape[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return NULL;
    }
  }
  Py_DECREF(seq);
  DLTensor prototype = {0};
  prototype.device.device_type = (DLDeviceType)device_type;
  prototype.device.device_id = device_id;
  prototype.ndim = (int32_t)ndim;
  prototype.dtype.code = (uint8_t)code;
  prototype.dtype.bits = (uint8_t)bits;
  prototype.dtype.lanes = (uint16_t)lanes;
  prototype.shape = ndim ? shape : NULL;
  DLManagedTensorVersioned* managed = NULL;
  ErrorContext ctx = {0};
  int rc = api->managed_tensor_allocator(&prototype, &managed, &ctx, set_error);
  if (rc != 0) {
    if (ctx.calls != 1 && !PyErr_Occurred())
      PyErr_Format(PyExc_SystemError, "allocator returned %d and called SetError %d times",
                   rc, ctx.calls);
    return NULL;
  }
  return import_managed(api, managed);
}

/* view(obj, table_from=obj) -> dict describing the non-owning DLTensor. */
static PyObject* view(PyObject* self, PyObject* args) {
  PyObject *obj, *owner = NULL;
  if (!PyArg_ParseTuple(args, "O|O", &obj, &owner)) return NULL;
  const DLPackExchangeAPI* api = api_of(owner ? owner : obj);
  if (api == NULL) return NULL;
  DLTensor out;
  memset(&out, 0xAB, sizeof(out));
  if (failed(api->dltensor_from_py_object_no_sync(obj, &out), "dltensor_from_py_object_no_sync"))
    return NULL;
  PyObject* shape = tuple_of(out.shape, out.ndim);
  PyObject* strides = shape ? tuple_of(out.strides, out.ndim) : NULL;
  PyObject* result = NULL;
  if (strides != NULL)
    result = Py_BuildValue("{s:K,s:(ii),s:i,s:(III),s:O,s:O,s:K}",
                           "data", (unsigned long long)(uintptr_t)out.data,
                           "device", (int)out.device.device_type, (int)out.device.device_id,
                           "ndim", (int)out.ndim,
                           "dtype", (unsigned)out.dtype.code, (unsigned)out.dtype.bits,
                           (unsigned)out.dtype.lanes,
                           "shape", shape, "strides", strides,
                           "byte_offset", (unsigned long long)out.byte_offset);
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return result;
}

/* current_stream(owner, device_type, device_id) -> the stream as an int (0 for NULL). */
static PyObject* current_stream(PyObject* self, PyObject* args) {
  PyObject* owner;
  int device_type, device_id;
  if (!PyArg_ParseTuple(args, "Oii", &owner, &device_type, &device_id)) return NULL;
  const DLPackExchangeAPI* api = api_of(owner);
  if (api == NULL) return NULL;
  void* stream = (void*)1;
  if (failed(api->current_work_stream((DLDeviceType)device_type, device_id, &stream),
             "current_work_stream"))
    return NULL;
  return PyLong_FromVoidPtr(stream);
}

/* Two producer tables for the consumer's error path: one raises, one fails silently. */
static int raising_from_py(void* py_object, DLManagedTensorVersioned** out) {
  PyErr_SetString(PyExc_KeyError, "c producer refused this object");
  return -1;
}

static int silent_from_py(void* py_object, DLManagedTensorVersioned** out) { return -1; }

static DLPackExchangeAPI raising_api = {{{1, 3}, NULL}, NULL, raising_from_py, NULL, NULL, NULL};
static DLPackExchangeAPI silent_api = {{{1, 3}, NULL}, NULL, silent_from_py, NULL, NULL, NULL};

static PyObject* raising_table(PyObject* self, PyObject* unused) {
  return PyCapsule_New(&raising_api, API_NAME, NULL);
}

static PyObject* silent_table(PyObject* self, PyObject* unused) {
  return PyCapsule_New(&silent_api, API_NAME, NULL);
}

static PyMethodDef methods[] = {
    {"header", header, METH_O, NULL},
    {"round_trip", round_trip, METH_VARARGS, NULL},
    {"export_info", export_info, METH_O, NULL},
    {"allocate", allocate, METH_VARARGS, NULL},
    {"view", view, METH_VARARGS, NULL},
    {"current_stream", current_stream, METH_VARARGS, NULL},
    {"raising_table", raising_table, METH_NOARGS, NULL},
    {"silent_table", silent_table, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "c_exchange_consumer", NULL, -1,
                                    methods};

PyMODINIT_FUNC PyInit_c_exchange_consumer(void) { return PyModule_Create(&module); }
