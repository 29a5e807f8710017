# The table dlinterop._cuda publishes to the core (src/cuda_table.h), declared once for both.
from libc.stdint cimport int32_t

from dlinterop.dlpack cimport DLDevice


cdef extern from "cuda_table.h":
    ctypedef struct dli_cuda_table:
        void* (*alloc_nogil)(size_t, DLDevice, void**) noexcept nogil
        void (*free_nogil)(void*, size_t, DLDevice) noexcept nogil
        void* (*current_stream_nogil)(int32_t) noexcept nogil
        int (*streams_entered)() noexcept nogil
