/* The native half of dlinterop's exchange table for torch.Tensor objects
 * (dl.exchange_api_for(torch.Tensor), dlinterop/framework_parts/exchange_torch.pxi): a
 * tensor read through PyTorch's stable C shim (the AOTInductor functions libtorch exports,
 * torch/csrc/inductor/aoti_torch/c/shim.h), handed the at::Tensor the Python object holds.
 * No Python call and, for the view, no allocation.
 *
 * Every function pointer and fact here is found and checked against PyTorch's own answers on
 * probe tensors before the table is made (exchange_torch.pxi); until then, and wherever a
 * check failed, `ready` is 0 and every object takes the Python-side route.
 */
#ifndef DLINTEROP_TORCH_TABLE_H_
#define DLINTEROP_TORCH_TABLE_H_

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include "dlpack/dlpack.h"

/* The shim's functions used here; each returns 0 on success (AOTI_TORCH_SUCCESS). */
typedef int32_t (*dli_aoti_ptr_fn)(void* tensor, void** out);
typedef int32_t (*dli_aoti_i64_fn)(void* tensor, int64_t* out);
typedef int32_t (*dli_aoti_i64s_fn)(void* tensor, int64_t** out);
typedef int32_t (*dli_aoti_i32_fn)(void* tensor, int32_t* out);
/* at::native::is_neg / is_conj (handed the at::Tensor), c10::TensorImpl::requires_grad
 * (handed its TensorImpl): dlinterop/core/torch_bits.pxi finds and checks them. */
typedef bool (*dli_torch_flag_fn)(const void* tensor);

/* Scalar type numbers (c10::ScalarType) the table has room for. */
#define DLI_TORCH_SCALAR_TYPES 64

typedef struct {
  int ready;              /* 1 once everything below is set and checked */
  PyTypeObject* types[2]; /* read natively: torch.Tensor, torch.nn.Parameter */
  Py_ssize_t offset;      /* of the at::Tensor inside those objects */
  dli_torch_flag_fn is_neg, is_conj, requires_grad;
  dli_aoti_ptr_fn data_ptr;
  dli_aoti_i64_fn dim;
  dli_aoti_i64s_fn sizes, strides;
  dli_aoti_i32_fn dtype, device_type, device_index, layout;
  /* The core's owning-export block (dlinterop/_core.pxd: owned_export_block): it holds a
   * reference to the Python object, and its deleter releases it. */
  DLManagedTensorVersioned* (*owned_block)(PyObject* owner, int ndim);
  int32_t layout_strided, device_cpu, device_cuda;
  DLDeviceType cuda_kind; /* kDLCUDA, or kDLROCM on a ROCm build of PyTorch */
  /* DLPack's type of each scalar type as PyTorch exports it; bits 0 where PyTorch's own
   * export decides (refuses, or describes otherwise). */
  DLDataType dtypes[DLI_TORCH_SCALAR_TYPES];
} dli_torch_native;

/* Filled by exchange_torch.pxi, once, before the table is handed out. */
extern dli_torch_native dli_torch;

/* What the native route leaves to the Python side, given as `status`:
 * -1: not an object of a type read natively (another type, or a subclass);
 *  1: a tensor PyTorch's export refuses for its flags (requires grad, a lazily conjugated
 *     or negated view): the Python side raises;
 *  2: a layout, dtype or device the native route does not describe (sparse, quantized,
 *     meta, ...): PyTorch's own table decides;
 *  3: a shim function failed (it has printed why): the Python side raises. */
typedef int (*dli_torch_view_otherwise_fn)(PyObject* obj, DLTensor* out, int status);
typedef int (*dli_torch_owned_otherwise_fn)(PyObject* obj, DLManagedTensorVersioned** out,
                                            int status);
void dli_torch_set_otherwise(dli_torch_view_otherwise_fn view, dli_torch_owned_otherwise_fn owned);

/* The table's dltensor_from_py_object_no_sync: a non-owning view of `obj` whose shape and
 * strides point into the tensor's own (valid while it lives and keeps its shape). */
int dli_torch_exchange_view(void* obj, DLTensor* out);
/* The table's managed_tensor_from_py_object_no_sync: an owning tensor holding a reference
 * to the Python object (so to the at::Tensor it holds), in one block with its shape and
 * strides. */
int dli_torch_exchange_owned(void* obj, DLManagedTensorVersioned** out);

/* 1 when PyTorch's own managed_tensor_to_py_object_no_sync may be handed `m`: a device
 * the native route reads (CPU, CUDA or ROCm) and a dtype PyTorch exports. PyTorch's own
 * refuses other devices without running the deleter (the exchange API says it steals the
 * tensor either way), so those take a route that does. */
int dli_torch_takes(const DLManagedTensorVersioned* m);

#endif /* DLINTEROP_TORCH_TABLE_H_ */
