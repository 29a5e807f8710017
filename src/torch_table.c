/* The native half of the exchange table for torch.Tensor objects: see torch_table.h. */
#include "torch_table.h"

dli_torch_native dli_torch;

static dli_torch_view_otherwise_fn view_otherwise;
static dli_torch_owned_otherwise_fn owned_otherwise;

void dli_torch_set_otherwise(dli_torch_view_otherwise_fn view, dli_torch_owned_otherwise_fn owned) {
  view_otherwise = view;
  owned_otherwise = owned;
}

/* Fills `out` from the tensor `obj` holds, shape and strides pointing into its own; 0, or
 * the status the Python side takes over with (torch_table.h). */
static inline __attribute__((always_inline)) int read_tensor(PyObject* obj, DLTensor* out) {
  PyTypeObject* type = Py_TYPE(obj);
  void* tensor;
  int64_t ndim;
  int32_t layout, scalar_type, device_type, device_index;
  DLDataType dt;
  if (!dli_torch.ready || (type != dli_torch.types[0] && type != dli_torch.types[1])) {
    return -1;
  }
  tensor = (char*)obj + dli_torch.offset;
  /* The at::Tensor's one field is its TensorImpl pointer. */
  if (dli_torch.requires_grad(*(void**)tensor) || dli_torch.is_neg(tensor) ||
      dli_torch.is_conj(tensor)) {
    return 1;
  }
  if (dli_torch.layout(tensor, &layout) != 0 || dli_torch.dtype(tensor, &scalar_type) != 0 ||
      dli_torch.device_type(tensor, &device_type) != 0) {
    return 3;
  }
  if (layout != dli_torch.layout_strided || scalar_type < 0 ||
      scalar_type >= DLI_TORCH_SCALAR_TYPES) {
    return 2;
  }
  dt = dli_torch.dtypes[scalar_type];
  if (dt.bits == 0) {
    return 2;
  }
  if (device_type == dli_torch.device_cpu) {
    out->device.device_type = kDLCPU;
    out->device.device_id = 0;
  } else if (device_type == dli_torch.device_cuda) {
    if (dli_torch.device_index(tensor, &device_index) != 0) {
      return 3;
    }
    out->device.device_type = dli_torch.cuda_kind;
    out->device.device_id = device_index;
  } else {
    return 2;
  }
  if (dli_torch.data_ptr(tensor, &out->data) != 0 || dli_torch.dim(tensor, &ndim) != 0 ||
      dli_torch.sizes(tensor, &out->shape) != 0 || dli_torch.strides(tensor, &out->strides) != 0) {
    return 3;
  }
  out->ndim = (int32_t)ndim;
  out->dtype = dt;
  out->byte_offset = 0;
  return 0;
}

int dli_torch_exchange_view(void* obj, DLTensor* out) {
  int status = read_tensor((PyObject*)obj, out);
  return status == 0 ? 0 : view_otherwise((PyObject*)obj, out, status);
}

int dli_torch_exchange_owned(void* obj, DLManagedTensorVersioned** out) {
  DLTensor view;
  DLManagedTensorVersioned* m;
  int64_t* layout;
  int32_t i;
  int status = read_tensor((PyObject*)obj, &view);
  if (status != 0) {
    return owned_otherwise((PyObject*)obj, out, status);
  }
  m = dli_torch.owned_block((PyObject*)obj, view.ndim);
  if (m == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  layout = (int64_t*)(m + 1);
  for (i = 0; i < view.ndim; i++) { /* a few values: a loop beats memcpy's call */
    layout[i] = view.shape[i];
    layout[view.ndim + i] = view.strides[i];
  }
  m->dl_tensor = view;
  m->dl_tensor.shape = layout;
  m->dl_tensor.strides = layout + view.ndim;
  *out = m; /* flags 0: PyTorch's tensors are writable */
  return 0;
}

int dli_torch_takes(const DLManagedTensorVersioned* m) {
  DLDataType dt = m->dl_tensor.dtype;
  DLDeviceType device = m->dl_tensor.device.device_type;
  int i;
  if (device != kDLCPU && device != dli_torch.cuda_kind) {
    return 0;
  }
  for (i = 0; i < DLI_TORCH_SCALAR_TYPES; i++) {
    if (dli_torch.dtypes[i].bits != 0 && dli_torch.dtypes[i].code == dt.code &&
        dli_torch.dtypes[i].bits == dt.bits && dli_torch.dtypes[i].lanes == dt.lanes) {
      return 1;
    }
  }
  return 0;
}
