"""Every bit pattern DLPack can describe crosses exactly: padded and packed sub-byte data,
the packed sub-byte integers, bcomplex32, the Ascend device, and flag bits a consumer must
not ignore. Forged capsules (tests/support/forge/) stand in for producers that pad; ml_dtypes'
own decoding is the reference for every value."""

import ctypes
import itertools

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.frameworks import _borrow_routes
from dlinterop.testing import _conformance

from forge import (
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    CountingProducer,
    capsule_name,
    forge,
    make_capsule,
)

try:
    import ml_dtypes
except ImportError:  # the tests that need its types skip; the others run without it
    ml_dtypes = None


def needs_ml_dtypes():
    if ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")


# name -> (code, bits): every packed sub-byte type dlinterop has.
SUB_BYTE = {
    "int1": (0, 1),
    "int2": (0, 2),
    "int4": (0, 4),
    "uint1": (1, 1),
    "uint2": (1, 2),
    "uint4": (1, 4),
    "float6_e2m3fn": (15, 6),
    "float6_e3m2fn": (16, 6),
    "float4_e2m1fn": (17, 4),
}


def reference_values(name, codes):
    """The values of `codes` (one per byte, in the low bits) by ml_dtypes' own decoding;
    two's complement by hand for the integers."""
    code, bits = SUB_BYTE[name]
    if code in (0, 1):
        return [c - (1 << bits) if code == 0 and c >> (bits - 1) else c for c in codes]
    needs_ml_dtypes()
    array = np.asarray(codes, dtype=np.uint8).view(getattr(ml_dtypes, name))
    return (
        array.astype(np.float64).tolist()
        if name.startswith("float")
        else array.astype(np.int64).tolist()
    )


def forge_padded(name, shape, strides=None, byte_offset=0, flags=IS_SUBBYTE_TYPE_PADDED, seed=0):
    """A forged padded tensor of `name` holding random codes (high bits of each byte set
    too, which a reader must ignore), and the expected values in C order."""
    code, bits = SUB_BYTE[name]
    f = forge(
        shape=shape, dtype=(code, bits, 1), strides=strides, byte_offset=byte_offset, flags=flags
    )
    rng = np.random.default_rng(seed)
    buffer = np.frombuffer(f.data, dtype=np.uint8)
    buffer[:] = rng.integers(0, 256, buffer.size, dtype=np.uint8)
    element0 = f.element_ptr - ctypes.addressof(f.data)
    steps = (
        strides
        if strides is not None
        else [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
    )
    codes = [
        int(buffer[element0 + sum(i * s for i, s in zip(index, steps))]) & ((1 << bits) - 1)
        for index in itertools.product(*[range(n) for n in shape])
    ]
    return f, np.array(reference_values(name, codes)).reshape(shape).tolist()


LAYOUTS = {
    "1-d": dict(shape=(7,)),
    "2-d odd": dict(shape=(3, 5)),
    "empty": dict(shape=(0, 3)),
    "one": dict(shape=(1,)),
    "0-d": dict(shape=()),
    "every other byte": dict(shape=(4,), strides=(2,)),
    "reversed": dict(shape=(5,), strides=(-1,)),
    "transposed": dict(shape=(3, 4), strides=(1, 3)),
    "byte offset": dict(shape=(2, 3), byte_offset=5),
}


# -- padded sub-byte data ----------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
@pytest.mark.parametrize("name", SUB_BYTE)
def test_padded_import_reads_one_element_per_byte(name, layout):
    f, expected = forge_padded(name, **layout)
    t = dl.from_dlpack(f.capsule)
    assert t.dtype == name and t.shape == layout["shape"]
    assert t.tolist() == expected
    assert t.is_copied and t.is_contiguous() and not t.readonly
    # The copy holds the values: the producer's memory was released at once.
    assert f.deleter_calls == 1
    del t
    f.release()
    assert f.deleter_calls == 1


def test_the_issues_example_reads_back_exactly():
    # float4_e2m1fn 0.5, 1.0, 1.5, 2.0 stored one per byte used to read [0.5, 0.0, 1.0, 0.0].
    f = forge(shape=(4,), dtype=(17, 4, 1), strides=(1,), flags=IS_SUBBYTE_TYPE_PADDED)
    ctypes.memmove(f.data_ptr, bytes([1, 2, 3, 4]), 4)
    assert dl.from_dlpack(f.capsule).tolist() == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize(
    "route", ["capsule", "producer", "asarray", "exchange table", "C API", "borrow"]
)
def test_every_import_route_repacks_padded_data(route):
    f, expected = forge_padded("float6_e3m2fn", shape=(3, 3), seed=1)
    if route == "capsule":
        t = dl.from_dlpack(f.capsule)
    elif route == "producer":
        t = dl.from_dlpack(CountingProducer(f))
    elif route == "asarray":
        t = dl.asarray(CountingProducer(f))
    elif route == "exchange table":
        t = dl.from_dlpack(TableProducer(f))
    elif route == "C API":
        t = tensor_from_managed(f)
    else:
        # The exchange table's borrow fast path (a DLTensor, which has no flags) is not
        # taken for sub-byte data: borrow imports a managed tensor, which says it is padded.
        route_taken, shape, _ = _borrow_routes(TableProducer(f))
        assert route_taken == "import" and shape == (3, 3)
        return
    assert t.tolist() == expected
    del t
    assert f.deleter_calls == 1


@pytest.mark.parametrize("route", ["capsule", "producer", "asarray"])
def test_copy_false_refuses_padded_data_naming_the_flag(route):
    f, _ = forge_padded("float4_e2m1fn", shape=(4,))
    source = f.capsule if route == "capsule" else CountingProducer(f)
    call = dl.asarray if route == "asarray" else dl.from_dlpack
    with pytest.raises(BufferError, match="IS_SUBBYTE_TYPE_PADDED.*copy=True"):
        call(source, copy=False)
    f.release()
    assert f.deleter_calls == 1


@pytest.mark.parametrize("copy", [None, True])
def test_padded_import_is_one_copy_that_exports_packed(copy):
    f, expected = forge_padded("int4", shape=(6,))
    t = dl.from_dlpack(CountingProducer(f), copy=copy)
    assert t.tolist() == expected and t.is_copied
    assert f.deleter_calls == 1  # one copy: the producer's memory is released
    info = _conformance.inspect(t.__dlpack__(max_version=(1, 3)))
    assert not info["flags"] & IS_SUBBYTE_TYPE_PADDED  # dlinterop exports packed only
    assert dl.from_dlpack(t).tolist() == expected


def test_padded_flag_on_a_byte_sized_type_changes_nothing():
    f = forge(shape=(3,), dtype=(2, 32, 1), flags=IS_SUBBYTE_TYPE_PADDED)
    t = dl.from_dlpack(f.capsule)
    assert t.data_ptr == f.element_ptr  # shared, not copied
    del t


def test_padded_data_on_a_device_is_refused_clearly():
    f = forge(shape=(4,), dtype=(17, 4, 1), device=(2, 0), flags=IS_SUBBYTE_TYPE_PADDED)
    with pytest.raises(BufferError, match="padded float4_e2m1fn data on cuda:0"):
        dl.from_dlpack(f.capsule)
    f.release()
    assert f.deleter_calls == 1


# -- NumPy arrays of ml_dtypes' sub-byte types: one element per byte ------------------------


@pytest.mark.parametrize(
    "view",
    [lambda a: a, lambda a: a[::-1], lambda a: a[:, ::2], lambda a: a.T, lambda a: a[1:, 1:]],
    ids=["whole", "reversed", "every other", "transposed", "corner"],
)
@pytest.mark.parametrize("name", SUB_BYTE)
def test_ml_dtypes_arrays_cross_with_their_values(name, view):
    # NumPy holds these types one per byte: read as packed, [1, 2, 3, 4] used to come back
    # as [1, 0, 2, 0].
    needs_ml_dtypes()
    low, high = INT_RANGES.get(name, (-4, 4))
    rng = np.random.default_rng(3)
    a = view(rng.integers(low, high + 1, (5, 7)).astype(getattr(ml_dtypes, name)))
    for t in (dl.asarray(a), dl.tensor(a), dl.asarray(a, copy=True)):
        assert t.dtype == name and t.shape == a.shape and t.is_copied
        assert t.tolist() == a.astype(np.float64).tolist()
        assert np.array_equal(np.asarray(t), a)
    with pytest.raises(BufferError, match="copy=False"):
        dl.asarray(a, copy=False)


# -- flag bits ---------------------------------------------------------------------------


@pytest.mark.parametrize("flags", range(8))
def test_every_combination_of_known_flags_is_accepted(flags):
    f = forge(shape=(5,), dtype=(0, 4, 1), flags=flags)
    t = dl.from_dlpack(f.capsule)
    assert t.shape == (5,)
    assert t.readonly == bool(flags & READ_ONLY and not flags & IS_SUBBYTE_TYPE_PADDED)
    del t


@pytest.mark.parametrize("bit", [3, 4, 7, 31, 32, 62, 63])
@pytest.mark.parametrize("route", ["capsule", "producer", "C API"])
def test_an_unknown_flag_bit_is_refused_naming_it(bit, route):
    f = forge(shape=(2,), flags=(1 << bit) | READ_ONLY)
    with pytest.raises(BufferError, match=f"flag bit {bit} "):
        if route == "capsule":
            dl.from_dlpack(f.capsule)
        elif route == "producer":
            dl.from_dlpack(CountingProducer(f))
        else:
            tensor_from_managed(f)
    if route != "C API":
        assert capsule_name(f.capsule) == "dltensor_versioned"  # not consumed
    f.release()
    assert f.deleter_calls == 1


def test_several_unknown_bits_are_all_named():
    f = forge(shape=(2,), flags=(1 << 5) | (1 << 40) | IS_COPIED)
    with pytest.raises(BufferError, match="flag bits 5, 40 "):
        dl.from_dlpack(f.capsule)


# -- packed sub-byte integers --------------------------------------------------------------

INT_RANGES = {
    "int1": (-1, 0),
    "int2": (-2, 1),
    "int4": (-8, 7),
    "uint1": (0, 1),
    "uint2": (0, 3),
    "uint4": (0, 15),
}


@pytest.mark.parametrize("name", INT_RANGES)
def test_sub_byte_integers_hold_their_whole_range(name):
    low, high = INT_RANGES[name]
    values = list(range(low, high + 1)) * 3 + [low]
    t = dl.tensor(values, dtype=name)
    assert t.dtype == name and t.itemsize == 1
    assert t.nbytes == (len(values) * t.dtype.bits + 7) // 8
    assert t.tolist() == values
    assert dl.full((5,), high, name).tolist() == [high] * 5
    assert dl.zeros((3,), name).tolist() == [0] * 3
    assert t[0].item() == values[0]
    with pytest.raises(ValueError, match="byte boundary"):
        t[1]  # a view must start on a byte; t.tolist()[1] reads the value
    with pytest.raises(OverflowError, match=name):
        dl.tensor([high + 1], dtype=name)


@pytest.mark.parametrize("name", INT_RANGES)
def test_sub_byte_integers_to_numpy_and_back_through_ml_dtypes(name):
    needs_ml_dtypes()
    low, high = INT_RANGES[name]
    values = [low, high, 0, low, high, high, low][:7]
    t = dl.tensor(values, dtype=name)
    a = np.asarray(t)
    assert a.dtype == np.dtype(getattr(ml_dtypes, name)) and a.tolist() == values
    assert np.dtype(getattr(dl, name)) == a.dtype
    back = dl.asarray(a)
    assert back.dtype == name and back.tolist() == values
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(t, copy=False)


def test_sub_byte_views_keep_rows_on_bytes():
    t = dl.arange(16, dtype="uint4").reshape((4, 4))
    expected = np.arange(16).reshape(4, 4)
    assert t[1:3].tolist() == expected[1:3].tolist()
    assert t[::-1].tolist() == expected[::-1].tolist()
    assert t[::2].tolist() == expected[::2].tolist()
    with pytest.raises(ValueError, match="byte"):
        t[:, 1:2]
    with pytest.raises(ValueError, match="byte boundary|last axis contiguous"):
        t.T
    assert (
        repr(dl.tensor([-1, 1], dtype="int2"))
        == "Tensor([-1, 1], shape=(2,), dtype=int2, device=cpu:0)"
    )


@pytest.mark.parametrize("name", ["uint4", "int2", "float6_e3m2fn", "float4_e2m1fn"])
def test_strided_sub_byte_copies_are_exact(name):
    needs_ml_dtypes()
    values = np.arange(48).reshape(4, 12) % 4 - (2 if name == "int2" else 0)
    if name.startswith("float"):
        values = values / 2
    u = dl.tensor(values.tolist(), dtype=name)
    expected = np.asarray(u).astype(np.float64)
    for view, ref in (
        (u[::-1], expected[::-1]),
        (u[::2], expected[::2]),
        (u[1:3, 4:], expected[1:3, 4:]),
        (u[::-3, 8:], expected[::-3, 8:]),
    ):
        copy = view.contiguous()
        assert copy.is_contiguous() and copy.tolist() == ref.tolist()
        assert np.asarray(view).astype(np.float64).tolist() == ref.tolist()


def test_torch_exports_its_sub_byte_integers_as_whole_bytes():
    # PyTorch's int1..int7/uint1..uint7 hold one element per byte and export as int8/uint8
    # (a lossless widening); it refuses DLPack's packed sub-byte integers.
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "int4"):
        pytest.skip("this PyTorch has no int4")
    t = dl.from_dlpack(torch.empty(3, dtype=torch.int4))
    assert t.dtype == dl.int8
    with pytest.raises(BufferError, match="bits 4"):
        torch.from_dlpack(dl.zeros(4, "int4"))


# -- bcomplex32 --------------------------------------------------------------------------


def test_bcomplex32_values_and_text():
    needs_ml_dtypes()
    t = dl.tensor([1 + 2j, 0.1j, -3.5], dtype="bcomplex32")
    assert t.dtype.__dlpack_data_type__() == (18, 32, 1) and t.itemsize == 4
    b = np.array([1 + 2j, 0.1j, -3.5], dtype=ml_dtypes.bcomplex32)
    assert t.tolist() == b.astype(np.complex64).tolist()
    assert (
        repr(t) == "Tensor([(1+2j), 0.1j, (-3.5+0j)], shape=(3,), dtype=bcomplex32, device=cpu:0)"
    )
    assert dl.full((2,), 1j, "bcomplex32").tolist() == [1j, 1j]


def test_bcomplex32_through_numpy_and_ml_dtypes_both_ways():
    needs_ml_dtypes()
    b = np.array([[1 + 2j, 3], [0.5j, -1]], dtype=ml_dtypes.bcomplex32)
    t = dl.asarray(b)
    assert t.dtype == dl.bcomplex32 and t.data_ptr == b.ctypes.data  # shared
    a = np.asarray(t)
    assert a.dtype == b.dtype and np.shares_memory(a, b)
    assert np.dtype(dl.bcomplex32) == b.dtype
    assert t.T.tolist() == b.T.astype(np.complex64).tolist()
    assert t.view(dl.bfloat16).shape == (2, 4)
    assert t.view(dl.bfloat16)[0, :2].tolist() == [1.0, 2.0]


def test_bcomplex32_through_dlpack():
    t = dl.tensor([1 + 1j], dtype="bcomplex32")
    u = dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert u.dtype == dl.bcomplex32 and u.tolist() == [1 + 1j]
    f = forge(shape=(2,), dtype=(18, 32, 1))
    assert dl.from_dlpack(f.capsule).tolist() == [0j, 0j]


# -- the Ascend device -----------------------------------------------------------------------


def test_ascend_metadata_round_trips():
    f = forge(shape=(2, 3), device=(21, 1))
    t = dl.from_dlpack(f.capsule)
    assert t.device == dl.Device("ascend:1") and t.__dlpack_device__() == (21, 1)
    assert t.T.shape == (3, 2) and t[1].shape == (3,)
    u = dl.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert u.device.type == "ascend" and u.data_ptr == t.data_ptr
    assert dl.DeviceType.ASCEND == 21 and dl.DeviceType(21).name == "ASCEND"


@pytest.mark.parametrize(
    "operation",
    [
        lambda t: t.tolist(),
        lambda t: t.to("cpu"),
        lambda t: memoryview(t),
        lambda t: np.asarray(t),
        lambda t: dl.tensor(t),
        lambda t: t.T.contiguous(),
    ],
)
def test_ascend_operations_say_dlinterop_only_carries_it(operation):
    f = forge(shape=(2, 3), device=(21, 0))
    t = dl.from_dlpack(f.capsule)
    with pytest.raises((BufferError, TypeError), match="ascend"):
        operation(t)


# -- helpers ---------------------------------------------------------------------------------

_from_managed = None


def tensor_from_managed(forged):
    """Hands the forged managed tensor to dlinterop's C API (dlinterop_tensor_from_managed),
    as a C producer would; the capsule is renamed first, so that only the C API owns it."""
    global _from_managed
    if _from_managed is None:
        from dlinterop import _capi

        api = _capi.__pyx_capi__["dlinterop_tensor_from_managed"]
        get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
            ("PyCapsule_GetName", ctypes.pythonapi)
        )
        get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi)
        )
        address = get_pointer(api, get_name(api))
        _from_managed = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int)(address)
    _consume(forged)
    return _from_managed(forged.address, 0)


def _consume(forged):
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.pythonapi.PyCapsule_SetName(forged.capsule, b"used_dltensor_versioned")


class _Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev", ctypes.c_void_p)]


class _Table(ctypes.Structure):
    _fields_ = [("header", _Header)] + [
        (n, ctypes.c_void_p) for n in ("alloc", "from_py", "to_py", "view", "stream")
    ]


_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


def TableProducer(forged):
    """An object whose type publishes a DLPack exchange table handing out `forged`'s managed
    tensor (once) through managed_tensor_from_py_object_no_sync."""

    def from_py(obj, out):
        _consume(forged)
        out[0] = forged.address
        return 0

    callback = _FROM_PY(from_py)
    table = _Table()
    table.header.major, table.header.minor = 1, 3
    table.from_py = ctypes.cast(callback, ctypes.c_void_p).value
    cls = type(
        "TableProducer",
        (),
        {
            "__dlpack_c_exchange_api__": make_capsule(
                ctypes.addressof(table), "dlpack_exchange_api"
            ),
            "__dlpack__": lambda self, **kw: forged.capsule,
            "__dlpack_device__": lambda self: (1, 0),
            "_keep": (table, callback, forged),
        },
    )
    return cls()


@pytest.mark.parametrize("name", ["int4", "uint2", "float4_e2m1fn", "bcomplex32"])
def test_the_cython_apis_dtype_check_knows_the_new_types(name):
    # check_tensor is check_arg (dlinterop/frameworks.pxd) with a Python face.
    t = dl.zeros((4,), name)
    assert dl.check_tensor(t, "x", dtype=name) is t
    other = "uint4" if name != "uint4" else "int4"
    with pytest.raises(TypeError, match=f"x.*{name}|{name}.*x"):
        dl.check_tensor(t, "x", dtype=other)
    f, expected = forge_padded("int4", shape=(3,)) if name == "int4" else (None, None)
    if f is not None:  # a padded producer's tensor is checked as the packed copy
        checked = dl.check_tensor(CountingProducer(f), "x", dtype="int4")
        assert checked.tolist() == expected
