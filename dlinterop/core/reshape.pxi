# Provides: reshape (Tensor.reshape, Tensor.view(shape)): a view where the strides allow
# it, by NumPy's rule, else a copy (reshape) or a refusal (view); -1 inferred. A C path for
# shapes of exact ints (_exact_shape, _fit_shape, _strides_for) beside the general one
# (_new_shape, _strides_without_copy), which reads every other shape and explains every
# refusal, so that both give the same views and the same errors.
# Uses: runtime.pxi, tensor_base.pxi, copies.pxi, views.pxi.

cdef list _new_shape(Tensor src, object shape):
    """The shape to reshape src to: ints, one of them -1 at most (inferred)."""
    if len(shape) == 1 and not hasattr(type(shape[0]), "__index__"):
        shape = tuple(shape[0])
    dims = []
    for extent in shape:
        if isinstance(extent, bool) or not hasattr(type(extent), "__index__"):
            raise TypeError(f"a shape holds ints, not {type(extent).__name__}")
        dims.append(operator.index(extent))
    unknown = -1
    for i, extent in enumerate(dims):
        if extent == -1:
            if unknown >= 0:
                raise ValueError("only one dimension can be -1 (inferred)")
            unknown = i
        elif extent < 0:
            raise ValueError(f"negative dimension {extent} in shape {tuple(dims)}")
    if len(dims) > MAX_NDIM:
        refuse_ndim(len(dims), ValueError)
    size = element_count(&src.dl)
    known = math.prod(d for i, d in enumerate(dims) if i != unknown)
    if unknown >= 0:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a tensor of {size} elements into shape "
                             f"{tuple(dims)}")
        dims[unknown] = size // known
    elif known != size:
        raise ValueError(f"cannot reshape a tensor of {size} elements into shape {tuple(dims)}")
    return dims


cdef object _strides_without_copy(Tensor src, list dims):
    """Strides (elements) giving src's elements in C order under the new shape `dims`
    without moving them, or None where no strides can (NumPy's rule: each group of new
    axes must fall on old axes that are contiguous with each other)."""
    old = [(src.dl.shape[i], src.dl.strides[i]) for i in range(src.dl.ndim)
           if src.dl.shape[i] != 1]
    count = len(dims)
    new_strides = [0] * count
    if 0 in dims or element_count(&src.dl) == 0:
        stride = 1
        for k in range(count - 1, -1, -1):
            new_strides[k] = stride
            stride *= max(dims[k], 1)
        return new_strides
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < count and oi < len(old):
        nprod, oprod = dims[ni], old[oi][0]
        while nprod != oprod:
            if nprod < oprod:
                nprod *= dims[nj]
                nj += 1
            else:
                oprod *= old[oj][0]
                oj += 1
        for ok in range(oi, oj - 1):
            if old[ok][1] != old[ok + 1][0] * old[ok + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for nk in range(nj - 1, ni, -1):
            new_strides[nk - 1] = new_strides[nk] * dims[nk]
        ni, nj = nj, nj + 1
        oi, oj = oj, oj + 1
    last = new_strides[ni - 1] if ni > 0 else 1
    for nk in range(ni, count):
        new_strides[nk] = last
    return new_strides


cdef int _exact_shape(object shape, int64_t* dims) noexcept:
    """reshape's and view's arguments (ints given apart, or one tuple or list of them) read
    in C when every one is an exact int, each >= -1, at most one -1, at most MAX_NDIM of
    them: their count, with dims filled; -1 for anything else (the general path reads it,
    and refuses what it must)."""
    cdef PyObject* items = <PyObject*>shape
    cdef Py_ssize_t n = PyTuple_GET_SIZE(shape), i
    cdef bint is_list = False
    cdef int unknown = 0
    if n == 1 and not PyLong_CheckExact(PyTuple_GET_ITEM(shape, 0)):
        items = PyTuple_GET_ITEM(shape, 0)
        if PyTuple_CheckExact(items):
            n = PyTuple_GET_SIZE(<object>items)
        elif PyList_CheckExact(items):
            n = PyList_GET_SIZE(items)
            is_list = True
        else:
            return -1
    if n > MAX_NDIM:
        return -1
    for i in range(n):
        if not _exact_int(PyList_GET_ITEM(items, i) if is_list
                          else PyTuple_GET_ITEM(<object>items, i), &dims[i]):
            return -1
        if dims[i] < 0:
            if dims[i] != -1 or unknown:
                return -1
            unknown = 1
    return <int>n


cdef bint _fit_shape(const DLTensor* src, int ndim, int64_t* dims) noexcept:
    """Whether src's elements fit the shape dims (C-read by _exact_shape), with its -1
    filled in; False also where the general path must explain a refusal."""
    cdef int64_t size = element_count(src), known = 1
    cdef int i, unknown = -1
    for i in range(ndim):
        if dims[i] == -1:
            unknown = i
        elif __builtin_mul_overflow(known, dims[i], &known):
            return False
    if unknown >= 0:
        if known == 0 or size % known:
            return False
        dims[unknown] = size // known
        return True
    return known == size


cdef bint _strides_for(const DLTensor* src, int count, const int64_t* dims,
                       int64_t* out) noexcept:
    """Strides (elements) giving src's elements in C order under the shape `dims` (which
    holds as many elements) without moving them; False where no strides can (NumPy's rule:
    each group of new axes must fall on old axes that are contiguous with each other) or
    where they would overflow. The C twin of _strides_without_copy."""
    cdef int64_t old_shape[MAX_NDIM]
    cdef int64_t old_strides[MAX_NDIM]
    cdef int64_t nprod, oprod, stride = 1
    cdef int n_old = 0, i, k, oi = 0, oj = 1, ni = 0, nj = 1
    if element_count(src) == 0 or element_count_of(count, dims) == 0:
        for k in range(count - 1, -1, -1):
            out[k] = stride
            if dims[k] > 1 and __builtin_mul_overflow(stride, dims[k], &stride):
                return False
        return True
    for i in range(src.ndim):
        if src.shape[i] != 1:
            old_shape[n_old] = src.shape[i]
            old_strides[n_old] = src.strides[i]
            n_old += 1
    while ni < count and oi < n_old:
        nprod = dims[ni]
        oprod = old_shape[oi]
        while nprod != oprod:
            # both products stay within the element count, which fits int64
            if nprod < oprod:
                nprod *= dims[nj]
                nj += 1
            else:
                oprod *= old_shape[oj]
                oj += 1
        for k in range(oi, oj - 1):
            if old_strides[k] != old_shape[k + 1] * old_strides[k + 1]:
                return False
        out[nj - 1] = old_strides[oj - 1]
        for k in range(nj - 1, ni, -1):
            if __builtin_mul_overflow(out[k], dims[k], &out[k - 1]):
                return False
        ni = nj
        nj += 1
        oi = oj
        oj += 1
    stride = out[ni - 1] if ni > 0 else 1
    for k in range(ni, count):
        out[k] = stride
    return True


cdef Tensor _reshaped(Tensor src, object shape, bint copy_if_needed):
    """src in the shape `shape` (reshape's or view's argument tuple): a view where strides
    allow it, else a copy (copy_if_needed) or a ValueError."""
    cdef int64_t c_shape[MAX_NDIM]
    cdef int64_t c_strides[MAX_NDIM]
    cdef int i
    cdef int ndim = _exact_shape(shape, c_shape)
    if ndim >= 0 and _fit_shape(&src.dl, ndim, c_shape) and \
            _strides_for(&src.dl, ndim, c_shape, c_strides):
        return _view_with(src, ndim, c_shape, c_strides, src.dl.byte_offset, src.dl.dtype)
    dims = _new_shape(src, shape)
    strides = _strides_without_copy(src, dims)
    if strides is None:
        if not copy_if_needed:
            raise ValueError(f"a view of shape {tuple(dims)} cannot be made of a tensor with "
                             f"shape {_shape_of(src)} and strides {_strides_of(src)} without a "
                             "copy; reshape() copies")
        src = _copy_tensor(src, src.dl.device)
        strides = _strides_without_copy(src, dims)
    for i in range(len(dims)):
        c_shape[i] = dims[i]
        c_strides[i] = strides[i]
    return _view_with(src, len(dims), c_shape, c_strides, src.dl.byte_offset, src.dl.dtype)
