"""Every bit pattern DLPack can describe crosses exactly: padded and packed sub-byte data,
NumPy arrays of ml_dtypes' sub-byte types, and flag bits a consumer must not ignore. Forged
capsules (tests/support/forge/) stand in for producers that pad; ml_dtypes' own decoding is
the reference for every value."""

import ctypes

import numpy as np
import pytest

import dlinterop as dl
from dlinterop.frameworks import _borrow_routes
from dlinterop.testing import _conformance

from abi_table import abi_entry
from bit_cases import (
    INT_RANGES,
    SUB_BYTE,
    forge_padded,
    ml_dtypes,
    needs_ml_dtypes,
)
from forge import (
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    CountingProducer,
    capsule_name,
    forge,
    make_capsule,
)

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


# -- helpers ---------------------------------------------------------------------------------

_from_managed = None


def tensor_from_managed(forged):
    """Hands the forged managed tensor to the stable ABI's tensor_from_managed entry
    (DLInterop_TensorFromManaged), as a C producer would; the capsule is renamed first, so
    that only the entry owns it."""
    global _from_managed
    if _from_managed is None:
        _from_managed = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_int)(
            abi_entry("tensor_from_managed")
        )
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
