"""What the tests of objects seen through the buffer protocol share: the address of a buffer's
first byte."""

import pytest

np = pytest.importorskip("numpy")


def address_of(buffer):
    """Address of the first byte of a buffer-protocol object (the export is released
    before returning)."""
    with memoryview(buffer) as view:
        if view.nbytes == 0:
            return None
        return np.frombuffer(view.cast("B") if view.c_contiguous else view, np.uint8).ctypes.data
