# Provides: borrowed views of inputs: borrow (the C level), _borrow (which can also read a
# layout only, for empty_like) and the testing aid _borrow_routes.
# Uses: nothing.

cdef object borrow(object obj, DLTensor* out, bint* readonly):
    return _borrow(obj, out, readonly, True)


cdef object _borrow(object obj, DLTensor* out, bint* readonly, bint sharing):
    """borrow(); without `sharing` only the layout will be read (empty_like), so a PyTorch
    tensor that requires grad is described rather than refused."""
    cdef Tensor t
    if type(obj) is Tensor:
        t = <Tensor>obj
        out[0] = t.dl
        readonly[0] = (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0
        return obj
    if borrow_dltensor(obj, out, sharing):
        readonly[0] = False     # producers with this table (PyTorch) have no read-only memory
        return obj
    t = tensor_from_object(obj)
    out[0] = t.dl
    readonly[0] = (t.flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0
    return t


def _borrow_routes(obj):
    """Testing aid: ("table" or "import", the shape, whether read-only) of borrow(obj)."""
    cdef DLTensor view
    cdef bint readonly = False
    keeper = borrow(obj, &view, &readonly)
    if type(obj) is Tensor:
        route = "tensor"
    else:
        route = "table" if keeper is obj else "import"
    return route, tuple([view.shape[i] for i in range(view.ndim)]), bool(readonly)
