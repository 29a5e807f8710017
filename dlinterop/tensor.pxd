# dlinterop's same-build Cython API (docs/cython.md, "The same-build tier"): direct calls and
# typed access to the Tensor's fields, for extensions built against one dlinterop release and
# run only with it. Such an extension compiles in the layout of dlinterop's objects: on any
# other release it refuses to import (dlinterop/_same_build.pxd), and must be rebuilt. The
# stable ABI, dlinterop/abi.pxd, is what runs on every release of its major version.
#     from dlinterop.tensor cimport Tensor, tensor_from_object, to_capsule, ...
# The definitions live in dlinterop/_core.pxd; this file only names what this tier offers.
cimport dlinterop._same_build
from dlinterop._core cimport (
    DType, Device, Tensor, dtype_from_dl, device_from_dl,
    empty_tensor, tensor_from_managed, tensor_from_object, to_capsule,
)
