# The stable public Cython API of dlinterop (docs/cython.md). Downstream extensions write
#     from dlinterop.tensor cimport Tensor, tensor_from_object, to_capsule, ...
# The definitions live in dlinterop/_core.pxd; this file only names what is public.
from dlinterop._core cimport (
    DType, Device, Tensor, dtype_from_dl, device_from_dl,
    empty_tensor, tensor_from_managed, tensor_from_object, to_capsule,
)
