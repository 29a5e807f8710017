"""dlinterop for Dask, plugged in through Dask's own entry points (``import dlinterop``
never imports Dask; Dask imports this module when it starts).

- ``dask.sizeof``: a Tensor counts the bytes of its elements, as Dask counts a NumPy array
  (a broadcast axis, stride 0, once), so that Dask's memory limits, spilling and transfer
  estimates see dlinterop data.
"""


def register_sizeof(sizeof):
    """The ``dask.sizeof`` entry point: Dask calls it with its ``sizeof`` dispatcher."""
    from dlinterop import Tensor

    @sizeof.register(Tensor)
    def sizeof_tensor(t):
        return tensor_bytes(t)


def tensor_bytes(t):
    """Bytes of a Tensor's elements, an axis of stride 0 counted once (a broadcast view
    reads the same memory again); sub-byte types packed, rounded up to a byte."""
    count = 1
    for extent, stride in zip(t.shape, t.strides):
        count *= extent if stride != 0 or extent == 0 else 1
    return (count * t.dtype.bits * t.dtype.lanes + 7) // 8
