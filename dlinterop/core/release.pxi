# Provides: a dying Tensor's releases (_release_tensor, the body of Tensor.__dealloc__): its
# own buffer freed, its imported managed tensor's deleter called, its owner dropped, queued
# past a depth rather than recursing (src/release_queue.h), with the sanitizer's hook.
# Uses: runtime.pxi (src/sanitizer.h), cuda.pxi (_device_free).

cdef extern from "release_queue.h":
    bint dli_release_too_deep() noexcept
    void dli_release_later(DLManagedTensorVersioned* versioned, DLManagedTensor* legacy,
                           PyObject* owner) noexcept
    void dli_release_enter() noexcept
    void dli_release_leave() noexcept
    void dli_incref "Py_INCREF" (PyObject* obj) noexcept


cdef inline void _release_tensor(Tensor self) noexcept:
    """Releases what self holds, exactly once (Tensor.__dealloc__, which keeps any pending
    exception aside while this runs)."""
    cdef DLManagedTensorVersioned* mv = self.managed_versioned
    cdef DLManagedTensor* ml = self.managed_legacy
    cdef PyObject* owner
    self.managed_versioned = NULL
    self.managed_legacy = NULL
    if self.alloc_base != NULL:
        if dli_device_host(self.dl.device.device_type):
            dli_host_free(self.alloc_base, self.alloc_nbytes)
        else:
            _device_free(self.alloc_base, self.alloc_nbytes, self.dl.device)
        self.alloc_base = NULL
    if self.shape_strides != self.inline_storage:
        free(self.shape_strides)
        self.shape_strides = self.inline_storage
    # Releasing the managed tensor or the owner may free other Tensors (a chain through
    # other frameworks' tensors: torch -> dlinterop -> torch ...), each from inside the
    # last one's deallocation; past a depth the releases are queued for the outermost
    # deallocation, as CPython's trashcan does for containers.
    if dli_release_too_deep():
        if dli_san_on() and (mv != NULL or ml != NULL):
            dli_san_import_released(<void*>mv if mv != NULL else <void*>ml)
        owner = <PyObject*>self.owner_ref
        dli_incref(owner)
        self.owner_ref = None
        dli_release_later(mv, ml, owner)
        return
    dli_release_enter()
    # Only an imported tensor has one: its sanitizer hook costs the others nothing.
    if mv != NULL:
        if dli_san_on():
            dli_san_import_released(mv)
        if mv.deleter != NULL:
            mv.deleter(mv)
    if ml != NULL:
        if dli_san_on():
            dli_san_import_released(ml)
        if ml.deleter != NULL:
            ml.deleter(ml)
    # Dropped here, inside __dealloc__, where Cython keeps any pending exception aside, not
    # in the generated clean-up after it: an owner's destructor (a foreign capsule's, say)
    # may run Python code, which must not see an exception in flight.
    self.owner_ref = None
    dli_release_leave()
