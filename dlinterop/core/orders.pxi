# Provides: copies and flat views in NumPy's orders ("C", "F", "A", "K"): Tensor.copy(order=)
# (_copy_in_order), flatten (_flattened: always a copy) and ravel (_raveled: a view where
# the strides allow, else a copy), each read in the order NumPy reads them.
# Uses: dtypes.pxi (_is_packed_subbyte), tensor_base.pxi, copies.pxi, views.pxi, reshape.pxi.


cdef bint _is_f_contiguous(Tensor t) noexcept:
    """Whether t's elements lie in Fortran order (axes reversed, C order)."""
    cdef int64_t expected = 1
    cdef int i
    for i in range(t.dl.ndim):
        if t.dl.shape[i] == 0:
            return True
    for i in range(t.dl.ndim):
        if t.dl.shape[i] != 1:
            if t.dl.strides[i] != expected:
                return False
            expected *= t.dl.shape[i]
    return True


cdef tuple _order_axes(Tensor t, object order):
    """The axes of t in the order NumPy's `order` reads them: "C" as they are, "F"
    reversed, "A" as "F" where t is Fortran- and not C-contiguous (else "C"), "K" by the
    size of their strides, largest first (their order in memory; an axis read backwards is
    still read backwards); None for "C"'s order (None, as NumPy takes it, too). ValueError
    for another order."""
    cdef int n = t.dl.ndim
    if order == "C" or order is None:     # None: NumPy's default, "C"
        return None
    if order == "A":
        order = "F" if _is_f_contiguous(t) and not is_c_contiguous(&t.dl) else "C"
        return _order_axes(t, order)
    if order == "F":
        return tuple(range(n - 1, -1, -1)) if n > 1 else None
    if order == "K":
        sizes = [abs(t.dl.strides[i]) if t.dl.shape[i] > 1 else 0 for i in range(n)]
        axes = sorted(range(n), key=lambda i: -sizes[i])
        return None if axes == list(range(n)) else tuple(axes)
    raise ValueError(f"order must be one of 'C', 'F', 'A' or 'K', not {order!r}")


cdef int _refuse_packed_order(Tensor t, object order) except -1:
    raise ValueError(f"{dtype_from_dl(t.dl.dtype).name} elements are packed along the last "
                     f"axis: they are read and copied in C order, not {order!r}")


cdef Tensor _copy_in_order(Tensor t, DLDevice target, object order):
    """Tensor.copy: a new Tensor owning its memory (on `target`) with t's values, its
    elements laid out in `order`."""
    cdef tuple axes = _order_axes(t, order)
    cdef Tensor out
    cdef int64_t shape[MAX_NDIM]
    cdef int64_t strides[MAX_NDIM]
    cdef int i
    if axes is None:
        return _copy_tensor(t, target)
    if _is_packed_subbyte(t.dl.dtype):
        _refuse_packed_order(t, order)
    out = _copy_tensor(_permuted(t, axes), target)   # C order in the order of `axes`
    # The copy's own layout, put back in t's axis order: still its memory, still owned.
    for i in range(t.dl.ndim):
        shape[axes[i]] = out.dl.shape[i]
        strides[axes[i]] = out.dl.strides[i]
    _relayout(out, t.dl.ndim, shape, strides)
    return out


cdef Tensor _flattened(Tensor t, object order):
    """Tensor.flatten: a new one-axis Tensor owning its memory, with t's values in the order
    `order` reads them."""
    cdef tuple axes = _order_axes(t, order)
    if axes is not None and _is_packed_subbyte(t.dl.dtype):
        _refuse_packed_order(t, order)
    cdef Tensor out = _copy_tensor(t if axes is None else _permuted(t, axes), t.dl.device)
    cdef int64_t count = element_count(&out.dl)
    cdef int64_t one = 1
    _relayout(out, 1, &count, &one)
    return out


cdef Tensor _raveled(Tensor t, object order):
    """Tensor.ravel: t's values on one axis in the order `order` reads them: a view where
    the strides allow it, else a copy, as NumPy's ravel."""
    cdef tuple axes = _order_axes(t, order)
    if axes is not None and _is_packed_subbyte(t.dl.dtype):
        _refuse_packed_order(t, order)
    return _reshaped(t if axes is None else _permuted(t, axes), (-1,), True)
