# Reads of shared interpreter state that stay safe where no GIL orders them (free-threaded
# CPython) and cost nothing more where one does. Inline C (src/threadsafe.h), compiled into
# each module that cimports this file; no module of its own.

cdef extern from "threadsafe.h":
    const bint FREE_THREADED "DLI_FREE_THREADED"
    object dict_get "dli_dict_get" (dict d, object key)
    unsigned int type_version "dli_type_version" (object type) noexcept
