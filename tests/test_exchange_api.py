"""The DLPack 1.3 C exchange API (SPEC 8 and 11).

Producer: dlinterop's own table, published on dl.Tensor, called through ctypes and from a
C consumer compiled on the fly (tests/c_exchange_consumer.c). Consumer: dl.from_dlpack
importing PyTorch tensors, tvm-ffi tensors and forged producers through their tables, and
falling back to __dlpack__ when a table is absent or unusable. Peer consumers (tvm-ffi)
taking dl.Tensors through dlinterop's table.

ctypes prototypes: the functions that touch Python objects are called through PYFUNCTYPE,
so the GIL is held and an exception the callee leaves set is raised by ctypes, as a C
consumer would find it with PyErr_Occurred. The allocator and the stream query are pure C
and are called through CFUNCTYPE (GIL released), as a consumer on any thread would.
"""

import builtins
import ctypes
import gc
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from ctypes import (
    CFUNCTYPE,
    POINTER,
    PYFUNCTYPE,
    Structure,
    byref,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_void_p,
    py_object,
)

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from forge import (
    DELETER_VERSIONED,
    READ_ONLY,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
    c_strides,
    capsule_name,
    make_capsule,
)

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

HERE = os.path.dirname(os.path.abspath(__file__))
API_NAME = "dlpack_exchange_api"
CPU, CUDA = 1, 2


# --------------------------------------------------------------------------------------
# The table's ABI (SPEC 11), on top of forge's DLPack structs
# --------------------------------------------------------------------------------------

class DLPackExchangeAPIHeader(Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [
    ("version", DLPackVersion),
    ("prev_api", POINTER(DLPackExchangeAPIHeader)),
]


class DLPackExchangeAPI(Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", c_void_p),
        ("managed_tensor_from_py_object_no_sync", c_void_p),
        ("managed_tensor_to_py_object_no_sync", c_void_p),
        ("dltensor_from_py_object_no_sync", c_void_p),
        ("current_work_stream", c_void_p),
    ]


FUNCTIONS = [name for name, _ in DLPackExchangeAPI._fields_[1:]]
assert ctypes.sizeof(DLPackExchangeAPI) == 16 + 5 * 8

MANAGED_OUT = POINTER(POINTER(DLManagedTensorVersioned))
SET_ERROR = CFUNCTYPE(None, c_void_p, c_char_p, c_char_p)
ALLOCATOR = CFUNCTYPE(c_int, POINTER(DLTensor), MANAGED_OUT, c_void_p, SET_ERROR)
FROM_PY = PYFUNCTYPE(c_int, c_void_p, MANAGED_OUT)
TO_PY = PYFUNCTYPE(c_int, POINTER(DLManagedTensorVersioned), POINTER(c_void_p))
VIEW = PYFUNCTYPE(c_int, c_void_p, POINTER(DLTensor))
CURRENT_STREAM = CFUNCTYPE(c_int, c_int32, c_int32, POINTER(c_void_p))
# A producer's from_py implemented in Python, for forged tables.
FROM_PY_CALLBACK = CFUNCTYPE(c_int, c_void_p, MANAGED_OUT)

# Private function objects, so that no other test's argtypes on ctypes.pythonapi matter.
_capsule_pointer = PYFUNCTYPE(c_void_p, py_object, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_py_decref = PYFUNCTYPE(None, c_void_p)(("Py_DecRef", ctypes.pythonapi))


def table_address(cls):
    return _capsule_pointer(cls.__dlpack_c_exchange_api__, API_NAME.encode())


def table_of(cls):
    return DLPackExchangeAPI.from_address(table_address(cls))


DL_API = table_of(dl.Tensor)
allocator = ALLOCATOR(DL_API.managed_tensor_allocator)
from_py = FROM_PY(DL_API.managed_tensor_from_py_object_no_sync)
to_py = TO_PY(DL_API.managed_tensor_to_py_object_no_sync)
view = VIEW(DL_API.dltensor_from_py_object_no_sync)
current_stream = CURRENT_STREAM(DL_API.current_work_stream)


def take_object(address):
    """The object behind a new reference returned as a void*, owning that reference."""
    obj = ctypes.cast(address, py_object).value
    _py_decref(address)
    return obj


def dltensor_layout(dl_tensor):
    """(shape, strides) of a ctypes DLTensor; None for NULL arrays."""
    n = dl_tensor.ndim
    shape = tuple(dl_tensor.shape[:n]) if dl_tensor.shape else None
    strides = tuple(dl_tensor.strides[:n]) if dl_tensor.strides else None
    return shape, strides


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def c_consumer(tmp_path_factory):
    """tests/c_exchange_consumer.c, compiled against Python's and dlinterop's headers."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    build = tmp_path_factory.mktemp("c_exchange_consumer")
    target = build / ("c_exchange_consumer" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [*cc, "-shared", "-fPIC", "-O1", "-Wall",
           "-I", sysconfig.get_paths()["include"], "-I", dl.get_include(),
           os.path.join(HERE, "c_exchange_consumer.c"), "-o", str(target)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    spec = importlib.util.spec_from_file_location("c_exchange_consumer", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readonly_tensor():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    array.flags.writeable = False
    t = dl.from_dlpack(array)
    assert t.readonly
    return t


# Every forged table and managed tensor a test hands to dlinterop stays alive here: the
# consumer caches table addresses per type for the life of the process.
_KEEP = []


class ManagedFactory:
    """Versioned managed tensors over ctypes float32 buffers; counts deleter calls."""

    def __init__(self, version=(1, 3)):
        self.version = version
        self.deleted = 0
        self.made = []
        self.deleter = DELETER_VERSIONED(self._delete)
        _KEEP.append(self)

    def _delete(self, _managed):
        self.deleted += 1

    def make(self):
        data = (c_float * 4)(1, 2, 3, 4)
        shape = (c_int64 * 1)(4)
        m = DLManagedTensorVersioned()
        m.version.major, m.version.minor = self.version
        m.deleter = self.deleter
        t = m.dl_tensor
        t.data = ctypes.addressof(data)
        t.device.device_type, t.device.device_id = CPU, 0
        t.ndim = 1
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.shape = ctypes.cast(shape, POINTER(c_int64))
        self.made.append((m, data, shape))
        return m


class ForgedTable:
    """A producer's exchange table built with ctypes; its from_py counts its calls and hands
    out a fresh managed tensor. Other functions are NULL unless given."""

    def __init__(self, version=(1, 3), *, from_py=True, name=API_NAME):
        self.calls = 0
        self.factory = ManagedFactory()
        self._callback = FROM_PY_CALLBACK(self._export)
        self.api = DLPackExchangeAPI()
        self.api.header.version.major, self.api.header.version.minor = version
        if from_py:
            self.api.managed_tensor_from_py_object_no_sync = ctypes.cast(
                self._callback, c_void_p).value
        self.address = ctypes.addressof(self.api)
        self.capsule = make_capsule(self.address, name)
        _KEEP.append(self)

    def _export(self, _py_object, out):
        self.calls += 1
        out[0] = ctypes.pointer(self.factory.make())
        return 0

    def last_data(self):
        return ctypes.addressof(self.factory.made[-1][1])


def producer_type(**attributes):
    """A Python DLPack producer over a NumPy array that counts its __dlpack__ calls; the
    keyword arguments become class attributes (the exchange-table spellings)."""

    def __init__(self, array=None):
        self.array = np.arange(4, dtype=np.float32) if array is None else array

    def __dlpack__(self, **kwargs):
        type(self).dlpack_calls += 1
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (CPU, 0)

    namespace = {"__init__": __init__, "__dlpack__": __dlpack__,
                 "__dlpack_device__": __dlpack_device__, "dlpack_calls": 0, **attributes}
    cls = type("Producer", (), namespace)
    _KEEP.append(cls)
    return cls


# --------------------------------------------------------------------------------------
# Producer: the table published on dl.Tensor
# --------------------------------------------------------------------------------------

def test_table_is_a_capsule_on_the_type():
    assert "__dlpack_c_exchange_api__" in vars(dl.Tensor)
    capsule = dl.Tensor.__dlpack_c_exchange_api__
    assert type(capsule).__name__ == "PyCapsule"
    assert capsule_name(capsule) == API_NAME
    assert dl.Tensor.__dlpack_c_exchange_api__ is capsule
    assert dl.zeros((2,)).__dlpack_c_exchange_api__ is capsule


def test_dlpack_1_2_spelling_is_the_same_table_as_an_int():
    address = dl.Tensor.__c_dlpack_exchange_api__
    assert type(address) is int
    assert address == table_address(dl.Tensor) != 0


def test_table_header_is_1_3_with_all_five_functions():
    assert (DL_API.header.version.major, DL_API.header.version.minor) == (1, 3)
    assert not DL_API.header.prev_api
    for name in FUNCTIONS:
        assert getattr(DL_API, name), f"{name} is NULL"


# ---- managed_tensor_allocator ---------------------------------------------------------

ALLOCATIONS = {
    "0-d float32": ((), (2, 32, 1)),
    "zero-size float32": ((3, 0, 2), (2, 32, 1)),
    "3-d float32": ((2, 3, 4), (2, 32, 1)),
    "int8": ((5, 7), (0, 8, 1)),
    "bfloat16": ((3, 5), (4, 16, 1)),
    "float4_e2m1fn_x2": ((3, 5), (17, 4, 2)),
    "complex128 1-d": ((9,), (5, 128, 1)),
}


def call_allocator(shape, dtype, device=(CPU, 0), *, ndim=None, null_shape=False,
                   strides=None):
    """Calls the allocator; returns (rc, managed pointer or None, SetError calls)."""
    errors = []
    error_ctx = 0x5EED

    def record(ctx, kind, message):
        errors.append((ctx, kind.decode(), message.decode()))

    set_error = SET_ERROR(record)
    shape_array = (c_int64 * max(len(shape), 1))(*shape)
    strides_array = None if strides is None else (c_int64 * len(strides))(*strides)
    prototype = DLTensor()
    prototype.device.device_type, prototype.device.device_id = device
    prototype.ndim = len(shape) if ndim is None else ndim
    prototype.dtype.code, prototype.dtype.bits, prototype.dtype.lanes = dtype
    if not null_shape:
        prototype.shape = ctypes.cast(shape_array, POINTER(c_int64))
    if strides_array is not None:
        prototype.strides = ctypes.cast(strides_array, POINTER(c_int64))
    out = POINTER(DLManagedTensorVersioned)()
    rc = allocator(byref(prototype), byref(out), error_ctx, set_error)
    for ctx, _, _ in errors:
        assert ctx == error_ctx, "SetError must receive the caller's error_ctx"
    return rc, (out if out else None), [(kind, message) for _, kind, message in errors]


def packed_nbytes(shape, dtype):
    count = int(np.prod(shape, dtype=np.int64))
    return -(-count * dtype[1] * dtype[2] // 8)


@pytest.mark.parametrize("shape, dtype", ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_allocator_gives_aligned_c_contiguous_tensor(shape, dtype, live_counters):
    before = live_counters()
    rc, out, errors = call_allocator(shape, dtype)
    assert (rc, errors) == (0, [])
    m = out.contents
    t = m.dl_tensor
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    assert (t.device.device_type, t.device.device_id) == (CPU, 0)
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == dtype
    assert t.ndim == len(shape)
    if shape:
        assert dltensor_layout(t) == (shape, c_strides(shape))
    else:
        assert dltensor_layout(t) == (None, None)
    assert t.byte_offset == 0
    assert t.data % 256 == 0
    nbytes = packed_nbytes(shape, dtype)
    ctypes.memset(t.data, 0x5A, nbytes)  # the whole extent is writable
    now = live_counters()
    assert now["live_buffers"] == before["live_buffers"] + 1
    assert now["live_bytes"] == before["live_bytes"] + nbytes
    assert m.deleter
    m.deleter(out)
    assert live_counters() == before


def test_allocator_ignores_prototype_strides():
    rc, out, errors = call_allocator((4, 3), (2, 32, 1), strides=(1, 4))
    assert (rc, errors) == (0, [])
    assert dltensor_layout(out.contents.dl_tensor) == ((4, 3), (3, 1))
    out.contents.deleter(out)


def test_allocated_tensor_imports_as_an_owning_writable_tensor(live_counters):
    before = live_counters()
    rc, out, _ = call_allocator((2, 3), (2, 32, 1))
    assert rc == 0
    data = out.contents.dl_tensor.data
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    t = take_object(address.value)
    assert type(t) is dl.Tensor
    assert (t.shape, t.dtype, t.data_ptr, t.readonly) == ((2, 3), "float32", data, False)
    np.asarray(t)[...] = 7
    assert np.asarray(t).sum() == 42
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    del t
    assert live_counters() == before


ALLOCATION_ERRORS = {
    "opaque handle dtype": (dict(shape=(2, 3), dtype=(3, 8, 1)), "ValueError"),
    "lanes 4": (dict(shape=(2, 3), dtype=(2, 32, 4)), "ValueError"),
    "negative dim": (dict(shape=(2, -1), dtype=(2, 32, 1)), "ValueError"),
    "ndim 65": (dict(shape=(1,) * 65, dtype=(2, 32, 1)), "ValueError"),
    "ndim -1": (dict(shape=(2,), dtype=(2, 32, 1), ndim=-1), "ValueError"),
    "NULL shape": (dict(shape=(2, 3), dtype=(2, 32, 1), null_shape=True), "ValueError"),
    "overflowing shape": (dict(shape=(2**62, 2**62), dtype=(2, 32, 1)), "ValueError"),
}


@pytest.mark.parametrize("kwargs, kind", ALLOCATION_ERRORS.values(), ids=ALLOCATION_ERRORS.keys())
def test_allocator_reports_bad_prototypes_through_set_error(kwargs, kind):
    rc, out, errors = call_allocator(**kwargs)
    assert rc == -1
    assert out is None
    assert len(errors) == 1
    assert errors[0][0] == kind
    assert "dlinterop" in errors[0][1]


@pytest.mark.skipif(dl.cuda.is_available(), reason="needs a machine without a usable GPU")
@pytest.mark.parametrize("device", [(CUDA, 0), (7, 0)], ids=["cuda", "vulkan"])
def test_allocator_reports_unreachable_device_through_set_error(device):
    rc, out, errors = call_allocator((2, 3), (2, 32, 1), device)
    assert rc == -1
    assert out is None
    assert len(errors) == 1
    kind, message = errors[0]
    assert issubclass(getattr(builtins, kind), Exception)
    assert "device" in message


# ---- managed_tensor_from_py_object_no_sync --------------------------------------------

def export(obj):
    out = POINTER(DLManagedTensorVersioned)()
    rc = from_py(id(obj), byref(out))
    return rc, out


def test_owning_export_takes_a_reference_until_deleted(live_counters):
    t = dl.from_dlpack(np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2])
    refs = sys.getrefcount(t)
    before = live_counters()
    rc, out = export(t)
    assert rc == 0
    m = out.contents
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags == 0
    assert m.dl_tensor.data + m.dl_tensor.byte_offset == t.data_ptr
    assert dltensor_layout(m.dl_tensor) == (t.shape, t.strides)
    assert (m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits) == (0, 16)
    assert sys.getrefcount(t) == refs + 1
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    m.deleter(out)
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_owning_export_of_read_only_tensor_sets_read_only():
    t = readonly_tensor()
    rc, out = export(t)
    assert rc == 0
    assert out.contents.flags & READ_ONLY
    out.contents.deleter(out)


def test_owning_export_of_0d_tensor_has_null_shape_and_strides():
    t = dl.full((), 3.5, dtype="float64")
    rc, out = export(t)
    assert rc == 0
    assert out.contents.dl_tensor.ndim == 0
    assert dltensor_layout(out.contents.dl_tensor) == (None, None)
    out.contents.deleter(out)


@pytest.mark.parametrize("obj", [[1, 2], np.arange(3)], ids=["list", "ndarray"])
def test_owning_export_of_other_objects_sets_type_error(obj):
    out = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        from_py(id(obj), byref(out))
    assert not out


def test_owning_export_of_other_objects_fails_without_output():
    # The part of the contract that holds today (see the strict xfail above): -1, no crash.
    obj = [1, 2]
    out = POINTER(DLManagedTensorVersioned)()
    try:
        rc = from_py(id(obj), byref(out))
    except TypeError:
        rc = -1
    assert rc == -1
    assert not out


# ---- managed_tensor_to_py_object_no_sync ----------------------------------------------

def test_import_steals_and_returns_a_new_tensor_on_the_same_memory(live_counters):
    t = dl.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3).T)
    refs = sys.getrefcount(t)
    before = live_counters()
    rc, out = export(t)
    assert rc == 0
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    u = take_object(address.value)
    assert sys.getrefcount(u) == 2, "the import must return exactly one new reference"
    assert type(u) is dl.Tensor and u is not t
    assert (u.data_ptr, u.shape, u.strides, u.dtype) == (t.data_ptr, t.shape, t.strides, t.dtype)
    assert not u.readonly
    assert sys.getrefcount(t) == refs + 1
    del u
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_import_keeps_read_only():
    t = readonly_tensor()
    rc, out = export(t)
    address = c_void_p()
    assert to_py(out, byref(address)) == 0
    assert take_object(address.value).readonly


def test_import_of_foreign_tensor_calls_its_deleter_once():
    factory = ManagedFactory()
    m = factory.make()
    address = c_void_p()
    assert to_py(ctypes.pointer(m), byref(address)) == 0
    u = take_object(address.value)
    assert u.data_ptr == ctypes.addressof(factory.made[-1][1])
    assert list(np.asarray(u)) == [1, 2, 3, 4]
    assert factory.deleted == 0
    del u
    gc.collect()
    assert factory.deleted == 1


def _import_rejected(version):
    factory = ManagedFactory(version=version)
    m = factory.make()
    address = c_void_p()
    return factory, address, (lambda: to_py(ctypes.pointer(m), byref(address)))


def test_import_steals_a_tensor_it_rejects():
    factory, address, call = _import_rejected((2, 0))
    try:
        rc = call()
    except BufferError:
        rc = -1
    assert rc == -1
    assert not address.value
    assert factory.deleted == 1


def test_import_of_unsupported_version_sets_buffer_error():
    factory, _, call = _import_rejected((2, 0))
    with pytest.raises(BufferError, match="major version"):
        call()
    assert factory.deleted == 1


# ---- dltensor_from_py_object_no_sync --------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: dl.from_dlpack(np.arange(24, dtype=np.float64).reshape(2, 3, 4)[:, 1:, ::2]),
    lambda: dl.full((), 1, dtype="int32"),
    lambda: dl.empty((0, 5), dtype="uint8"),
    readonly_tensor,
], ids=["strided", "0-d", "zero-size", "read-only"])
def test_view_fills_a_non_owning_dltensor(make, live_counters):
    t = make()
    refs = sys.getrefcount(t)
    before = live_counters()
    out = DLTensor()
    assert view(id(t), byref(out)) == 0
    assert out.data + out.byte_offset == t.data_ptr
    assert (out.device.device_type, out.device.device_id) == (CPU, 0)
    assert (out.dtype.code, out.dtype.bits, out.dtype.lanes) == t.dtype.__dlpack_data_type__()
    assert out.ndim == t.ndim
    shape, strides = dltensor_layout(out)
    if t.ndim:
        assert (shape, strides) == (t.shape, t.strides)
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_view_of_other_objects_sets_type_error():
    obj = [1, 2]
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        view(id(obj), byref(DLTensor()))


# ---- current_work_stream --------------------------------------------------------------

def test_current_work_stream_for_cpu_is_null():
    stream = c_void_p(0xDEAD)
    assert current_stream(CPU, 0, byref(stream)) == 0
    assert stream.value is None


# --------------------------------------------------------------------------------------
# A compiled C consumer of dlinterop's table
# --------------------------------------------------------------------------------------

def test_c_consumer_reads_the_header(c_consumer):
    assert c_consumer.header(dl.zeros((1,))) == (1, 3, True, True)


def test_c_consumer_round_trips_a_tensor(c_consumer, live_counters):
    t = dl.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 4)[1:])
    refs = sys.getrefcount(t)
    before = live_counters()
    u = c_consumer.round_trip(t)
    assert type(u) is dl.Tensor and u is not t
    assert (u.data_ptr, u.shape, u.strides, u.dtype) == (t.data_ptr, t.shape, t.strides, t.dtype)
    assert sys.getrefcount(u) == 2
    np.asarray(u)[0, 0] = -1
    assert np.asarray(t)[0, 0] == -1
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del u
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_c_consumer_round_trip_keeps_read_only(c_consumer):
    t = readonly_tensor()
    assert c_consumer.export_info(t)[:2] == ((1, 3), READ_ONLY)
    assert c_consumer.round_trip(t).readonly


def test_c_consumer_sees_type_error_for_other_objects(c_consumer):
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        c_consumer.round_trip([1, 2], dl.zeros((1,)))


@pytest.mark.parametrize("shape, dtype", ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_c_consumer_allocates_through_the_table(c_consumer, shape, dtype, live_counters):
    before = live_counters()
    t = c_consumer.allocate(dl.zeros((1,)), shape, dtype, (CPU, 0))
    assert type(t) is dl.Tensor
    assert t.shape == shape
    assert t.dtype.__dlpack_data_type__() == dtype
    assert t.strides == c_strides(shape)
    assert t.data_ptr % 256 == 0
    assert not t.readonly
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    del t
    assert live_counters() == before


@pytest.mark.parametrize("shape, dtype, device, kind", [
    ((2, 3), (3, 8, 1), (CPU, 0), ValueError),
    ((2, -1), (2, 32, 1), (CPU, 0), ValueError),
    ((1,) * 65, (2, 32, 1), (CPU, 0), ValueError),
    pytest.param((2, 3), (2, 32, 1), (CUDA, 0), Exception, marks=pytest.mark.skipif(
        dl.cuda.is_available(), reason="needs a machine without a usable GPU")),
], ids=["bad dtype", "negative dim", "ndim 65", "cuda without gpu"])
def test_c_consumer_allocator_errors_raise_the_named_kind(c_consumer, shape, dtype, device, kind):
    with pytest.raises(kind, match="dlinterop allocator") as info:
        c_consumer.allocate(dl.zeros((1,)), shape, dtype, device)
    assert type(info.value) is not SystemError


def test_c_consumer_views_a_tensor(c_consumer):
    t = dl.from_dlpack(np.arange(24, dtype=np.uint8).reshape(4, 6)[::2, 1:])
    info = c_consumer.view(t)
    assert info["data"] + info["byte_offset"] == t.data_ptr
    assert info["device"] == (CPU, 0)
    assert info["dtype"] == (1, 8, 1)
    assert (info["ndim"], info["shape"], info["strides"]) == (2, t.shape, t.strides)


def test_c_consumer_gets_null_cpu_stream(c_consumer):
    assert c_consumer.current_stream(dl.zeros((1,)), CPU, 0) == 0


# --------------------------------------------------------------------------------------
# Consumer: dl.from_dlpack through a producer's table
# --------------------------------------------------------------------------------------

def test_from_dlpack_imports_through_a_producer_table():
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    t = dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (1, 0)
    assert t.data_ptr == table.last_data()
    assert list(np.asarray(t)) == [1, 2, 3, 4]
    assert table.factory.deleted == 0
    del t
    gc.collect()
    assert table.factory.deleted == 1


def test_from_dlpack_accepts_any_1_x_minor_version():
    table = ForgedTable(version=(1, 7))
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    assert dl.from_dlpack(cls()).data_ptr == table.last_data()
    assert (table.calls, cls.dlpack_calls) == (1, 0)


def test_table_is_looked_up_on_the_type_not_the_instance(c_consumer):
    cls = producer_type()
    obj = cls()
    obj.__dlpack_c_exchange_api__ = c_consumer.raising_table()
    assert dl.from_dlpack(obj).data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1


def test_table_is_cached_per_type():
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    for _ in range(3):
        dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (3, 0)


def test_cache_follows_changes_to_the_type():
    """The cache is keyed on the type's version tag: assigning to a class attribute (as a
    monkeypatch does) is seen on the next import."""
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    dl.from_dlpack(cls())
    cls.__dlpack_c_exchange_api__ = None
    dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (1, 1)


@pytest.mark.parametrize("kind", ["numpy.ndarray", "Python class", "ndarray subclass"])
def test_cache_describes_a_type_once_until_it_changes(kind):
    """Imports of one type describe it once; a change to the type, once more. CPython 3.13
    stopped setting Py_TPFLAGS_VALID_VERSION_TAG, which the cache once required: there every
    import described its producer afresh (and, on free-threaded builds, replaced the cache
    entry under other threads' feet)."""
    array = np.arange(6.0)
    if kind == "numpy.ndarray":
        cls, make = np.ndarray, lambda: array
    elif kind == "Python class":
        # Not producer_type(): its call counter is a class attribute, a change per call.
        cls = type("Plain", (), {"__dlpack__": lambda self, **kw: array.__dlpack__(**kw),
                                 "__dlpack_device__": lambda self: (CPU, 0)})
        make = cls
    else:
        cls = type("Sub", (np.ndarray,), {})
        make = lambda: array.view(cls)  # noqa: E731
    dl.from_dlpack(make())
    before = _core._producer_descriptions_made()
    for _ in range(50):
        assert dl.from_dlpack(make()).data_ptr == array.ctypes.data
    assert _core._producer_descriptions_made() == before
    if kind != "numpy.ndarray":
        cls.marker = 1                      # a new version tag
        dl.from_dlpack(make())
        dl.from_dlpack(make())
        assert _core._producer_descriptions_made() == before + 1


def test_cache_tells_types_apart():
    first, second = ForgedTable(), ForgedTable()
    cls_a = producer_type(__dlpack_c_exchange_api__=first.capsule)
    cls_b = producer_type(__dlpack_c_exchange_api__=second.capsule)
    cls_c = producer_type()
    for _ in range(3):
        assert dl.from_dlpack(cls_a()).data_ptr == first.last_data()
        assert dl.from_dlpack(cls_b()).data_ptr == second.last_data()
        dl.from_dlpack(cls_c())
    assert (first.calls, second.calls, cls_c.dlpack_calls) == (3, 3, 3)
    assert cls_a.dlpack_calls == cls_b.dlpack_calls == 0


UNUSABLE = {
    "None": lambda: None,
    "wrong capsule name": lambda: ForgedTable(name="not_the_exchange_api"),
    "major 2": lambda: ForgedTable(version=(2, 0)),
    "major 0": lambda: ForgedTable(version=(0, 9)),
    "NULL from_py": lambda: ForgedTable(from_py=False),
    "a string": lambda: "dlpack_exchange_api",
}


@pytest.mark.parametrize("make", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_unusable_table_falls_back_to_dlpack(make):
    table = make()
    attribute = table.capsule if isinstance(table, ForgedTable) else table
    cls = producer_type(__dlpack_c_exchange_api__=attribute)
    array = np.arange(5, dtype=np.int64)
    for _ in range(2):
        assert dl.from_dlpack(cls(array)).data_ptr == array.ctypes.data
    assert cls.dlpack_calls == 2
    if isinstance(table, ForgedTable):
        assert table.calls == 0


def test_dlpack_1_2_int_spelling_is_honoured():
    table = ForgedTable()
    cls = producer_type(__c_dlpack_exchange_api__=table.address)
    assert dl.from_dlpack(cls()).data_ptr == table.last_data()
    assert (table.calls, cls.dlpack_calls) == (1, 0)


def test_int_address_in_dlpack_c_exchange_api_is_honoured():
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.address)
    dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (1, 0)


def test_producer_table_error_falls_back_to_dlpack(c_consumer):
    # A table that refuses an object leaves the answer to __dlpack__, whose errors are the
    # producer's documented ones (PyTorch's table raises RuntimeError with a C++ trace
    # where its __dlpack__ raises a one-line BufferError).
    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.raising_table())
    obj = cls()
    t = dl.from_dlpack(obj)
    assert t.data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1


def test_producer_table_and_dlpack_errors_give_the_dlpack_error(c_consumer):
    def refuse(self, **kwargs):
        type(self).dlpack_calls += 1
        raise BufferError("refused by __dlpack__ too")

    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.raising_table(),
                        __dlpack__=refuse)
    with pytest.raises(BufferError, match="refused by __dlpack__ too"):
        dl.from_dlpack(cls())
    assert cls.dlpack_calls == 1


def test_silent_producer_failure_falls_back_to_dlpack(c_consumer):
    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.silent_table())
    obj = cls()
    assert dl.from_dlpack(obj).data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1


# --------------------------------------------------------------------------------------
# Consumer: PyTorch
# --------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


TORCH_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bfloat16", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2",
]


def torch_sample(torch, name):
    """A (2, 3) torch tensor of that dtype holding varied bit patterns (as the interop
    suite's torch_source)."""
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"torch {torch.__version__} has no {name}")
    if dtype is torch.bool:
        return torch.arange(6).reshape(2, 3) % 2 == 0
    raw = (torch.arange(6 * dtype.itemsize, dtype=torch.int64) * 37 % 251).to(torch.uint8)
    return raw.reshape(2, -1).view(dtype)


@pytest.fixture
def no_torch_dlpack(monkeypatch):
    """torch.Tensor.__dlpack__ raises, so an import can only go through the table."""
    torch = _torch()

    def refuse(self, *args, **kwargs):
        raise AssertionError("torch.Tensor.__dlpack__ was called")

    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse)
    return torch


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_tensor_of_every_dtype_through_the_table(no_torch_dlpack, name):
    torch = no_torch_dlpack
    x = torch_sample(torch, name)
    t = dl.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    assert t.dtype == name
    assert (t.shape, t.strides) == (tuple(x.shape), x.stride())
    assert not t.readonly
    nbytes = x.numel() * x.element_size()
    assert ctypes.string_at(t.data_ptr, nbytes) == x.view(torch.uint8).numpy().tobytes()


# The interop suite's torch layouts (test_interop_torch.py), plus a broadcast scalar.
TORCH_LAYOUTS = {
    "0d": lambda torch: torch.tensor(3.5),
    "zero_size_(0,)": lambda torch: torch.empty(0),
    "zero_size_(3,0)": lambda torch: torch.empty(3, 0),
    "zero_size_(2,0,1)": lambda torch: torch.empty(2, 0, 1),
    "size1_odd_strides": lambda torch: torch.arange(6.0).as_strided((3, 1, 2), (2, 1000, 1)),
    "32_dims": lambda torch: torch.arange(4.0).reshape((2, 2) + (1,) * 30),
    "32_dims_strided": lambda torch: torch.arange(16.0).reshape((4, 4) + (1,) * 30)[::2, 1::2],
    "slice": lambda torch: torch.arange(24.0).reshape(2, 3, 4)[:, ::2, 1:],
    "transpose": lambda torch: torch.arange(24.0).reshape(2, 3, 4).transpose(0, 2),
    "zero_strides": lambda torch: torch.arange(4.0).expand(3, 4),
    "storage_offset": lambda torch: torch.arange(24.0).reshape(2, 3, 4)[1, 1:, 2:],
    "broadcast_scalar": lambda torch: torch.tensor(1.0).expand(2, 3),
}


@pytest.mark.parametrize("make", TORCH_LAYOUTS.values(), ids=TORCH_LAYOUTS.keys())
def test_torch_tensor_of_every_layout_through_the_table(no_torch_dlpack, make):
    torch = no_torch_dlpack
    x = make(torch)
    t = dl.from_dlpack(x)
    assert t.data_ptr == x.data_ptr()
    assert (t.shape, t.strides) == (tuple(x.shape), x.stride())
    if x.numel():
        np.testing.assert_array_equal(np.asarray(t), x.numpy())
    if x.storage_offset():
        assert t.data_ptr == x.untyped_storage().data_ptr() + 4 * x.storage_offset()


def test_torch_import_shares_memory_and_keeps_the_tensor_alive(no_torch_dlpack):
    torch = no_torch_dlpack
    x = torch.zeros(4)
    refs = sys.getrefcount(x)
    t = dl.from_dlpack(x)
    np.asarray(t)[1] = 5
    assert x[1].item() == 5
    assert sys.getrefcount(x) > refs
    address = x.data_ptr()
    u = dl.from_dlpack(x)
    del u
    gc.collect()
    assert sys.getrefcount(x) > refs
    del x
    gc.collect()
    assert t.data_ptr == address and np.asarray(t)[1] == 5


def test_torch_import_releases_the_tensor(no_torch_dlpack):
    x = no_torch_dlpack.zeros(4)
    refs = sys.getrefcount(x)
    t = dl.from_dlpack(x)
    del t
    gc.collect()
    assert sys.getrefcount(x) == refs


def test_torch_subclass_publishing_the_1_2_int_spelling(no_torch_dlpack):
    torch = no_torch_dlpack
    address = table_address(torch.Tensor)
    cls = type("IntSpelling", (torch.Tensor,), {"__dlpack_c_exchange_api__": None,
                                                "__c_dlpack_exchange_api__": address})
    _KEEP.append(cls)
    x = torch.arange(4.0).as_subclass(cls)
    assert dl.from_dlpack(x).data_ptr == x.data_ptr()


def test_torch_subclass_without_table_uses_dlpack():
    torch = _torch()
    calls = []

    class NoTable(torch.Tensor):
        __dlpack_c_exchange_api__ = None

        def __dlpack__(self, **kwargs):
            calls.append(kwargs)
            return super().__dlpack__(**kwargs)

    _KEEP.append(NoTable)
    x = torch.arange(4.0).as_subclass(NoTable)
    assert dl.from_dlpack(x).data_ptr == x.data_ptr()
    assert calls == [{"max_version": (1, 3)}]


def torch_table_error(x):
    """What torch's own table sets for `x`, called directly."""
    out = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(Exception) as info:
        FROM_PY(table_of(type(x)).managed_tensor_from_py_object_no_sync)(id(x), byref(out))
    return info.value


@pytest.mark.parametrize("make", [
    lambda torch: torch.eye(3).to_sparse(),
    lambda torch: torch.ones(3, device="meta"),
], ids=["sparse", "meta"])
def test_torch_table_error_gives_the_dlpack_error(make):
    # torch's table raises RuntimeError with a C++ stack trace for these; the import asks
    # __dlpack__ then, and raises what it raises (a one-line BufferError).
    torch = _torch()
    x = make(torch)
    assert isinstance(torch_table_error(x), RuntimeError)
    with pytest.raises(Exception) as expected:
        x.__dlpack__(max_version=(1, 3))
    with pytest.raises(type(expected.value)) as info:
        dl.from_dlpack(x)
    assert type(info.value) is type(expected.value) is BufferError
    assert str(info.value) == str(expected.value)


def test_torch_table_exports_tensors_that_require_grad(no_torch_dlpack):
    # Pinned: torch's table does not apply __dlpack__'s requires_grad refusal (BufferError).
    x = no_torch_dlpack.ones(3, requires_grad=True)
    assert dl.from_dlpack(x).data_ptr == x.data_ptr()


def test_c_consumer_round_trips_a_torch_tensor(c_consumer):
    torch = _torch()
    x = torch.arange(6.0).reshape(2, 3).T
    y = c_consumer.round_trip(x)
    assert type(y) is torch.Tensor and y is not x
    assert (y.data_ptr(), y.stride()) == (x.data_ptr(), x.stride())


# --------------------------------------------------------------------------------------
# tvm-ffi: consumer of dlinterop's table, producer for dl.from_dlpack
# --------------------------------------------------------------------------------------

def _tvm_ffi():
    return pytest.importorskip("tvm_ffi")


def test_tvm_ffi_imports_dl_tensor_through_the_table(live_counters):
    tvm_ffi = _tvm_ffi()
    t = dl.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:])
    before = live_counters()
    y = tvm_ffi.from_dlpack(t)
    assert y.data_ptr() == t.data_ptr
    assert tuple(y.shape) == t.shape
    assert live_counters()["live_exports"] == before["live_exports"] + 1
    del y
    assert live_counters() == before


def test_tvm_ffi_imports_read_only_dl_tensor_through_the_table():
    # tvm-ffi's only other route is the legacy __dlpack__(), which dlinterop refuses for
    # read-only tensors: success proves the exchange table was used.
    tvm_ffi = _tvm_ffi()
    t = readonly_tensor()
    with pytest.raises(BufferError):
        t.__dlpack__()
    assert tvm_ffi.from_dlpack(t).data_ptr() == t.data_ptr


def test_dl_imports_tvm_ffi_tensor():
    tvm_ffi = _tvm_ffi()
    array = np.arange(10, dtype=np.int32)
    y = tvm_ffi.from_dlpack(array)
    t = dl.from_dlpack(y)
    assert t.data_ptr == y.data_ptr() == array.ctypes.data
    assert np.asarray(t).tolist() == list(range(10))


def test_dl_imports_through_tvm_ffi_table():
    tvm_ffi = _tvm_ffi()
    wrapper_type = getattr(tvm_ffi.core, "DLTensorTestWrapper", None)
    if wrapper_type is None:
        pytest.skip("this tvm-ffi has no DLTensorTestWrapper")
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    wrapper = wrapper_type(tvm_ffi.from_dlpack(array))

    def refuse(**kwargs):
        raise AssertionError("__dlpack__ was called")

    wrapper.__dlpack__ = refuse
    t = dl.from_dlpack(wrapper)
    assert t.data_ptr == array.ctypes.data
    assert (t.shape, t.strides) == ((2, 3), (3, 1))


def test_round_trip_dl_tvm_ffi_dl():
    tvm_ffi = _tvm_ffi()
    t = dl.from_dlpack(np.arange(8, dtype=np.uint16))
    back = dl.from_dlpack(tvm_ffi.from_dlpack(t))
    assert back.data_ptr == t.data_ptr
