"""dlinterop for Dask, plugged in through Dask's own entry points (``import dlinterop``
never imports Dask; Dask imports this module when it starts).

- ``dask.sizeof``: a Tensor counts the bytes of its elements, as Dask counts a NumPy array
  (a broadcast axis, stride 0, once), so that Dask's memory limits, spilling and transfer
  estimates see dlinterop data.
- ``dask.tokenize``: a Tensor's token hashes its bytes, as Dask's token for a NumPy array
  does (instead of Dask's fallback, which pickles the object to hash it).
- distributed's ``dask`` serialization family (registered when ``distributed.protocol``
  is imported, which always follows ``dask.sizeof``): a host Tensor travels as one frame of
  its bytes and a small header, as NumPy arrays do, whatever pickle protocol the connection
  allows (the scheduler's allow only protocol 4, which would put the bytes inside the
  pickle). A receiver gets a Tensor over the frame it was handed. A CUDA Tensor travels
  through a host copy there, as CuPy's arrays do, and is a CUDA Tensor again on arrival.
- distributed's ``cuda`` family (what UCX moves device to device): a CUDA Tensor is one
  device frame of its bytes (a Tensor itself, read through ``__cuda_array_interface__``),
  so that a torch or CuPy CUDA tensor wrapped with ``dl.from_dlpack`` crosses workers with
  no host copy; the receiver's Tensor views the device frame it got.
"""

_SERIALIZE = "distributed.protocol.serialize"
_CUDA = "distributed.protocol.cuda"
_TOKENIZE = "dask.tokenize"


def register_sizeof(sizeof):
    """The ``dask.sizeof`` entry point: Dask calls it with its ``sizeof`` dispatcher."""
    from dlinterop import Tensor
    from dlinterop._integrations.after_import import when_imported

    @sizeof.register(Tensor)
    def sizeof_tensor(t):
        return tensor_bytes(t)

    when_imported(_TOKENIZE, register_tokenize)
    when_imported(_SERIALIZE, register_serializers)
    when_imported(_CUDA, register_cuda_serializers)


def tensor_bytes(t):
    """Bytes of a Tensor's elements, an axis of stride 0 counted once (a broadcast view
    reads the same memory again); sub-byte types packed, rounded up to a byte."""
    count = 1
    for extent, stride in zip(t.shape, t.strides):
        count *= extent if stride != 0 or extent == 0 else 1
    return (count * t.dtype.bits * t.dtype.lanes + 7) // 8


def register_tokenize(tokenize):
    """Registers Tensor with ``dask.tokenize.normalize_token``."""
    from dlinterop import Tensor

    tokenize.normalize_token.register(Tensor)(normalize_tensor)


def normalize_tensor(t):
    """What Dask hashes for a Tensor: its bytes in C order (hashed as Dask hashes a NumPy
    array's), type and shape, for a Tensor in plain host memory. Any other (device memory,
    whose bytes the host cannot read; pinned or managed memory, which a GPU may still be
    writing) gets a token of its own (never the same twice), as Dask gives objects it cannot
    hash."""
    import uuid

    from dask.hashing import hash_buffer_hex  # type: ignore[import-not-found, unused-ignore]

    from dlinterop import _core

    if not _core._device_kind(t.device).host:
        return ("dlinterop.Tensor", uuid.uuid4().hex)
    _rebuild, (buffer, shape, dtype_triple, _readonly) = t.__reduce_ex__(5)
    return ("dlinterop.Tensor", hash_buffer_hex(memoryview(buffer)), dtype_triple, shape)


def register_serializers(serialize):
    """Registers Tensor with distributed's ``dask`` family (``serialize``: the module
    distributed.protocol.serialize)."""
    from dlinterop import Tensor

    serialize.dask_serialize.register(Tensor)(serialize_tensor)
    serialize.dask_deserialize.register(Tensor)(deserialize_tensor)


def serialize_tensor(t):
    """A host Tensor as (header, [its bytes, C order]): the buffer pickle protocol 5 would
    send out of band (a non-contiguous Tensor is copied into one first). A CUDA Tensor is
    copied to the host first (header["device"] says where it goes back to)."""
    from dlinterop import _core

    device = None
    if not _core._device_kind(t.device).host:
        device = str(t.device)
        t = t.to("cpu")
    _rebuild, (buffer, shape, dtype_triple, readonly) = t.__reduce_ex__(5)
    header = {
        "shape": list(shape),
        "dtype": list(dtype_triple),
        "readonly": readonly,
        "device": device,
    }
    return header, [memoryview(buffer)]


def deserialize_tensor(header, frames):
    """The Tensor over the frame received, checked as an unpickled one is (the header
    comes from another process), never copied but for one case: a read-only frame for a
    writable Tensor, as Dask does for NumPy arrays. Dask's TCP transport reads a small
    message's frames into one buffer, so the bytes can start at any address: the Tensor
    keeps them there, unaligned to their item size where they landed so, as NumPy's arrays
    (flags.aligned False) do."""
    from dlinterop import _core

    shape, dtype_triple = _header_layout(header)
    frame = _one_frame(frames)
    readonly = header.get("readonly")
    t = _core._tensor_over_frame(frame, shape, dtype_triple, readonly)  # checks it all
    if t.readonly and not readonly:
        t = _core._tensor_over_frame(bytearray(frame), shape, dtype_triple, readonly)
    device = header.get("device")
    return t if device is None else t.to(device)


def _header_layout(header):
    """(shape, (code, bits, lanes)) as a header from another process gives them; what they
    hold the core checks against the frame."""
    try:
        return tuple(header["shape"]), tuple(header["dtype"])
    except (KeyError, TypeError):
        raise ValueError(
            f"a dlinterop Tensor's header holds its 'shape' and 'dtype' as lists, not {header!r}"
        ) from None


def _one_frame(frames):
    if len(frames) != 1:
        raise ValueError(f"a dlinterop Tensor travels as one frame, not {len(frames)}")
    return frames[0]


def register_cuda_serializers(cuda):
    """Registers Tensor with distributed's ``cuda`` family (``cuda``: the module
    distributed.protocol.cuda)."""
    from dlinterop import Tensor

    cuda.cuda_serialize.register(Tensor)(cuda_serialize_tensor)
    cuda.cuda_deserialize.register(Tensor)(cuda_deserialize_tensor)


def cuda_serialize_tensor(t):
    """A CUDA Tensor as (header, [its bytes as a flat uint8 CUDA Tensor, C order]); a host
    Tensor is NotImplementedError, so that distributed takes its next family."""
    from dlinterop import _core

    if not _core._device_kind(t.device).cuda_gpu:
        raise NotImplementedError("the cuda family carries CUDA Tensors only")
    dtype = t.dtype
    if (dtype.bits * dtype.lanes) % 8:
        raise NotImplementedError(f"packed {dtype.name} elements go through the dask family")
    flat = t.reshape(-1)  # a copy, on the device, where not C order
    header = {
        "shape": list(t.shape),
        "dtype": list(dtype.__dlpack_data_type__()),
        "device": str(t.device),
    }
    return header, [flat.view(_core.uint8)]


def cuda_deserialize_tensor(header, frames):
    """The CUDA Tensor over the device frame received (anything with
    ``__cuda_array_interface__``: a Tensor, an RMM buffer, a Numba or CuPy array). The
    header comes from another process: its shape and type must take exactly the frame's
    bytes, checked before anything is made (as the dask family's are)."""
    import dlinterop as dl
    from dlinterop import _core

    shape, dtype_triple = _header_layout(header)
    flat = dl.asarray(_one_frame(frames))  # a view of the frame: nothing allocated
    dtype = _core._frame_dtype(shape, dtype_triple, flat.nbytes)
    if (dtype.bits * dtype.lanes) % 8:
        raise ValueError(f"packed {dtype.name} elements go through the dask family")
    if flat.ndim != 1 or flat.dtype != dl.uint8:
        flat = flat.reshape(-1).view(dl.uint8)
    return (
        flat.view(dtype).view(shape)
        if flat.shape[0]
        else dl.empty(shape, dtype, device=flat.device)
    )
