"""Cython typed memoryviews over dlinterop tensors (docs/cython.md): a module built on the
fly assigns `cdef float[:, ::1] v = t` and `cdef double[:, :] w = t`, reads and writes
through them, and the writes land in the tensor's memory.
"""

import importlib.util
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import dlinterop as dl

np = pytest.importorskip("numpy")
pytest.importorskip("Cython")

MODULE_SOURCE = textwrap.dedent("""
    # cython: language_level=3, boundscheck=True, wraparound=False
    from libc.stdint cimport uintptr_t


    def sum_and_double_f32(t):
        \"\"\"Sum of every element (read), then each element doubled (write); also the
        address of v[0, 0].\"\"\"
        cdef float[:, ::1] v = t
        cdef Py_ssize_t i, j
        cdef double total = 0
        for i in range(v.shape[0]):
            for j in range(v.shape[1]):
                total += v[i, j]
                v[i, j] = v[i, j] * 2
        address = <uintptr_t>&v[0, 0] if v.shape[0] and v.shape[1] else 0
        return total, address


    def add_one_f64(t):
        \"\"\"Any strides: returns the sum before the write, shape, byte strides and the
        address of w[0, 0].\"\"\"
        cdef double[:, :] w = t
        cdef Py_ssize_t i, j
        cdef double total = 0
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                total += w[i, j]
                w[i, j] += 1
        address = <uintptr_t>&w[0, 0] if w.shape[0] and w.shape[1] else 0
        return total, (w.shape[0], w.shape[1]), (w.strides[0], w.strides[1]), address


    def sum_const_f64(t):
        cdef const double[:, :] w = t
        cdef Py_ssize_t i, j
        cdef double total = 0
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                total += w[i, j]
        return total


    def keep_view_f32(t):
        cdef float[:, ::1] v = t
        return v
""")


@pytest.fixture(scope="session")
def memview_module(tmp_path_factory):
    """Cythonize and compile the module once per session (about 2 s on an idle 2-core
    machine; -O0 keeps the C compile short)."""
    build = tmp_path_factory.mktemp("typed_memoryview")
    pyx = build / "dl_memview.pyx"
    pyx.write_text(MODULE_SOURCE)
    c_file = build / "dl_memview.c"
    so_file = build / ("dl_memview" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(
        [sys.executable, "-m", "cython", "-3", str(pyx), "-o", str(c_file)],
        check=True,
        capture_output=True,
        text=True,
    )
    compiler = (sysconfig.get_config_var("CC") or "cc").split()
    out = subprocess.run(
        [
            *compiler,
            "-shared",
            "-fPIC",
            "-O0",
            "-w",
            "-I",
            sysconfig.get_paths()["include"],
            str(c_file),
            "-o",
            str(so_file),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    spec = importlib.util.spec_from_file_location("dl_memview", so_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_float_c_contiguous_memoryview_reads_and_writes(memview_module):
    t = dl.full((3, 4), 1.5, dtype="float32")
    total, address = memview_module.sum_and_double_f32(t)
    assert total == 1.5 * 12
    assert address == t.data_ptr
    assert np.array_equal(np.from_dlpack(t), np.full((3, 4), 3.0, dtype=np.float32))


def test_double_strided_memoryview_over_a_transposed_slice(memview_module, dl_layout):
    t, view = dl_layout("slice", dtype="float64")  # (2, 2, 3): take a 2-d strided piece
    t2 = dl.from_dlpack(np.from_dlpack(t)[1].T)  # (3, 2), byte strides (8, 64)
    expected_sum = float(view[1].sum())
    first = float(view[1, 0, 0])
    total, shape, strides, address = memview_module.add_one_f64(t2)
    assert total == expected_sum
    assert shape == (3, 2) and strides == (8, 64)
    assert address == t2.data_ptr
    assert np.array_equal(np.from_dlpack(t2), view[1].T)  # written in place
    assert view[1, 0, 0] == first + 1


def test_double_memoryview_over_a_contiguous_tensor(memview_module):
    t = dl.full((2, 5), 2.0, dtype="float64")
    total, shape, strides, address = memview_module.add_one_f64(t)
    assert total == 20.0 and shape == (2, 5) and strides == (40, 8)
    assert address == t.data_ptr
    assert np.array_equal(np.from_dlpack(t), np.full((2, 5), 3.0))


def test_zero_size_tensor_in_memoryview(memview_module):
    t = dl.zeros((3, 0), dtype="float32")
    assert memview_module.sum_and_double_f32(t) == (0.0, 0)


def test_c_contiguous_memoryview_refuses_a_strided_tensor(memview_module, dl_layout):
    t, _ = dl_layout("transpose")
    t2 = dl.from_dlpack(np.from_dlpack(t)[0])  # (2, 3) view of a transpose: not C order
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        memview_module.sum_and_double_f32(t2)


def test_memoryview_dtype_mismatch(memview_module):
    with pytest.raises(ValueError, match="dtype mismatch"):
        memview_module.sum_and_double_f32(dl.zeros((2, 2), dtype="float64"))


def test_memoryview_ndim_mismatch(memview_module):
    with pytest.raises(ValueError, match="wrong number of dimensions"):
        memview_module.add_one_f64(dl.zeros(4, dtype="float64"))


def test_read_only_tensor_needs_a_const_memoryview(memview_module):
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    with pytest.raises((BufferError, ValueError), match="read-only"):
        memview_module.add_one_f64(t)
    assert memview_module.sum_const_f64(t) == 15.0


def test_dtype_without_buffer_format_is_refused(memview_module):
    with pytest.raises((BufferError, ValueError), match="no format"):
        memview_module.sum_and_double_f32(dl.zeros((2, 2), dtype="bfloat16"))


def test_memoryview_keeps_the_tensor_alive(memview_module, live_counters):
    before = live_counters()
    t = dl.full((2, 2), 4.0, dtype="float32")
    view = memview_module.keep_view_f32(t)
    del t
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    assert view[1, 1] == 4.0
    del view
    assert live_counters() == before


def test_memoryview_over_imported_framework_memory(memview_module):
    """A tensor imported from another framework works the same: here NumPy's memory."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dl.from_dlpack(a)
    total, address = memview_module.sum_and_double_f32(t)
    assert total == 66.0 and address == a.ctypes.data
    assert np.array_equal(a, np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
