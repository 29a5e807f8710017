"""One element read in C (src/values.h): item, float(t), int(t), complex(t), bool(t) and
operator.index(t) for every data type dlinterop has, their special values and refusals. Two
references: the reader in Python, dlinterop._lib.values, which the C reader must equal bit for
bit (NaN payloads, -0.0 and the types of the results included), and NumPy or ml_dtypes
wherever they have the type."""

import math
import operator

import pytest

import dlinterop as dl

from value_cases import (
    ALL_DTYPES,
    FLOAT_SPECIALS,
    INT_CODES,
    forged,
    int_specials,
    is_packed,
    pack,
    pattern_tensor,
    patterns,
    same,
    width,
)

# -- one element -------------------------------------------------------------------------


def outcome(convert, value):
    """('value', the result) or ('error', the exception's type and text)."""
    try:
        return "value", convert(value)
    except (TypeError, ValueError, OverflowError) as error:
        return "error", type(error), str(error)


def same_outcome(a, b):
    if a[0] != b[0]:
        return False
    return same(a[1], b[1]) if a[0] == "value" else a == b


CONVERSIONS = {
    "item": (lambda t: t.item(), lambda v: v),
    "float": (float, float),
    "int": (int, int),
    "complex": (complex, complex),
    "bool": (bool, bool),
    "index": (operator.index, operator.index),
}


def one_element_views(dt, pats):
    """(reference value, [one-element tensors holding it]) for each pattern: a 0-d view,
    a one-element view of shape (1, 1) with a byte offset, and a forged 0-d tensor."""
    f, t, expected = pattern_tensor(dt, pats)
    out = []
    for i, value in enumerate(expected):
        tensors = []
        if not is_packed(dt):
            tensors += [t[i], t[i : i + 1].reshape(1, 1)]
        data = pack(dt, [pats[i]]) if is_packed(dt) else pats[i]
        g = forged(dt, (), data=data, seed=i)
        tensors.append(dl.from_dlpack(g.capsule))
        out.append((value, tensors, g))
    return f, out


def few_patterns(dt):
    """patterns(dt), at most a few hundred: for the 16-bit types the special ones and every
    251st."""
    if width(dt) != 16:
        return patterns(dt, extra=16)
    if dt.code in INT_CODES:
        special = int_specials(16)
    elif dt.code == 2:
        special = FLOAT_SPECIALS[16]
    else:
        special = [v >> 16 for v in FLOAT_SPECIALS[32]]
    return [v.to_bytes(2, "little") for v in special + list(range(0, 1 << 16, 251))]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_one_element_conversions_are_pythons(dt):
    # Each conversion of a one-element Tensor is the conversion of its value: the same
    # result (bit for bit, of the same type) or the same error (type and message): int(t)
    # of a float truncates, NaN and the infinities raise, bool(NaN) is True.
    _keep, cases = one_element_views(dt, few_patterns(dt))
    for name, (on_tensor, on_value) in CONVERSIONS.items():
        for value, tensors, _forged in cases:
            expected = outcome(on_value, value)
            if name == "index" and dt.code not in INT_CODES:
                expected = ("error", TypeError, f"only integer tensors can be an index, not {dt}")
            for t in tensors:
                got = outcome(on_tensor, t)
                assert same_outcome(got, expected), (name, t.shape, value, got, expected)


@pytest.mark.parametrize(
    "name,values",
    [
        ("float32", [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-149, 3.4028234663852886e38]),
        ("float64", [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308]),
        ("float16", [-0.0, math.inf, math.nan, 2.0**-24, 2.0**-14 - 2.0**-24, 65504.0]),
        ("bfloat16", [-0.0, math.inf, math.nan, 2.0**-133, 3.3895313892515355e38]),
        ("int8", [-128, 127]),
        ("int16", [-32768, 32767]),
        ("int32", [-(2**31), 2**31 - 1]),
        ("int64", [-(2**63), 2**63 - 1]),
        ("uint8", [0, 255]),
        ("uint16", [65535]),
        ("uint32", [2**32 - 1]),
        ("uint64", [2**64 - 1, 2**63 + 1]),
        ("int4", [-8, 7]),
        ("int2", [-2, 1]),
        ("int1", [-1, 0]),
        ("uint4", [15]),
        ("uint2", [3]),
        ("uint1", [1]),
    ],
)
def test_special_values(name, values):
    t = dl.tensor(values, dtype=name)
    got = t.tolist()
    for v, x in zip(values, got):
        assert type(x) is type(v)
        assert (math.isnan(x) and math.isnan(v)) if v != v else same(x, v)
    for i, v in enumerate(values):
        one = dl.tensor([v], dtype=name)
        assert same(one.item(), got[i])
        if got[i] != got[i]:
            with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
                int(one)
        elif got[i] in (math.inf, -math.inf):
            with pytest.raises(OverflowError, match="cannot convert float infinity to integer"):
                int(one)
        else:
            assert same(int(one), int(got[i]))
        assert same(float(one), float(got[i])) or math.isnan(got[i])
        assert same(complex(one), complex(got[i])) or math.isnan(got[i])
        assert bool(one) is bool(got[i])


def test_float_of_a_wide_int_rounds_as_float_of_the_int():
    for name, value in [
        ("int64", 2**53 + 1),
        ("int64", -(2**63) + 1),
        ("uint64", 2**64 - 1),
        ("uint64", 2**63 + 2**10 + 1),
        ("int32", 2**24 + 1),
    ]:
        t = dl.full((), value, name)
        assert same(float(t), float(value)) and same(complex(t), complex(value))


def test_int_of_a_float_truncates_toward_zero():
    for value, expected in [(2.9, 2), (-2.9, -2), (-0.5, 0), (1e20, int(1e20))]:
        assert same(int(dl.full((1,), value, "float64")), expected)
    assert int(dl.full((), 2.5, "float8_e4m3fn")) == 2
    assert int(dl.full((), -3.0, "float4_e2m1fn")) == -3


def test_conversions_of_vector_types_are_of_their_tuples():
    t = dl.full((), 0.5, "float4_e2m1fn_x2")
    assert t.item() == (0.5, 0.5) and bool(t) is True
    for convert in (float, int, complex):
        with pytest.raises(TypeError, match="tuple"):
            convert(t)
    with pytest.raises(TypeError, match="only integer tensors can be an index"):
        operator.index(t)


def test_refusals_of_several_elements_keep_their_messages():
    t = dl.zeros((2, 3), "float32")
    for convert, what in [(float, "a float"), (int, "an int"), (complex, "a complex")]:
        with pytest.raises(TypeError) as error:
            convert(t)
        assert str(error.value) == (
            f"only a tensor of one element can be converted to {what}; this one has shape (2, 3)"
        )
    with pytest.raises(TypeError) as error:
        t.item()
    assert "converted to a Python scalar" in str(error.value)
    with pytest.raises(TypeError) as error:
        operator.index(dl.zeros((0,), "int8"))
    assert "converted to an index; this one has shape (0,)" in str(error.value)
    with pytest.raises(ValueError) as error:
        bool(t)
    assert str(error.value) == (
        "the truth value of a tensor of shape (2, 3) is ambiguous (it holds 6 elements)"
    )
