"""The buffer export of created Tensors: the format of every dtype (or the refusal of one the
buffer protocol has no format for), the requests a Tensor grants and refuses, one-axis
strides, and exports released."""

import ctypes
import sys

import numpy as np
import pytest

import dlinterop as dl

from creation_cases import ALL_NAMES

ml_dtypes = pytest.importorskip("ml_dtypes")


# -- the buffer export -------------------------------------------------------------------


FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "complex64": "Zf",
    "complex128": "Zd",
}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_buffer_format_of_every_dtype(name):
    t = dl.zeros((2, 3), name)
    if name not in FORMATS:
        with pytest.raises(BufferError, match=f"no format for {name}; use DLPack"):
            memoryview(t)
        return
    m = memoryview(t)
    assert (m.format, m.itemsize, m.shape, m.strides) == (
        FORMATS[name],
        t.itemsize,
        (2, 3),
        (3 * t.itemsize, t.itemsize),
    )
    assert m.nbytes == t.nbytes and not m.readonly
    assert np.asarray(t).dtype == np.dtype(name)


PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_ND, PyBUF_STRIDES = 0, 0x1, 0x8, 0x18
PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS = 0x38, 0x58, 0x98


def _get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, flags), released at once: None, or the error it raised."""
    view = ctypes.create_string_buffer(256)  # room for a Py_buffer
    try:
        ctypes.pythonapi.PyObject_GetBuffer(ctypes.py_object(obj), view, flags)
    except Exception as error:  # noqa: BLE001 - returned
        return type(error), str(error)
    ctypes.pythonapi.PyBuffer_Release(view)
    return None


def test_buffer_requests_and_their_refusals():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = dl.asarray(a[::2, ::-3])
    m = memoryview(t)
    assert m.strides == (48, -12) and m.tolist() == a[::2, ::-3].tolist()
    not_c = (BufferError, "tensor is not C-contiguous")
    assert _get_buffer(t, PyBUF_STRIDES) is None
    assert _get_buffer(t, PyBUF_SIMPLE) == not_c
    assert _get_buffer(t, PyBUF_ND) == not_c
    assert _get_buffer(t, PyBUF_C_CONTIGUOUS) == not_c
    assert _get_buffer(t, PyBUF_ANY_CONTIGUOUS) == (BufferError, "tensor is not contiguous")
    c = dl.zeros((2, 3), "int16")
    assert _get_buffer(c, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) is None
    assert _get_buffer(c, PyBUF_F_CONTIGUOUS) == (BufferError, "tensor is not Fortran-contiguous")
    assert _get_buffer(dl.zeros(3), PyBUF_F_CONTIGUOUS) is None
    ro = a.copy()
    ro.flags.writeable = False
    r = dl.asarray(ro)
    assert r.readonly and memoryview(r).readonly
    assert _get_buffer(r, PyBUF_WRITABLE) == (BufferError, "tensor is read-only")
    assert not np.asarray(r).flags.writeable
    assert np.asarray(dl.full((), 5, "int16")).tolist() == 5
    assert _get_buffer(dl.zeros(2, "bfloat16"), PyBUF_SIMPLE) == (
        BufferError,
        "the buffer protocol has no format for bfloat16; use DLPack (from_dlpack) to exchange it",
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_one_axis_buffers_and_their_strides(name):
    # A contiguous axis has no strides allocated for it (they point at the item size);
    # a strided or reversed one has them computed, as every other layout.
    t = dl.arange(6, dtype=name) if name != "bool" else dl.ones(6, "bool")
    for view, step in ((t, 1), (t[::2], 2), (t[::-1], -1), (t[1:1], 1)):
        m = memoryview(view)
        assert (m.shape, m.strides) == ((len(view),), (step * t.itemsize,))
        assert m.nbytes == view.nbytes and np.asarray(view).tolist() == view.tolist()
        for flags in (PyBUF_SIMPLE, PyBUF_ND, PyBUF_STRIDES, PyBUF_C_CONTIGUOUS):
            refused = (
                None
                if step == 1 or flags == PyBUF_STRIDES
                else (BufferError, "tensor is not C-contiguous")
            )
            assert _get_buffer(view, flags) == refused
        m.release()


def test_buffer_exports_are_released():
    t = dl.arange(12, dtype="float64")
    before = sys.getrefcount(t)
    views = [memoryview(t) for _ in range(10)]
    arrays = [np.asarray(t) for _ in range(10)]
    assert sys.getrefcount(t) > before
    for v in views:
        v.release()
    del views, arrays
    assert sys.getrefcount(t) == before
