"""dl.from_dlpack rejects every malformed DLPack input cleanly (validated before it is consumed):
capsule names, versions, data types and devices.

Each rejected capsule must raise the named exception, be left unconsumed (same name, its
deleter not called), have its deleter called exactly once when the capsule is released,
and leave dl.memory_stats() unchanged. Inputs are forged with tests/support/forge/; the Forged
object is kept alive while the exception propagates (see forge's SystemError caveat)."""

import ctypes

import pytest

import dlinterop as dl

from forge import capsule_name, forge
from malformed_cases import (  # noqa: F401 (fixtures)
    INT32_MAX,
    INT32_MIN,
    ROUTES,
    _import,
    _no_automatic_gc,
    _stats,
    assert_rejected,
)

# Every (code, bits, lanes) dlinterop imports (DLPack 1.3 and kDLBcomplex,
# include/dlpack/dlpack.h; sub-byte integers packed as DLPack packs sub-byte floats).
VALID_DTYPES = {
    (0, 1, 1),
    (0, 2, 1),
    (0, 4, 1),
    (0, 8, 1),
    (0, 16, 1),
    (0, 32, 1),
    (0, 64, 1),
    (1, 1, 1),
    (1, 2, 1),
    (1, 4, 1),
    (1, 8, 1),
    (1, 16, 1),
    (1, 32, 1),
    (1, 64, 1),
    (2, 16, 1),
    (2, 32, 1),
    (2, 64, 1),
    (4, 16, 1),
    (5, 32, 1),
    (5, 64, 1),
    (5, 128, 1),
    (6, 8, 1),
    *((code, 8, 1) for code in range(7, 15)),
    (15, 6, 1),
    (16, 6, 1),
    (17, 4, 1),
    (17, 4, 2),
    (18, 32, 1),
}


# --------------------------------------------------------------------------------------
# Capsule names
# --------------------------------------------------------------------------------------

WRONG_NAMES = [
    "foo",
    "",
    "DLTENSOR",
    "dltensor ",
    "dltensor_versioned_",
    "Dltensor_versioned",
    "dltensor\x01",
    "used_",
    "used_dltensor_versioned_x",
    "numpy_array",
]


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("name", WRONG_NAMES)
def test_wrong_capsule_name_is_value_error_and_untouched(name, versioned):
    f = forge(versioned=versioned, name=name)
    # forge's destructor treats any used_* name as consumed and never calls the deleter.
    assert_rejected(f, ValueError, deleter_calls=0 if name.startswith("used_") else 1)


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("name", ["used_dltensor", "used_dltensor_versioned"])
def test_used_capsule_is_value_error_already_consumed(name, versioned):
    # A used_* capsule belongs to its consumer: its destructor never calls the deleter.
    f = forge(versioned=versioned, name=name)
    assert_rejected(f, ValueError, match="already consumed", deleter_calls=0)


@pytest.mark.parametrize("route", ["producer", "producer-copy"])
def test_producer_returning_used_capsule_is_value_error(route):
    f = forge(name="used_dltensor_versioned")
    assert_rejected(f, ValueError, route=route, match="already consumed", deleter_calls=0)


def test_capsule_with_null_name_is_value_error():
    new_capsule = ctypes.PYFUNCTYPE(
        ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
    )(("PyCapsule_New", ctypes.pythonapi))
    f = forge()
    capsule = new_capsule(f.address, None, None)  # no destructor: f's capsule owns the tensor
    before = _stats()
    with pytest.raises(ValueError):
        dl.from_dlpack(capsule)
    assert capsule_name(capsule) is None
    del capsule
    assert f.deleter_calls == 0
    f.release()
    assert f.deleter_calls == 1
    assert dl.memory_stats() == before


@pytest.mark.dlpack_sanitizer_expected  # consumes a capsule twice on purpose
def test_consumed_capsule_cannot_be_imported_again():
    f = forge()
    t = dl.from_dlpack(f.capsule)
    assert capsule_name(f.capsule) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="already consumed"):
        dl.from_dlpack(f.capsule)
    assert f.deleter_calls == 0
    del t
    assert f.deleter_calls == 1
    f.release()
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("major", [0, 2, 3, 255, 2**32 - 1])
def test_versioned_major_not_1_is_buffer_error(major, route):
    assert_rejected(forge(version=(major, 0)), route=route, match="version")


@pytest.mark.parametrize("minor", [0, 1, 3, 4, 99, 2**32 - 1])
def test_versioned_any_minor_of_major_1_is_accepted(minor):
    f = forge(shape=(2, 3), version=(1, minor))
    t = dl.from_dlpack(f.capsule)
    assert t.shape == (2, 3)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Data types
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("code", range(19))
def test_every_invalid_bits_for_known_code_is_buffer_error(code, versioned):
    rejected = 0
    for bits in range(256):
        if (code, bits, 1) in VALID_DTYPES:
            continue
        f = forge(dtype=(code, bits, 1), versioned=versioned)
        with pytest.raises(BufferError):
            dl.from_dlpack(f.capsule)
        assert capsule_name(f.capsule) == f.name, (code, bits)
        f.release()
        assert f.deleter_calls == 1, (code, bits)
        rejected += 1
    assert rejected == 256 - sum(1 for c, _, lanes in VALID_DTYPES if c == code and lanes == 1)


@pytest.mark.parametrize("bits", [0, 1, 8, 16, 32, 64, 128, 255])
@pytest.mark.parametrize("code", [19, 20, 32, 100, 128, 254, 255])
def test_unknown_dtype_code_is_buffer_error(code, bits):
    assert_rejected(forge(dtype=(code, bits, 1)))


# (17, 4, 2) is float4_e2m1fn_x2, accepted (test_float4_e2m1fn_x2_is_accepted).
MULTI_LANE = [
    (code, bits, lanes)
    for code, bits in sorted({(c, b) for c, b, _ in VALID_DTYPES})
    for lanes in (0, 2, 3, 4, 16, 65535)
    if (code, bits, lanes) != (17, 4, 2)
]


@pytest.mark.parametrize("triple", MULTI_LANE, ids=str)
def test_lanes_other_than_1_is_buffer_error(triple):
    assert_rejected(forge(dtype=triple), match="lanes")


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_float4_e2m1fn_x2_is_accepted(versioned):
    f = forge(shape=(4, 2), dtype=(17, 4, 2), versioned=versioned)
    t = dl.from_dlpack(f.capsule)
    assert t.dtype == dl.float4_e2m1fn_x2
    assert t.shape == (4, 2)
    del t
    assert f.deleter_calls == 1


@pytest.mark.parametrize("triple", sorted(VALID_DTYPES))
def test_every_valid_dtype_is_accepted(triple):
    # The other side of the dtype tests: the rejections above are not blanket ones.
    f = forge(shape=(2, 3), dtype=triple)
    t = dl.from_dlpack(f.capsule)
    assert t.dtype == dl.dtype(triple)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("device_type", [0, 5, 6, 22, 1000, -1, INT32_MIN, INT32_MAX])
def test_unknown_device_type_is_buffer_error(device_type, route, versioned):
    f = forge(device=(device_type, 0), versioned=versioned)
    assert_rejected(f, route=route, match="device")


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("device", [(1, -1), (1, INT32_MIN), (2, -1), (13, -7)])
def test_negative_device_id_is_buffer_error(device, versioned):
    assert_rejected(forge(device=device, versioned=versioned), match="device")


@pytest.mark.parametrize("device_type", [t for t in range(1, 22) if t not in (5, 6)])
def test_every_known_device_type_is_accepted_as_a_view(device_type):
    f = forge(device=(device_type, 3))
    t = dl.from_dlpack(f.capsule)
    assert t.__dlpack_device__() == (device_type, 3)
    del t
    assert f.deleter_calls == 1


# --------------------------------------------------------------------------------------
# More versions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("version", [(2, 99), (2, 3), (0, 99), (2**31, 1)], ids=str)
def test_versioned_major_not_1_is_buffer_error_whatever_the_minor(version, route):
    assert_rejected(forge(version=version), route=route, match="major version")
