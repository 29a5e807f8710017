"""What the tests of memory seen through a buffer share: the address of a buffer's first byte,
and a Tensor's bytes through its pickle buffer."""

import pickle

import pytest

np = pytest.importorskip("numpy")


def address_of(buffer):
    """Address of the first byte of a buffer-protocol object (the export is released
    before returning)."""
    with memoryview(buffer) as view:
        if view.nbytes == 0:
            return None
        return np.frombuffer(view.cast("B") if view.c_contiguous else view, np.uint8).ctypes.data


def tensor_bytes(t):
    """The bytes of a dl.Tensor in C order, through its pickle buffer: works for every
    dtype, including those NumPy and the buffer protocol cannot express."""
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    with buffers[0].raw() as raw:
        return raw.tobytes()
