# Provides: where a Tensor goes and whether it may be copied to get there, decided once for
# every route (export, import, asarray, creation, Tensor.to): the copy= rule with CopyError
# and its refusals (_copy_needed: whether a move is a copy, for export and Tensor.to), the
# stream= rule (which devices have streams: the table of device kinds), the alignment rule
# of device memory, and the tails that place a Tensor on its target device (_placed for
# what was imported, _on_device for what was made on the host, _tensor_to).
# Uses: runtime.pxi, dtypes.pxi, devices.pxi, tensor_base.pxi, copies.pxi.

class CopyError(BufferError, ValueError):
    """A copy would be needed, and copy=False forbids it."""


cdef int check_copy_arg(object copy) except -1:
    """TypeError unless copy= is True, False or None: every route's first check of it
    (dlinterop.frameworks' to_framework too)."""
    if copy is not None and copy is not True and copy is not False:
        raise TypeError(f"copy must be True, False or None, got {copy!r}")
    return 0


cdef int _refuse_copy(DLDevice source, DLDevice target) except -1:
    """CopyError for a move between devices that copy=False forbids: one message for every
    route (Tensor.to, export, import, asarray)."""
    raise CopyError(f"moving data from {device_from_dl(source)} to {device_from_dl(target)} "
                    "needs a copy, and copy=False was given")


cdef inline bint _copy_needed(Tensor t, DLDevice target, object copy) except -1:
    """Whether t, placed on `target` as copy= (checked) asks, is a copy: where t lives
    elsewhere, or copy=True; CopyError where copy=False forbids the copy the move takes.
    The copy, and whether dlinterop can reach `target`, are the caller's (export,
    Tensor.to)."""
    if same_device(target, t.dl.device):
        return copy is True
    if copy is False:
        _refuse_copy(t.dl.device, target)
    return True


cdef int _refuse_repacked(Tensor t) except -1:
    """The copy=False refusal of padded sub-byte data: one message for every route."""
    raise CopyError(f"the producer's {dtype_text(t.dl.dtype)} data is padded (one "
                    "element per byte: DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, or a NumPy "
                    "array of an ml_dtypes sub-byte type), and dlinterop holds sub-byte types "
                    "packed, which takes a copy; copy=False forbids it (pass copy=True or "
                    "copy=None)")


# -- streams ----------------------------------------------------------------------------
# DLPack's Python specification (https://dmlc.github.io/dlpack/latest/python_spec.html)
# passes a stream for memory a GPU runtime orders. dlinterop applies one rule on every
# route, and the table of device kinds (src/device_kinds.h) says which devices it calls
# for: a device with streams takes an int stream (-1: no ordering; 0 where it is the
# runtime's default stream, as on ROCm, and refused where it is ambiguous, as on CUDA),
# every other device None or -1. Export orders the CUDA layer's memory on the consumer's
# stream; dlinterop issues no work on ROCm memory (it has no ROCm runtime), so there is
# nothing to order there. Import passes the stream on to the producer; Tensor.to issues its
# copy on it.

cdef int _check_stream_type(object stream) except -1:
    """TypeError unless `stream` (not None) is an int, checked before anything is asked of a
    producer."""
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, got {type(stream).__name__}")
    return 0


# What the stream= rule finds wrong with a stream (_stream_fault), and says (_refuse_stream).
cdef enum StreamFault:
    STREAM_FINE = 0
    STREAM_NOT_WITHOUT_STREAMS = 1   # a device with no streams takes None or -1 only
    STREAM_INVALID = 2               # below -1
    STREAM_ZERO_ON_CUDA = 3          # 0: ambiguous on CUDA


cdef int _stream_fault(object stream, DLDeviceType device_type) except -1:
    """What the stream= rule finds wrong with `stream` for memory on a device of
    `device_type`: STREAM_FINE (None always is), or the fault for _refuse_stream, which
    callers name the memory for only then; TypeError for a stream that is not an int."""
    if stream is None:
        return STREAM_FINE
    _check_stream_type(stream)
    if not dli_device_streams(device_type):
        return STREAM_FINE if stream == -1 else STREAM_NOT_WITHOUT_STREAMS
    if stream < -1:
        return STREAM_INVALID
    if stream == 0 and not dli_device_stream_zero(device_type):
        return STREAM_ZERO_ON_CUDA
    return STREAM_FINE


cdef int _refuse_stream(object stream, int fault, str memory) except -1:
    """The ValueError for a fault _stream_fault found (`memory` names what it was for)."""
    if fault == STREAM_NOT_WITHOUT_STREAMS:
        raise ValueError(f"stream must be None or -1 for {memory}, got {stream}")
    if fault == STREAM_INVALID:
        raise ValueError(f"invalid stream {stream} for {memory}")
    raise ValueError("stream=0 is ambiguous and not allowed for CUDA; use 1 for the "
                     "legacy default stream or 2 for the per-thread default stream")


# -- alignment --------------------------------------------------------------------------

cdef int _check_alignment(DLDevice device, Py_ssize_t alignment) except -1:
    """ValueError for an alignment the device's allocator cannot honour: the table's
    alignment column (the CUDA layer's allocations are 256-byte aligned, and no larger
    alignment can be asked of it; the host's take any)."""
    cdef const dli_device_kind* kind = dli_device_kind_of(device.device_type)
    if kind != NULL and kind.alignment != 0 and alignment > kind.alignment:
        raise ValueError(f"{kind.name.decode()} allocations are {kind.alignment}-byte "
                         f"aligned; alignment={alignment} cannot be honoured")
    return 0


# -- the tails ---------------------------------------------------------------------------

cdef Tensor _placed(Tensor t, object device, object copy):
    """The tail of every import (from_dlpack, asarray): `t` moved to `device` (None: where it
    is) and copied when copy=True asks for a copy its producer did not make (IS_COPIED);
    copy=False refuses any copy, the repacking of padded data included."""
    cdef DLDevice target
    if copy is False and t.flags & FLAG_REPACKED:
        _refuse_repacked(t)
    if device is not None:
        target = _parse_device(device)
        if not same_device(target, t.dl.device):
            if copy is False:
                _refuse_copy(t.dl.device, target)
            return _copy_tensor(t, target)
    if copy is True and not (t.flags & DLPACK_FLAG_BITMASK_IS_COPIED):
        # Nobody said this memory is a private copy (a capsule, a legacy producer, one that
        # ignored copy=True, memory viewed through an interface): make one.
        return _copy_tensor(t, t.dl.device)
    return t


cdef Tensor _on_device(Tensor t, object device):
    """A Tensor made on the host (creation from values), on `device` (None or "cpu": as it
    is)."""
    if device is None or device == "cpu":
        return t
    return _copy_tensor(t, _parse_device(device))


cdef Tensor _tensor_to(Tensor self, object device, object copy, object stream):
    """Tensor.to: this Tensor when it already lives on `device` and copy is not True, else a
    copy, issued on `stream` where the copy involves memory with streams."""
    cdef DLDevice target = _parse_device(device)
    check_copy_arg(copy)
    # The copy runs on the runtime of the side with streams (the target's, else the source's).
    cdef DLDevice runs_on = target if dli_device_streams(target.device_type) else self.dl.device
    cdef int fault = _stream_fault(stream, runs_on.device_type)
    if fault:
        _refuse_stream(stream, fault,
                       f"a copy from {_device_of(self)} to {device_from_dl(target)}")
    if not _copy_needed(self, target, copy):
        return self
    if stream is None or stream == -1 or not dli_device_cuda(runs_on.device_type):
        return _copy_tensor(self, target)     # (ROCm memory: the copy says it cannot)
    return _copy_on_stream(self, target, stream)
