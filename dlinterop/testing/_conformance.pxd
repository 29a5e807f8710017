# dlinterop.testing._conformance: the native half of the conformance checker.
# It uses nothing of the core's C level: only the DLPack structs, from dlinterop.dlpack, so
# that it checks dlinterop as it checks any other framework, from outside.
from dlinterop.dlpack cimport DLManagedTensor, DLManagedTensorVersioned, DLTensor
