# Provides: the Tensor class: owned, aligned buffers or imported managed tensors, their
# attributes, and the methods that forward to the files above (its deallocation to
# release.pxi, its buffer protocol to buffer_export.pxi); arithmetic operators that refuse,
# pointing to the frameworks (_no_arithmetic).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, cuda.pxi, casts.pxi,
# placement.pxi, export.pxi, shared.pxi, cuda_ipc.pxi, pickling.pxi, views.pxi, reshape.pxi,
# orders.pxi, indexing.pxi, assignment.pxi, conversions.pxi, release.pxi, buffer_export.pxi.
#
# After every file that makes or reads a Tensor (only same_build.pxi, which names the class,
# follows), because its methods forward to the files above; those make and read Tensors
# through its C fields (declared in _core.pxd) and tensor_base.pxi, never its methods.

# dlinterop is not an array library: the arithmetic operators refuse, saying where the
# math is done. Raised, not NotImplemented, whatever the other operand: the answer is the
# same for all of them, and an operand whose own operator takes a Tensor (a NumPy array
# reads it without a copy) runs first anyway when it is on the left.
cdef object _no_arithmetic(object left, object right, str op):
    """TypeError for `left op right` (op ending in "(": a unary operator on left)."""
    if op.endswith("("):
        head = f"bad operand type for {op.rstrip('(')}: '{type(left).__name__}'"
    else:
        head = (f"unsupported operand type(s) for {op}: '{type(left).__name__}' and "
                f"'{type(right).__name__}'")
    raise TypeError(head + ": dlinterop moves memory and does no math; do it in NumPy or "
                    "PyTorch, which take the Tensor without a copy: np.from_dlpack(t) + 1 "
                    "(docs/quickstart.md, \"Math\")")


# No GC support, like NumPy's ndarray: a Tensor's only object reference is its owner,
# which never refers back to it in any way dlinterop creates, and GC tracking would cost
# every import a collection check.
@cython.no_gc
@cython.freelist(64)
cdef class Tensor:
    """An n-dimensional array of any DLPack data type and device.

    Made by dl.empty / dl.zeros / dl.full, dl.from_dlpack, dl.asarray or Tensor.copy; it
    either owns an aligned buffer or holds an imported DLPack tensor whose deleter it calls
    exactly once."""

    def __cinit__(self):
        # A valid empty float32 vector until a creator fills in the real layout, so that
        # even Tensor.__new__(Tensor) is safe to use.
        self.shape_strides = self.inline_storage
        self.inline_storage[0] = 0
        self.inline_storage[1] = 1
        self.dl.ndim = 1
        self.dl.shape = self.inline_storage
        self.dl.strides = self.inline_storage + 1
        self.dl.dtype.code = kDLFloat
        self.dl.dtype.bits = 32
        self.dl.dtype.lanes = 1
        self.dl.device.device_type = kDLCPU

    def __init__(self, *args, **kwargs):
        raise TypeError("Tensor cannot be constructed directly; use dl.empty, dl.zeros, "
                        "dl.full, dl.from_dlpack or dl.asarray")

    def __dealloc__(self):
        _release_tensor(self)

    cdef DLTensor* dltensor(self) noexcept nogil:
        return &self.dl

    # -- attributes ---------------------------------------------------------------------

    @property
    def shape(self):
        return _shape_of(self)

    @property
    def strides(self):
        """Strides in elements (DLPack's unit, not NumPy's bytes)."""
        return _strides_of(self)

    @property
    def dtype(self):
        return dtype_from_dl(self.dl.dtype)

    @property
    def device(self):
        return _device_of(self)

    @property
    def ndim(self):
        return self.dl.ndim

    @property
    def size(self):
        return element_count(&self.dl)

    @property
    def nbytes(self):
        # In Python ints: a broadcast (zero-stride) view can hold more than 2**63 bytes' worth.
        return (<object>element_count(&self.dl) * self.dl.dtype.bits * self.dl.dtype.lanes + 7) // 8

    @property
    def itemsize(self):
        return item_bytes(self.dl.dtype)

    @property
    def data_ptr(self):
        """Address of element 0 (data + byte_offset)."""
        return <uintptr_t>self.dl.data + self.dl.byte_offset

    @property
    def readonly(self):
        return _is_readonly(self)

    @property
    def readonly_reason(self):
        """Why the Tensor is read-only: "flag" when its producer said so (DLPack's READ_ONLY
        flag, a read-only buffer or array) or dlinterop made it so, "legacy" when it came
        from a legacy "dltensor" capsule, which cannot say whether its memory may be
        written; None when it is writable. A "legacy" Tensor may be exported as a legacy
        capsule again, a "flag" one only as a versioned capsule or a copy."""
        if not (self.flags & DLPACK_FLAG_BITMASK_READ_ONLY):
            return None
        return "legacy" if self.flags & FLAG_READ_ONLY_ASSUMED else "flag"

    @property
    def is_copied(self):
        """True when the producer reported (IS_COPIED) that it made this memory a copy."""
        return (self.flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0

    @property
    def is_shared(self):
        """True when the memory is a shared-memory segment, or CUDA device memory that CUDA
        IPC can hand out (dl.share, shared=True): sent through multiprocessing, the Tensor
        arrives over the same memory."""
        return _shared_memory_of(self) is not None or _is_cuda_ipc_memory(self)

    @property
    def owner(self):
        """The object keeping the memory alive, or None when the Tensor owns its buffer."""
        return self.owner_ref

    def is_contiguous(self):
        """True when the elements are laid out in C order (always for zero-size tensors)."""
        return is_c_contiguous(&self.dl)

    def __len__(self):
        if self.dl.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.dl.shape[0]

    def __sizeof__(self):
        """The object, its shape and strides, and the buffer it owns (as NumPy counts an
        array's own data); memory it only views is another object's."""
        cdef size_t size = type(self).__basicsize__
        if self.shape_strides != self.inline_storage:
            size += 2 * self.dl.ndim * sizeof(int64_t)
        if self.alloc_base != NULL:
            size += self.alloc_nbytes
        return size

    def __repr__(self):
        """The values (host memory; summarised past 1,000 elements), shape, dtype, device,
        and why the Tensor is read-only when it is."""
        reason = self.readonly_reason
        values = _values_text(self, 7)
        return ("Tensor(" + ("" if values is None else values + ", ")
                + f"shape={self.shape}, dtype={self.dtype}, "
                f"device={device_from_dl(self.dl.device)}"
                + (")" if reason is None else f", readonly={reason!r})"))

    # -- DLPack (export.pxi) ------------------------------------------------------------

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export as a DLPack capsule: versioned when max_version allows (stamped with the
        newest version both sides implement, at most 1.3), sharing this Tensor's memory
        unless copy=True or another dl_device= asks for a copy; the rules are DLPack's
        (https://dmlc.github.io/dlpack/latest/python_spec.html)."""
        return _export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        return _dlpack_device_tuple(self.dl.device)

    # -- views (views.pxi, reshape.pxi, indexing.pxi): the same memory, another layout ---

    def __getitem__(self, key):
        """Basic indexing, a view: integers, slices (negative steps too), ``...`` and
        ``None``. The view holds the memory's owner and is read-only when this Tensor is."""
        return _getitem(self, key)

    def __setitem__(self, key, value):
        """Assignment into the elements ``self[key]`` selects (any key indexing takes): a
        number, Python data, a Tensor or any array dl.asarray takes, broadcast and cast as
        NumPy assigns (assignment.pxi)."""
        _setitem(self, key, value)

    @property
    def T(self):
        """The axes reversed (a view)."""
        return _permuted(self, None)

    def transpose(self, *axes):
        """A view with the axes in the order given (``t.transpose(1, 0)`` or
        ``t.transpose((1, 0))``); none given: reversed."""
        if len(axes) == 1 and axes[0] is not None and not PyLong_CheckExact(
                PyTuple_GET_ITEM(axes, 0)) and not hasattr(type(axes[0]), "__index__"):
            return _permuted(self, tuple(axes[0]))    # () too: NumPy's t.transpose(())
        return _permuted(self, axes if axes else None)

    def reshape(self, *shape):
        """This Tensor's elements, in C order, in another shape (one extent may be -1): a
        view where the strides allow it, else a copy, as NumPy's reshape."""
        return _reshaped(self, shape, True)

    def view(self, *args):
        """``t.view(shape)`` (or ``t.view(3, 4)``): as reshape, but never copies (ValueError
        when no strides can give the shape). ``t.view(dtype)``: the same bytes as another
        data type (the last axis holds more or fewer elements when the item sizes differ)."""
        cdef PyObject* first
        if len(args) == 1:
            first = PyTuple_GET_ITEM(args, 0)
            if not (PyLong_CheckExact(first) or PyTuple_CheckExact(first)
                    or PyList_CheckExact(first)) and \
                    not hasattr(type(args[0]), "__index__") and \
                    not isinstance(args[0], (tuple, list)):
                return _as_dtype(self, dtype(args[0]))
        return _reshaped(self, args, False)

    def squeeze(self, axis=None):
        """A view without the axes of size 1 (all, or those named)."""
        return _squeezed(self, axis)

    def unsqueeze(self, axis):
        """A view with a new axis of size 1 at `axis`, as torch's unsqueeze."""
        return _unsqueezed(self, axis)

    def __array__(self, dtype=None, copy=None):
        """NumPy's array protocol (NumPy 2's signature): an ndarray over this Tensor's memory
        (read-only when it is), bfloat16 and the small floats as ml_dtypes' types; the packed
        sub-byte types (float4/float6, int4, ...) as a copy unpacked to one element per byte,
        as ml_dtypes holds them (so copy=False refuses them); a TypeError for a type NumPy
        cannot hold or a device tensor, never an object array. copy=True copies; a dtype that
        differs converts (a copy, so copy=False refuses)."""
        return _numpy_array_of(self, dtype, copy)

    # -- values (conversions.pxi): Python objects, read from host memory ----------------

    def tolist(self):
        """The values as nested lists of Python scalars (a scalar for a 0-d Tensor): bool,
        int, float (bfloat16 and the small floats too) or complex; a tuple per element for
        vector types. A device Tensor is read through a copy to the host."""
        return _values_of(self)

    def item(self):
        """The value of a Tensor of one element, as a Python scalar."""
        return _item_value(self)

    def __float__(self):
        return _float_value(self)

    def __int__(self):
        return _int_value(self)

    def __complex__(self):
        return _complex_value(self)

    def __bool__(self):
        # As NumPy's and torch's: a tensor of several elements has no single truth value.
        return _bool_value(self)

    def __index__(self):
        """For integer Tensors of one element (so that ``range(t)`` or ``l[t]`` work)."""
        if self.dl.dtype.code not in (kDLInt, kDLUInt):
            raise TypeError(f"only integer tensors can be an index, not {self.dtype.name}")
        return _index_value(self)

    # The comparisons compare values element by element, as NumPy's and PyTorch's arrays do,
    # giving a bool Tensor (so `if t == u` asks for one truth value of several, and raises);
    # the hash stays the identity's, as PyTorch keeps it, so that Tensors still key dicts.
    def __eq__(self, other): return _compare(self, other, Py_EQ)
    def __ne__(self, other): return _compare(self, other, Py_NE)
    def __lt__(self, other): return _compare(self, other, Py_LT)
    def __le__(self, other): return _compare(self, other, Py_LE)
    def __gt__(self, other): return _compare(self, other, Py_GT)
    def __ge__(self, other): return _compare(self, other, Py_GE)

    # No arithmetic (_no_arithmetic above): in-place operators fall back to these.
    def __add__(self, other): return _no_arithmetic(self, other, "+")
    def __radd__(self, other): return _no_arithmetic(other, self, "+")
    def __sub__(self, other): return _no_arithmetic(self, other, "-")
    def __rsub__(self, other): return _no_arithmetic(other, self, "-")
    def __mul__(self, other): return _no_arithmetic(self, other, "*")
    def __rmul__(self, other): return _no_arithmetic(other, self, "*")
    def __matmul__(self, other): return _no_arithmetic(self, other, "@")
    def __rmatmul__(self, other): return _no_arithmetic(other, self, "@")
    def __truediv__(self, other): return _no_arithmetic(self, other, "/")
    def __rtruediv__(self, other): return _no_arithmetic(other, self, "/")
    def __floordiv__(self, other): return _no_arithmetic(self, other, "//")
    def __rfloordiv__(self, other): return _no_arithmetic(other, self, "//")
    def __mod__(self, other): return _no_arithmetic(self, other, "%")
    def __rmod__(self, other): return _no_arithmetic(other, self, "%")
    def __divmod__(self, other): return _no_arithmetic(self, other, "divmod()")
    def __rdivmod__(self, other): return _no_arithmetic(other, self, "divmod()")
    def __pow__(self, other, mod=None): return _no_arithmetic(self, other, "** or pow()")
    def __rpow__(self, other, mod=None): return _no_arithmetic(other, self, "** or pow()")
    def __lshift__(self, other): return _no_arithmetic(self, other, "<<")
    def __rlshift__(self, other): return _no_arithmetic(other, self, "<<")
    def __rshift__(self, other): return _no_arithmetic(self, other, ">>")
    def __rrshift__(self, other): return _no_arithmetic(other, self, ">>")
    def __and__(self, other): return _no_arithmetic(self, other, "&")
    def __rand__(self, other): return _no_arithmetic(other, self, "&")
    def __or__(self, other): return _no_arithmetic(self, other, "|")
    def __ror__(self, other): return _no_arithmetic(other, self, "|")
    def __xor__(self, other): return _no_arithmetic(self, other, "^")
    def __rxor__(self, other): return _no_arithmetic(other, self, "^")
    def __neg__(self): return _no_arithmetic(self, None, "unary -(")
    def __pos__(self): return _no_arithmetic(self, None, "unary +(")
    def __invert__(self): return _no_arithmetic(self, None, "unary ~(")
    def __abs__(self): return _no_arithmetic(self, None, "abs()(")

    def __hash__(self):
        return object.__hash__(self)

    def __contains__(self, value):
        """True when some element equals `value` (NumPy's `(t == value).any()`)."""
        result = _compare(self, value, Py_EQ)
        if result is NotImplemented:
            return False
        return any(_read_values(<Tensor>result, True))

    def __iter__(self):
        """Views along the first axis."""
        if self.dl.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (_getitem(self, i) for i in range(self.dl.shape[0]))

    def contiguous(self):
        """This Tensor when it is C-contiguous, else a C-contiguous copy (same device)."""
        return _contiguous(self)

    # -- copies and casts (copies.pxi, casts.pxi) ---------------------------------------

    def astype(self, dtype, *, copy=True):
        """A new C-contiguous Tensor of `dtype` holding these values, cast as NumPy's astype
        casts (integers wrap; NaN or a value out of an integer type's range is refused);
        with copy=False, this Tensor itself when it already has that type."""
        return _astype(self, dtype, copy)

    def copy(self, order="C", *, device=None):
        """A new Tensor owning its memory with the same values, on `device` (default: the
        same device): C-contiguous, or laid out in NumPy's `order` ("F": Fortran order, "A":
        "F" when this Tensor is Fortran- and not C-contiguous, "K": as its axes lie)."""
        cdef DLDevice target = self.dl.device if device is None else _parse_device(device)
        return _copy_in_order(self, target, order)

    def flatten(self, order="C"):
        """A new one-axis Tensor with these values, always a copy (NumPy's flatten; `order`
        as in copy: the order the values are read in)."""
        return _flattened(self, order)

    def ravel(self, order="C"):
        """These values on one axis: a view where the strides allow it, else a copy, as
        NumPy's ravel (`order` as in flatten)."""
        return _raveled(self, order)

    def to(self, device, *, copy=None, stream=None):
        """This Tensor when it already lives on `device` and copy is not True, else a copy.
        `stream` (an int, as DLPack passes streams) is the CUDA stream the copy is issued
        on, instead of dlinterop's current one; copies between host memory take None or -1."""
        return _tensor_to(self, device, copy, stream)

    @property
    def __cuda_array_interface__(self):
        """Version 3 of Numba's CUDA array interface, for CUDA device and managed memory."""
        return _cuda_array_interface(self)

    # -- buffer protocol ----------------------------------------------------------------

    def __getbuffer__(self, Py_buffer* buf, int flags):
        _fill_buffer(self, buf, flags)

    def __releasebuffer__(self, Py_buffer* buf):
        _release_buffer(buf)

    # -- pickle -------------------------------------------------------------------------

    def __reduce_ex__(self, protocol):
        return _reduce_tensor(self, protocol)
