# Provides: the PyTorch rules checked before a torch tensor's memory is shared (requires
# grad, lazily conjugated or negated views), read natively through libtorch where possible.
# Uses: runtime.pxi, once.pxi.
#
# PyTorch hands out lazily conjugated (x.conj()) and negated (x.conj().imag, torch._neg_view)
# views with their stored values, through its exchange table and, for negated views, its
# __dlpack__ too. Sharing them would give wrong numbers, so dlinterop refuses them. Asking
# through Python (x.is_neg()) costs as much as the rest of the import, so for torch.Tensor
# and torch.nn.Parameter objects the two bits are read through libtorch's exported
# at::native::is_neg / is_conj (bool f(const at::Tensor&)), handed the at::Tensor that the
# Python object holds, and requires_grad through c10::TensorImpl::requires_grad, handed
# the TensorImpl that at::Tensor points to. Where that at::Tensor sits is not assumed: it
# is found by matching the public Tensor._cdata pointer, and the functions are checked
# against the Python methods on probe tensors before being trusted. Anything unexpected
# (another platform, a missing symbol, a changed layout) leaves the Python methods in
# charge.

cdef extern from "torch_bits.h":
    ctypedef bint (*dli_torch_bit_fn)(const void* tensor) noexcept nogil
    void* dli_torch_symbol(const char* lib, const char* name) nogil


cdef dli_torch_bit_fn _torch_native_is_neg = NULL
cdef dli_torch_bit_fn _torch_native_is_conj = NULL
# c10::TensorImpl::requires_grad() const, handed the TensorImpl the at::Tensor points to.
cdef dli_torch_bit_fn _torch_native_requires_grad = NULL
cdef enum:
    TORCH_BITS_UNUSABLE = -1     # decided: ask the Python methods
# The at::Tensor offset once the native reads are set up, TORCH_BITS_UNUSABLE, or a set-up
# state: SETUP_UNDECIDED (also when the probes could not be made yet: try again),
# SETUP_DECIDING.
cdef Py_ssize_t _torch_native_offset = SETUP_UNDECIDED
_register_setup("torch", &_torch_native_offset)
# Set-ups that could not make their probe tensors; after this many the answer is kept.
cdef int _torch_setup_attempts = 0
cdef int TORCH_SETUP_MAX_ATTEMPTS = 16


cdef Py_ssize_t _torch_tensor_slot(object tensor) except -3:
    """Offset of the at::Tensor inside a torch.Tensor object: the pointer-sized word equal
    to tensor._cdata (its TensorImpl), or -1 when there is none."""
    cdef size_t impl = tensor._cdata
    cdef Py_ssize_t size = type(tensor).__basicsize__
    cdef Py_ssize_t offset = sizeof(PyObject)
    while offset + <Py_ssize_t>sizeof(void*) <= size:
        if (<size_t*>(<char*><PyObject*>tensor + offset))[0] == impl:
            return offset
        offset += sizeof(void*)
    return -1


cdef Py_ssize_t _set_up_torch_bits(object torch) except -4:
    """The at::Tensor offset in torch.Tensor objects when the native reads are usable, else
    TORCH_BITS_UNUSABLE; SETUP_UNDECIDED when the probe tensors could not be made (a
    PyTorch mode that returns other types, say): the set-up then runs again next time, up
    to TORCH_SETUP_MAX_ATTEMPTS times. Run through _decided, so holding no lock: torch's
    Python code below may call dlinterop again, which then asks the Python methods."""
    global _torch_native_is_neg, _torch_native_is_conj, _torch_setup_attempts
    global _torch_native_requires_grad
    cdef dli_torch_bit_fn neg = NULL
    cdef dli_torch_bit_fn conj = NULL
    cdef dli_torch_bit_fn requires_grad = NULL
    cdef Py_ssize_t offset
    cdef const void* slot
    cdef bytes lib
    import os
    try:
        libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
        libs = [(os.fsencode(os.path.join(libdir, "libtorch_cpu" + suffix)),
                 os.fsencode(os.path.join(libdir, "libc10" + suffix)))
                for suffix in (".so", ".dylib")]
        # Plain tensors whatever PyTorch mode is active; a conjugated and a negated view
        # among them, and tensors that require grad (a leaf and a result), so that every
        # answer is exercised.
        with torch._C.DisableTorchFunction():
            base = torch.zeros(2, dtype=torch.complex64)
            leaf = torch.zeros(2, requires_grad=True)
            probes = [base, base.conj(), base.conj().imag, base.real, torch.zeros(3)[1:],
                      leaf, leaf * 2, (leaf * 2).detach()]
            if any(type(probe) is not torch.Tensor for probe in probes):
                raise TypeError("the probes are not plain tensors")
            offsets = [_torch_tensor_slot(probe) for probe in probes]
            expected = [(probe.is_neg(), probe.is_conj(), probe.requires_grad)
                        for probe in probes]
    except Exception:
        _torch_setup_attempts += 1
        if _torch_setup_attempts >= TORCH_SETUP_MAX_ATTEMPTS:
            return TORCH_BITS_UNUSABLE
        return SETUP_UNDECIDED
    for lib, c10 in libs:
        neg = <dli_torch_bit_fn>dli_torch_symbol(lib, b"_ZN2at6native6is_negERKNS_6TensorE")
        conj = <dli_torch_bit_fn>dli_torch_symbol(lib, b"_ZN2at6native7is_conjERKNS_6TensorE")
        requires_grad = <dli_torch_bit_fn>dli_torch_symbol(
            c10, b"_ZNK3c1010TensorImpl13requires_gradEv")
        if neg != NULL and conj != NULL and requires_grad != NULL:
            break
    else:
        return TORCH_BITS_UNUSABLE
    offset = offsets[0]
    if offset < 0:
        return TORCH_BITS_UNUSABLE
    for i in range(len(probes)):
        # The same slot in every probe, and the same answers as the Python methods.
        if offsets[i] != offset:
            return TORCH_BITS_UNUSABLE
        slot = <const void*>(<char*><PyObject*>probes[i] + offset)
        if (neg(slot) != expected[i][0] or conj(slot) != expected[i][1]
                or requires_grad((<const void**>slot)[0]) != expected[i][2]):
            return TORCH_BITS_UNUSABLE
    _torch_native_is_neg = neg
    _torch_native_is_conj = conj
    _torch_native_requires_grad = requires_grad
    return offset    # _decided publishes it after the functions


cdef Py_ssize_t _torch_native_offset_for(type cls) except -4:
    """Where native reads apply: torch.Tensor, and subclasses that switch
    __torch_function__ off as torch.nn.Parameter does (a subclass is laid out as its base
    is, then its own fields). Other subclasses are asked through their methods, which they
    may answer through __torch_function__. Below -1 while that is being decided."""
    torch = sys.modules.get("torch")
    if torch is None:
        return TORCH_BITS_UNUSABLE
    if _module_if_run("torch") is None:
        return SETUP_DECIDING          # another thread is still importing PyTorch
    if cls is not torch.Tensor and getattr(cls, "__torch_function__", None) is not getattr(
            torch._C, "_disabled_torch_function_impl", cls):
        return TORCH_BITS_UNUSABLE
    return _decided(&_torch_native_offset, _set_up_torch_bits, torch)


cdef inline Py_ssize_t _torch_offset(Py_ssize_t* recorded, object tensor) except -4:
    """The native offset recorded for tensor's type (a producer's), asked again (and
    recorded) while its set-up was being decided."""
    if recorded[0] < TORCH_BITS_UNUSABLE:
        recorded[0] = _torch_native_offset_for(type(tensor))
    return recorded[0]


cdef bint _torch_view_bits_set(Py_ssize_t* recorded, object tensor) except -1:
    """Whether `tensor` (of a PyTorch producer type) is a lazily conjugated or negated
    view: PyTorch exports those with their stored values, not the ones the view means."""
    cdef Py_ssize_t offset = _torch_offset(recorded, tensor)
    cdef const void* slot
    if offset >= 0:
        slot = <const void*>(<char*><PyObject*>tensor + offset)
        return _torch_native_is_neg(slot) or _torch_native_is_conj(slot)
    return (_read_bool(PyObject_CallMethodNoArgs(tensor, _IS_NEG))
            or _read_bool(PyObject_CallMethodNoArgs(tensor, _IS_CONJ)))


cdef bint _torch_requires_grad_set(Py_ssize_t* recorded, object tensor) except -1:
    """Whether `tensor` (of a PyTorch producer type) requires grad: sharing its memory would
    let writes bypass autograd, so PyTorch's own export refuses it."""
    cdef Py_ssize_t offset = _torch_offset(recorded, tensor)
    if offset >= 0:
        # The at::Tensor's one field is its TensorImpl pointer.
        return _torch_native_requires_grad(
            (<const void**>(<char*><PyObject*>tensor + offset))[0])
    return _read_bool(PyObject_GetAttr_raw(tensor, _REQUIRES_GRAD))


cdef int _refuse_torch_tensor(Py_ssize_t* recorded, object tensor) except -1:
    """BufferError for a PyTorch tensor whose memory must not be shared: one that requires
    grad, or a lazily conjugated or negated view; 0 for any other."""
    if _torch_requires_grad_set(recorded, tensor):
        _raise_requires_grad()
    if not _torch_view_bits_set(recorded, tensor):
        return 0
    if tensor.is_conj():
        raise BufferError("a PyTorch tensor with the conjugate bit set cannot be shared; "
                          "call .resolve_conj() first")
    raise BufferError("a PyTorch tensor with the negative bit set cannot be shared; "
                      "call .resolve_neg() first")


cdef int refuse_torch_tensor(object tensor) except -1:
    cdef Py_ssize_t recorded = SETUP_UNDECIDED
    return _refuse_torch_tensor(&recorded, tensor)


cdef int torch_native_reads(TorchNativeReads* out) except -1:
    out.offset = TORCH_BITS_UNUSABLE
    torch = sys.modules.get("torch")
    if torch is not None:
        out.offset = _torch_native_offset_for(<type>torch.Tensor)
    if out.offset < 0:
        out.offset = TORCH_BITS_UNUSABLE
        return 0
    out.is_neg = <void*>_torch_native_is_neg
    out.is_conj = <void*>_torch_native_is_conj
    out.requires_grad = <void*>_torch_native_requires_grad
    return 0


cdef int _raise_requires_grad() except -1:
    # One message for every route, naming the way out as PyTorch's own export does.
    raise BufferError("a PyTorch tensor that requires grad cannot be exported (writes "
                      "through DLPack would bypass autograd); use tensor.detach()")


cdef str _IS_NEG = "is_neg"
cdef str _IS_CONJ = "is_conj"
cdef str _REQUIRES_GRAD = "requires_grad"


cdef extern from "Python.h":
    PyObject* PyObject_CallMethodNoArgs(object obj, object name) noexcept
    PyObject* PyObject_GetAttr_raw "PyObject_GetAttr" (object obj, object name) noexcept


cdef bint _read_bool(PyObject* result) except -1:
    """Whether a new reference a C call returned is True; raises what the call raised."""
    if result == NULL:
        return raise_pending_error()
    Py_DecRef(result)   # the interpreter keeps True alive: comparing after is safe
    return result == <PyObject*>_TRUE


cdef object _TRUE = True


cdef bint _is_torch_tensor_type(type cls):
    # While another thread imports PyTorch, torch.Tensor may not be there yet: no tensor is.
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor_type is not None and issubclass(cls, tensor_type)
