"""dl.Tensor: creation, attributes, layout, copies, the buffer protocol, pickling."""

import copy
import ctypes
import gc
import math
import pickle

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop.testing._frameworks.dtypes import numpy_shared_dtypes

ml_dtypes = pytest.importorskip("ml_dtypes")

ALL_NAMES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "complex32",
    "complex64",
    "complex128",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
    "float4_e2m1fn_x2",
]
NUMPY_NAMES = list(numpy_shared_dtypes())
ML_NAMES = [
    "bfloat16",
    "float8_e3m4",
    "float8_e4m3",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
PACKED_NAMES = ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float4_e2m1fn_x2"]
NO_BUFFER_FORMAT = ["bfloat16", "complex32"] + ML_NAMES[1:] + PACKED_NAMES
BUFFER_FORMATS = {
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

FULL_VALUES = {
    "bool": True,
    "int8": -128,
    "int16": -3,
    "int32": -3,
    "int64": -(2**62),
    "uint8": 255,
    "uint16": 7,
    "uint32": 7,
    "uint64": 2**64 - 1,
    "float16": -1.5,
    "float32": -1.5,
    "float64": -1.5,
    "complex64": 1.5 - 2j,
    "complex128": 1.5 - 2j,
}


def _raw(t):
    """The bytes of a C-contiguous CPU tensor."""
    return ctypes.string_at(t.data_ptr, t.nbytes)


def _write_pattern(t):
    """Fills a C-contiguous CPU tensor with a recognisable byte pattern; returns it."""
    pattern = bytes((i * 37 + 11) % 256 for i in range(t.nbytes))
    ctypes.memmove(t.data_ptr, pattern, t.nbytes)
    return pattern


def _packed_codes(raw, count, bits):
    """The `count` little bit-endian `bits`-bit codes packed in `raw`."""
    word = int.from_bytes(raw, "little")
    return [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(count)]


def _ml_code(name, value):
    return int(np.array([value], dtype=getattr(ml_dtypes, name)).view(np.uint8)[0])


# -- creation ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_empty_and_zeros_have_shape_dtype_and_c_strides(make, name):
    t = make((2, 3, 4), name)
    assert t.shape == (2, 3, 4)
    assert t.strides == (12, 4, 1)
    assert t.dtype is dl.dtype(name)
    assert t.device == "cpu"
    assert t.ndim == 3
    assert t.size == 24
    assert t.nbytes == math.ceil(24 * t.dtype.bits * t.dtype.lanes / 8)
    assert not t.readonly
    assert t.owner is None
    assert t.is_contiguous()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_zeros_is_all_zero_bytes(name):
    t = dl.zeros((3, 5), name)
    assert _raw(t) == bytes(t.nbytes)


def test_default_dtype_is_float32():
    assert dl.empty(3).dtype is dl.float32
    assert dl.zeros(3).dtype is dl.float32


@pytest.mark.parametrize("shape", [3, (3,), [3], (np.int64(3),)])
def test_shape_accepts_int_and_sequences_of_index(shape):
    assert dl.empty(shape).shape == (3,)


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_full_reads_back_through_numpy(name):
    value = FULL_VALUES[name]
    t = dl.full((2, 3), value, name)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(name)
    assert np.array_equal(a, np.full((2, 3), value, dtype=name))


@pytest.mark.parametrize("name", ML_NAMES)
def test_full_reads_back_through_ml_dtypes(name):
    value = 4.0 if name == "float8_e8m0fnu" else -1.5
    t = dl.full((2, 3), value, name)
    a = np.frombuffer(_raw(t), dtype=getattr(ml_dtypes, name))
    assert np.array_equal(a.astype(np.float32), np.full(6, value, np.float32))


def test_full_complex32_is_pairs_of_float16():
    t = dl.full(4, 1.5 - 2j, "complex32")
    assert np.array_equal(np.frombuffer(_raw(t), np.float16), [1.5, -2.0] * 4)


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_full_float4_packs_two_codes_per_byte(size):
    t = dl.full(size, 1.5, "float4_e2m1fn")
    assert t.nbytes == math.ceil(size * 4 / 8)
    assert _packed_codes(_raw(t), size, 4) == [_ml_code("float4_e2m1fn", 1.5)] * size


@pytest.mark.parametrize("size", [1, 3])
def test_full_float4_x2_fills_both_lanes(size):
    t = dl.full(size, 1.5, "float4_e2m1fn_x2")
    assert t.nbytes == size
    assert _packed_codes(_raw(t), 2 * size, 4) == [_ml_code("float4_e2m1fn", 1.5)] * (2 * size)


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float6_e3m2fn"])
@pytest.mark.parametrize("size", [4, 5])
def test_full_float6_packs_six_bit_codes(name, size):
    t = dl.full(size, 1.5, name)
    assert t.nbytes == math.ceil(size * 6 / 8)
    assert _packed_codes(_raw(t), size, 6) == [_ml_code(name, 1.5)] * size


@pytest.mark.parametrize("name", PACKED_NAMES)
@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 7, 9])
def test_packed_subbyte_nbytes_is_ceil_of_bits(name, size):
    dt = dl.dtype(name)
    t = dl.empty(size, name)
    assert t.nbytes == math.ceil(size * dt.bits * dt.lanes / 8)
    assert t.itemsize == 1


@pytest.mark.parametrize(
    "value, name", [(True, "bool"), (3, "int64"), (1.5, "float32"), (1.5 + 1j, "complex64")]
)
def test_full_infers_dtype_from_value(value, name):
    t = dl.full(2, value)
    assert t.dtype == name
    assert np.from_dlpack(t).tolist() == [value, value]


def test_full_out_of_range_integer_is_overflow_error():
    with pytest.raises(OverflowError):
        dl.full(1, 300, "int8")


# -- alignment ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("shape", [1, (3, 5), 1000])
def test_default_alignment_is_256(name, shape):
    assert dl.empty(shape, name).data_ptr % 256 == 0


@pytest.mark.parametrize("alignment", [64, 4096, 16, 8])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_custom_alignment(make, alignment):
    for _ in range(4):
        assert make(17, "float64", alignment=alignment).data_ptr % alignment == 0


def test_full_honours_alignment():
    assert dl.full(5, 1.0, alignment=4096).data_ptr % 4096 == 0


@pytest.mark.parametrize("alignment", [0, -1, 3, 12, 100, -256])
def test_alignment_not_power_of_two_is_value_error(alignment):
    with pytest.raises(ValueError):
        dl.empty(4, alignment=alignment)


@pytest.mark.parametrize(
    "name, alignment", [("float32", 2), ("float64", 4), ("complex128", 8), ("int16", 1)]
)
def test_alignment_smaller_than_itemsize_is_value_error(name, alignment):
    with pytest.raises(ValueError):
        dl.empty(4, name, alignment=alignment)


def test_alignment_one_is_fine_for_single_bytes():
    assert dl.empty(4, "int8", alignment=1).shape == (4,)


# -- bad shapes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", [-1, (2, -1), (-3, 0), (1,) * 65, (2**63,), (2**32, 2**32), (2**62, 4)]
)
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_bad_shape_is_value_error(make, shape):
    with pytest.raises(ValueError):
        make(shape)


@pytest.mark.parametrize("shape", [1.5, (2, 1.5), "ab", None, (2, None), object(), ((2,),)])
@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_non_int_shape_is_type_error(make, shape):
    with pytest.raises(TypeError):
        make(shape)


def test_64_dims_is_the_maximum():
    t = dl.zeros((1,) * 63 + (2,), "int8")
    assert t.ndim == 64
    assert t.shape == (1,) * 63 + (2,)
    assert np.from_dlpack(t).shape == t.shape


def test_bad_shape_for_full_is_value_error():
    with pytest.raises(ValueError):
        dl.full((2, -1), 1.0)


# -- memory limits ----------------------------------------------------------------------

MiB, GiB = 1 << 20, 1 << 30
MACHINE = {
    "MemTotal": 8 * GiB,
    "MemFree": 5 * GiB,
    "MemAvailable": 6 * GiB,
    "SwapTotal": 2 * GiB,
    "SwapFree": 1 * GiB,
}


def test_the_room_is_the_machines_available_memory_and_swap(machine):
    assert machine(MACHINE) == (7 * GiB, 10 * GiB)


@pytest.mark.parametrize(
    "swap_max, ceiling", [("0", 4 * GiB), (f"{GiB}", 5 * GiB), ("max", 6 * GiB)]
)
def test_a_cgroup_v2_limit_anywhere_above_binds(machine, swap_max, ceiling):
    # Available now: the limit less the usage, but for the inactive file cache, which the
    # kernel drops before it fails a charge. Ever: the limit and the swap it may use.
    room = machine(
        MACHINE,
        "0::/a/b\n",
        {
            "a/memory.max": f"{4 * GiB}\n",
            "a/memory.current": f"{3 * GiB}\n",
            "a/memory.stat": f"anon {2 * GiB}\ninactive_file {GiB}\n",
            "a/memory.swap.max": f"{swap_max}\n",
            "a/b/memory.max": "max\n",
            "a/b/memory.current": f"{3 * GiB}\n",
        },
    )
    assert room == (2 * GiB, ceiling)


@pytest.mark.parametrize("memsw, ceiling", [(None, 5 * GiB), (3 * GiB, 3 * GiB)])
def test_a_cgroup_v1_limit_binds(machine, memsw, ceiling):
    files = {
        "memory/job/memory.limit_in_bytes": f"{3 * GiB}\n",
        "memory/job/memory.usage_in_bytes": f"{GiB + 256 * MiB}\n",
        "memory/job/memory.stat": f"cache 0\ntotal_inactive_file {256 * MiB}\n",
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
        "memory/memory.usage_in_bytes": f"{4 * GiB}\n",
    }
    if memsw is not None:  # memory and swap together; absent without swap accounting
        files["memory/job/memory.memsw.limit_in_bytes"] = f"{memsw}\n"
    room = machine(MACHINE, "5:cpu,cpuacct:/\n4:memory:/job\n0::/\n", files)
    assert room == (2 * GiB, ceiling)


def test_a_containers_own_cgroup_binds_where_its_path_is_not_mounted(machine):
    # Without a cgroup namespace the container sees the host's path for its cgroup, and
    # its own cgroup mounted as the root.
    room = machine(
        MACHINE,
        "0::/system.slice/docker-1234.scope\n",
        {"memory.max": f"{GiB}\n", "memory.current": f"{512 * MiB}\n", "memory.swap.max": "0\n"},
    )
    assert room == (512 * MiB, GiB)


def test_nothing_is_known_without_proc(tmp_path):
    _core._read_memory_limits_from(str(tmp_path / "none"), str(tmp_path / "none"))
    try:
        assert _core._memory_room() == (None, None)
        assert dl.empty(128 * MiB, "uint8").nbytes == 128 * MiB
    finally:
        _core._read_memory_limits_from()


@pytest.mark.parametrize(
    "make",
    [
        lambda n: dl.empty(n, "uint8"),
        lambda n: dl.zeros(n // 8, "float64"),
        lambda n: dl.full(n, 1, "uint8"),
        lambda n: dl.from_dlpack(np.broadcast_to(np.zeros(1, np.uint8), (n,))).copy(),
    ],
)
def test_host_memory_beyond_the_ceiling_is_refused_before_malloc(machine, make):
    # malloc would have granted 512 MiB here (and, overcommitting, any size): the
    # processes the OOM killer ends when the pages are touched are often others.
    machine({**MACHINE, "MemTotal": 256 * MiB, "SwapTotal": 0})
    with pytest.raises(MemoryError, match=f"can never have more than {256 * MiB}"):
        make(512 * MiB)
    assert make(16 * MiB).nbytes == 16 * MiB  # too small to check


def test_pinned_memory_beyond_what_is_available_now_is_refused_before_cuda(machine):
    # Pinning takes the pages at once, as a shared segment does.
    machine({**MACHINE, "MemAvailable": 256 * MiB, "SwapFree": 0})
    with pytest.raises(MemoryError, match=f"cannot pin {512 * MiB} bytes of host memory"):
        dl.empty(512 * MiB, "uint8", device="cuda_host")


@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_a_terabyte_of_host_memory_is_a_memory_error(make):
    with pytest.raises(MemoryError, match="can never have more than"):
        make(1 << 40, "uint8")


# -- attributes -------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [0, 1, 4, 5, 8, 32])
def test_attributes_of_owned_tensor(ndim):
    shape = tuple(2 if i % 3 == 0 else 1 for i in range(ndim))
    t = dl.zeros(shape, "int16")
    assert t.shape == shape
    assert type(t.shape) is tuple and type(t.strides) is tuple
    assert len(t.strides) == ndim
    assert t.ndim == ndim
    assert t.size == math.prod(shape)
    assert t.itemsize == 2
    assert t.nbytes == 2 * t.size
    assert isinstance(t.data_ptr, int) and t.data_ptr != 0
    assert t.readonly is False
    assert t.owner is None
    assert t.dtype is dl.int16
    assert isinstance(t.device, dl.Device) and t.device == "cpu:0"


def test_attributes_of_imported_view():
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)[:, 1:, ::2]
    t = dl.from_dlpack(a)
    assert t.shape == (2, 2, 2)
    assert t.strides == (12, 4, 2)
    assert t.size == 8
    assert t.nbytes == 64
    assert t.itemsize == 8
    assert t.data_ptr == a.ctypes.data
    assert t.owner is not None
    assert t.readonly is False


def test_zero_d_tensor_attributes():
    t = dl.full((), 7, "int32")
    assert t.shape == () and t.strides == () and t.ndim == 0
    assert t.size == 1 and t.nbytes == 4
    with pytest.raises(TypeError):
        len(t)


def test_len_is_first_dimension():
    assert len(dl.empty((5, 2))) == 5


@pytest.mark.parametrize(
    "attr",
    [
        "shape",
        "strides",
        "dtype",
        "device",
        "ndim",
        "size",
        "nbytes",
        "itemsize",
        "data_ptr",
        "readonly",
        "readonly_reason",
        "owner",
    ],
)
def test_tensor_attributes_are_read_only(attr):
    t = dl.zeros((2, 3))
    with pytest.raises(AttributeError):
        setattr(t, attr, getattr(t, attr))


def test_owned_buffers_are_freed():
    gc.collect()
    before = dl.memory_stats()
    tensors = [dl.zeros((16, 16), "float64") for _ in range(5)]
    during = dl.memory_stats()
    assert during["live_buffers"] == before["live_buffers"] + 5
    assert during["live_bytes"] >= before["live_bytes"] + 5 * 16 * 16 * 8
    del tensors
    gc.collect()
    after = dl.memory_stats()
    assert after["live_buffers"] == before["live_buffers"]
    assert after["live_bytes"] == before["live_bytes"]


# -- is_contiguous ----------------------------------------------------------------------


def _base():
    return np.arange(60, dtype=np.float32).reshape(3, 4, 5)


LAYOUTS = {
    "c": (lambda: _base(), True),
    "zero_d": (lambda: np.array(1.0, np.float32), True),
    "offset_rows": (lambda: _base()[1:], True),
    "transposed": (lambda: _base().T, False),
    "step": (lambda: _base()[:, :, ::2], False),
    "negative": (lambda: _base()[::-1], False),
    "broadcast": (lambda: np.broadcast_to(np.arange(5, dtype=np.float32), (4, 5)), False),
    "zero_size_transposed": (lambda: np.empty((0, 3), np.float32).T, True),
    "zero_size_step": (lambda: _base()[:, :0, ::2], True),
    "size_one_odd_strides": (
        lambda: np.lib.stride_tricks.as_strided(
            np.zeros(64, np.float32), (1, 3, 1), (4 * 7, 4, 4 * 13)
        ),
        True,
    ),
    "broadcast_size_one": (lambda: np.broadcast_to(np.float32(2), (1, 1)), True),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_is_contiguous_follows_c_order(layout):
    make, expected = LAYOUTS[layout]
    assert dl.from_dlpack(make()).is_contiguous() is expected


@pytest.mark.parametrize("shape", [(0,), (3, 0), (2, 0, 1), (0, 0)])
def test_zero_size_tensor_is_contiguous(shape):
    assert dl.empty(shape).is_contiguous()
    assert dl.empty(shape).size == 0
    assert dl.empty(shape).nbytes == 0


# -- copy and to ------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_is_new_c_contiguous_buffer_with_same_values(layout):
    a = LAYOUTS[layout][0]()
    t = dl.from_dlpack(a)
    c = t.copy()
    assert c.is_contiguous()
    assert c.owner is None
    assert not c.readonly
    assert c.shape == t.shape and c.dtype is t.dtype
    if a.size > 0:
        assert c.data_ptr != t.data_ptr
    b = np.from_dlpack(c)
    assert b.flags.c_contiguous
    assert np.array_equal(b, a)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_copy_of_owned_tensor_keeps_bytes(name):
    t = dl.empty((3, 4), name)
    pattern = _write_pattern(t)
    c = t.copy()
    assert c.data_ptr != t.data_ptr
    assert c.dtype is t.dtype and c.shape == t.shape
    assert _raw(c) == pattern


def test_copy_does_not_alias():
    t = dl.zeros(4, "int32")
    c = t.copy()
    memoryview(c)[0] = 9
    assert memoryview(t)[0] == 0


def test_copy_to_cpu_device_keyword():
    t = dl.full(3, 2.0)
    c = t.copy(device="cpu")
    assert c.data_ptr != t.data_ptr and np.from_dlpack(c).tolist() == [2.0] * 3


def test_to_same_device_returns_self():
    t = dl.zeros(3)
    assert t.to("cpu") is t
    assert t.to(dl.Device("cpu")) is t
    assert t.to("cpu:0", copy=False) is t


def test_to_with_copy_true_copies():
    t = dl.full(3, 5, "int64")
    c = t.to("cpu", copy=True)
    assert c is not t
    assert c.data_ptr != t.data_ptr
    assert np.from_dlpack(c).tolist() == [5, 5, 5]


def test_to_cuda_without_gpu_raises_a_clear_error():
    if dl.cuda.is_available():
        pytest.skip("a GPU is present")
    t = dl.zeros(3)
    with pytest.raises(Exception, match="cuda") as info:
        t.to("cuda")
    assert not isinstance(info.value, (SystemError, AttributeError))
    with pytest.raises(dl.CopyError):
        t.to("cuda", copy=False)


def test_to_rejects_bad_copy_argument():
    with pytest.raises(TypeError):
        dl.zeros(3).to("cpu", copy="yes")


# -- buffer protocol --------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUFFER_FORMATS))
def test_memoryview_format_shape_strides(name):
    t = dl.zeros((2, 3), name)
    m = memoryview(t)
    assert m.format == BUFFER_FORMATS[name]
    assert m.shape == (2, 3)
    assert m.itemsize == t.itemsize
    assert m.strides == (3 * t.itemsize, t.itemsize)
    assert m.readonly is False
    assert m.nbytes == t.nbytes
    assert m.obj is t


def test_memoryview_is_writable_and_shares_memory():
    t = dl.zeros((2, 3), "int32")
    m = memoryview(t)
    m[1, 2] = 42
    assert np.from_dlpack(t)[1, 2] == 42


def test_memoryview_of_zero_d_tensor():
    m = memoryview(dl.full((), 3, "int64"))
    assert m.ndim == 0 and m.shape == () and m[()] == 3


def test_memoryview_of_strided_view_has_byte_strides():
    a = _base().transpose(2, 0, 1)[::2]
    m = memoryview(dl.from_dlpack(a))
    assert m.shape == a.shape
    assert m.strides == a.strides
    assert m.tolist() == a.tolist()


def test_readonly_tensor_gives_readonly_memoryview():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    m = memoryview(t)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 1.0
    with pytest.raises((TypeError, BufferError)):
        (ctypes.c_char * t.nbytes).from_buffer(t)


def test_np_asarray_is_zero_copy():
    t = dl.zeros((4, 5), "float64")
    a = np.asarray(t)
    assert a.ctypes.data == t.data_ptr
    assert a.flags.writeable
    a[2, 3] = 1.5
    assert memoryview(t)[2, 3] == 1.5


def test_np_asarray_of_readonly_tensor_is_readonly():
    a = np.broadcast_to(np.arange(3.0), (2, 3))
    t = dl.from_dlpack(a)
    b = np.asarray(t)
    assert b.ctypes.data == a.ctypes.data
    assert not b.flags.writeable
    assert b.strides == a.strides


@pytest.mark.parametrize("name", NO_BUFFER_FORMAT)
def test_buffer_protocol_refuses_types_without_a_format(name):
    with pytest.raises(BufferError):
        memoryview(dl.zeros(4, name))


# -- pickle -----------------------------------------------------------------------------

PROTOCOLS = [2, 3, 4, 5]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ALL_NAMES)
def test_pickle_round_trips_bytes_shape_dtype(name, protocol):
    t = dl.empty((3, 4), name)
    pattern = _write_pattern(t)
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert type(u) is dl.Tensor
    assert u.shape == (3, 4) and u.dtype is t.dtype and u.device == "cpu"
    assert not u.readonly
    assert _raw(u) == pattern


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 0, 1)])
def test_pickle_zero_d_and_zero_size(shape, protocol):
    t = dl.full(shape, 3, "int16")
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.shape == shape
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float4_e2m1fn", "complex128"])
def test_pickle_protocol_5_out_of_band_is_zero_copy(name):
    t = dl.empty((8, 8), name)
    pattern = _write_pattern(t)
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert isinstance(buffers[0], pickle.PickleBuffer)
    raw = buffers[0].raw()
    assert raw.nbytes == t.nbytes
    assert np.frombuffer(raw, np.uint8).ctypes.data == t.data_ptr
    assert pattern not in data  # the bytes travelled out of band
    u = pickle.loads(data, buffers=buffers)
    assert u.data_ptr == t.data_ptr
    assert _raw(u) == pattern


def test_pickle_protocol_5_in_band_copies():
    t = dl.full((4, 4), 2.5, "float64")
    data = pickle.dumps(t, protocol=5)
    assert len(data) > t.nbytes
    u = pickle.loads(data)
    assert u.data_ptr != t.data_ptr
    assert not u.readonly
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


def _address(b):
    return np.frombuffer(b, np.uint8).ctypes.data if len(b) else 0


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("elements", [3, 1 << 18, 1 << 22])
def test_pickle_in_band_bytes_give_an_aligned_writable_tensor(protocol, elements):
    t = dl.full((elements,), 1.5, "float32")
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.data_ptr % 256 == 0
    assert not u.readonly
    np.from_dlpack(u)[-1] = 7
    assert np.from_dlpack(t)[-1] == 1.5 and np.from_dlpack(u)[-1] == 7
    assert np.from_dlpack(u)[:-1].tolist() == [1.5] * (elements - 1)


@pytest.mark.parametrize("readonly", [False, True])
def test_rebuild_from_bytes_wraps_a_large_payload_whose_bytes_are_aligned(readonly):
    # The bytes object pickle made for this load, its tensor's bytes on a 256-byte boundary
    # after the padding: wrapped, not copied. A padding that misses the boundary: one copy.
    payload = bytes((1 << 20) + 256)
    pad = -_address(payload) % 256
    pattern = np.arange(len(payload) - pad, dtype=np.uint64).astype(np.uint8)
    ctypes.memmove(_address(payload) + pad, pattern.ctypes.data, pattern.nbytes)
    u = _core._rebuild_tensor_from_bytes(payload, (pattern.size,), (1, 8, 1), readonly, pad)
    assert u.data_ptr == _address(payload) + pad and u.owner is payload
    assert u.readonly is readonly
    assert np.array_equal(np.from_dlpack(u), pattern)
    missed = (pad + 1) % 256
    v = _core._rebuild_tensor_from_bytes(
        payload, (len(payload) - missed,), (1, 8, 1), readonly, missed
    )
    assert v.data_ptr % 256 == 0 and v.owner is not payload and v.readonly is readonly
    assert np.from_dlpack(v).tobytes() == payload[missed:]


def _readonly_tensor():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    a.flags.writeable = False
    t = dl.from_dlpack(a)
    assert t.readonly
    return t


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_readonly_survives_pickling(protocol):
    t = _readonly_tensor()
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.readonly
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


def test_readonly_survives_out_of_band_pickling():
    t = _readonly_tensor()
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert buffers[0].raw().readonly
    u = pickle.loads(data, buffers=buffers)
    assert u.readonly
    assert u.data_ptr == t.data_ptr


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("layout", ["transposed", "negative", "broadcast", "step"])
def test_pickle_of_strided_view_gives_contiguous_copy(layout, protocol):
    a = LAYOUTS[layout][0]()
    u = pickle.loads(pickle.dumps(dl.from_dlpack(a), protocol=protocol))
    assert u.is_contiguous()
    assert np.array_equal(np.from_dlpack(u), a)


def test_deepcopy_makes_an_independent_tensor():
    t = dl.full((2, 2), 1, "int8")
    u = copy.deepcopy(t)
    assert u.data_ptr != t.data_ptr
    assert np.array_equal(np.from_dlpack(u), np.from_dlpack(t))


# -- repr and construction --------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, name, text",
    [
        (
            (2, 3),
            "float32",
            "Tensor([[0.0, 0.0, 0.0],\n        [0.0, 0.0, 0.0]], shape=(2, 3), dtype=float32, "
            "device=cpu:0)",
        ),
        ((), "int64", "Tensor(0, shape=(), dtype=int64, device=cpu:0)"),
        (
            (4,),
            "bfloat16",
            "Tensor([0.0, 0.0, 0.0, 0.0], shape=(4,), dtype=bfloat16, device=cpu:0)",
        ),
        ((0, 2), "bool", "Tensor([], shape=(0, 2), dtype=bool, device=cpu:0)"),
    ],
)
def test_repr(shape, name, text):
    assert repr(dl.zeros(shape, name)) == text


@pytest.mark.parametrize("args, kwargs", [((), {}), ((2, 3), {}), ((), {"shape": (2,)})])
def test_tensor_cannot_be_constructed_directly(args, kwargs):
    with pytest.raises(TypeError):
        dl.Tensor(*args, **kwargs)


def test_readonly_reason_tells_an_assumption_from_a_flag():
    t = dl.zeros((6,))
    assert t.readonly_reason is None
    legacy = dl.from_dlpack(dl.to_dlpack(t))  # a legacy capsule cannot say
    assert legacy.readonly and legacy.readonly_reason == "legacy"
    assert repr(legacy).endswith("readonly='legacy')")
    flagged = dl.from_dlpack(dl.to_dlpack(legacy, versioned=True))  # says READ_ONLY
    assert flagged.readonly and flagged.readonly_reason == "flag"
    assert repr(flagged).endswith("readonly='flag')")
    assert legacy.copy().readonly_reason is None


@pytest.mark.parametrize(
    "export",
    [
        lambda t: dl.to_dlpack(t),
        lambda t: t.__dlpack__(),
        lambda t: t.__dlpack__(stream=-1),
        lambda t: t.__dlpack__(max_version=(0, 8), copy=False),
    ],
    ids=["to_dlpack", "__dlpack__", "stream=-1", "copy=False"],
)
def test_legacy_export_of_read_only_tensors_depends_on_the_reason(export):
    legacy = dl.from_dlpack(dl.to_dlpack(dl.zeros((2, 3))))
    again = dl.from_dlpack(export(legacy))
    assert again.data_ptr == legacy.data_ptr and again.readonly_reason == "legacy"
    flagged = dl.from_dlpack(dl.to_dlpack(legacy, versioned=True))
    with pytest.raises(BufferError, match="read-only"):
        export(flagged)
    # A copy is writable, so it travels as a legacy capsule.
    assert dl.from_dlpack(flagged.__dlpack__(copy=True)).readonly_reason == "legacy"
