"""Encode and decode the small floating-point formats DLPack 1.3 knows.

``dl.full()`` has to fill tensors of the float8/float6/float4 dtypes with a
Python scalar; this module turns that scalar into the format's bit pattern
without needing ml_dtypes installed.  Format names are ml_dtypes' names, and
the conversions reproduce ml_dtypes' conversion from float64 bit for bit
(tests/test_minifloat.py checks every code and thousands of values against
it).  float6/float4 codes are returned in the low bits of the int, the way
ml_dtypes stores one value per byte.

Pure Python, standard library only.
"""

from __future__ import annotations

import bisect
import math
from typing import NamedTuple

__all__ = ["FORMATS", "encode", "decode", "encoding"]


# How a format spends its top codes:
#   "ieee"   exponent all ones is inf (mantissa 0) or NaN
#   "fn"     no inf; S.1111...1 is NaN, the rest of the top binade is finite
#   "fnuz"   no inf, no -0; 0x80 (the -0 pattern) is the single NaN
#   "e8m0"   unsigned, no mantissa, no zero, no inf; 0xFF is NaN
#   "finite" no inf, no NaN
class _Format(NamedTuple):
    ebits: int
    mbits: int
    bias: int
    kind: str


_SPECS = {
    "float8_e3m4": _Format(3, 4, 3, "ieee"),
    "float8_e4m3": _Format(4, 3, 7, "ieee"),
    "float8_e4m3fn": _Format(4, 3, 7, "fn"),
    "float8_e4m3fnuz": _Format(4, 3, 8, "fnuz"),
    "float8_e4m3b11fnuz": _Format(4, 3, 11, "fnuz"),
    "float8_e5m2": _Format(5, 2, 15, "ieee"),
    "float8_e5m2fnuz": _Format(5, 2, 16, "fnuz"),
    "float8_e8m0fnu": _Format(8, 0, 127, "e8m0"),
    "float6_e2m3fn": _Format(2, 3, 1, "finite"),
    "float6_e3m2fn": _Format(3, 2, 3, "finite"),
    "float4_e2m1fn": _Format(2, 1, 1, "finite"),
}

FORMATS: frozenset[str] = frozenset(_SPECS)


def _spec(name: str) -> _Format:
    try:
        return _SPECS[name]
    except KeyError:
        raise ValueError(
            f"unknown minifloat format {name!r}; expected one of {sorted(FORMATS)}"
        ) from None


def _sign_bit(f: _Format) -> int:
    # e8m0 has no sign bit, so it has no sign to carry.
    return 0 if f.kind == "e8m0" else 1 << (f.ebits + f.mbits)


def _magnitude(f: _Format, code: int) -> float:
    """Value of a sign-less code by the plain exponent/mantissa formula.

    The exponent field is not masked on purpose: for ``largest finite code + 1``
    this yields the value the next code would have if the exponent range went
    on, which is where rounding overflows.
    """
    e, m = code >> f.mbits, code & ((1 << f.mbits) - 1)
    if e == 0 and f.kind != "e8m0":  # subnormal; e8m0 has none
        return math.ldexp(m, 1 - f.bias - f.mbits)
    return math.ldexp((1 << f.mbits) + m, e - f.bias - f.mbits)


def _max_finite_code(f: _Format) -> int:
    top = (1 << (f.ebits + f.mbits)) - 1  # all magnitude bits set
    if f.kind == "ieee":
        return top - (1 << f.mbits)  # the whole top binade is inf/NaN
    if f.kind in ("fn", "e8m0"):
        return top - 1  # only all ones is NaN
    return top  # "fnuz" NaN lives in the sign bit; "finite" reserves nothing


_TABLES: dict[str, tuple[float, ...]] = {}


def _table(name: str) -> tuple[float, ...]:
    """Magnitudes of codes 0..max finite, plus the overflow value one past it.

    Codes of all these formats are ordered like their values, so the table is
    sorted and the index is the code.
    """
    table = _TABLES.get(name)
    if table is None:
        f = _SPECS[name]
        table = tuple(_magnitude(f, c) for c in range(_max_finite_code(f) + 2))
        _TABLES[name] = table
    return table


def _nan(f: _Format, negative: bool) -> int:
    sign = _sign_bit(f) if negative else 0
    if f.kind == "ieee":
        # ml_dtypes keeps the sign and gives the quiet NaN (mantissa MSB set).
        return sign | (((1 << f.ebits) - 1) << f.mbits) | (1 << (f.mbits - 1))
    if f.kind == "fn":
        return sign | (_sign_bit(f) - 1)  # ml_dtypes keeps the sign: S.1111.111
    if f.kind == "fnuz":
        return 0x80  # the only NaN there is
    if f.kind == "e8m0":
        return 0xFF
    # No NaN in float6/float4: ml_dtypes gives zero with the sign flipped (+NaN -> -0).
    return 0 if negative else _sign_bit(f)


def _overflow(f: _Format, negative: bool) -> int:
    sign = _sign_bit(f) if negative else 0
    if f.kind == "ieee":
        return sign | (((1 << f.ebits) - 1) << f.mbits)  # ml_dtypes rounds to ±inf
    if f.kind == "finite":
        return sign | _max_finite_code(f)  # ml_dtypes saturates to ±max
    # fn, fnuz, e8m0: ml_dtypes gives NaN for overflow and for ±inf, never max.
    return _nan(f, negative)


def encode(name: str, value: float) -> int:
    """Bit pattern of ``value`` in format ``name``, rounded to nearest even."""
    f = _spec(name)
    x = float(value)
    negative = math.copysign(1.0, x) < 0
    if math.isnan(x):
        return _nan(f, negative)
    if f.kind == "e8m0" and (negative or x == 0):
        return 0xFF  # ml_dtypes: no sign and no zero, so ±0 and negatives are NaN

    table = _table(name)
    overflow_code = len(table) - 1
    a = abs(x)
    i = bisect.bisect_left(table, a)
    if i > overflow_code:
        code = overflow_code  # beyond the overflow value, inf included
    elif i == 0 or table[i] == a:
        code = i  # exact; for e8m0 also anything below 2**-127, which ml_dtypes clamps up to it
    else:
        # Midpoints of these few-bit values are exact in float64.
        mid = (table[i - 1] + table[i]) / 2
        if a < mid:
            code = i - 1
        elif a > mid:
            code = i
        elif f.kind == "e8m0":
            code = i  # ml_dtypes rounds e8m0 ties up (1.5 -> 2, 3 -> 4), not to even
        else:
            code = i if i % 2 == 0 else i - 1  # tie: the even code

    if code == overflow_code:
        return _overflow(f, negative)
    if negative and (code != 0 or f.kind != "fnuz"):
        code |= _sign_bit(f)  # fnuz has no -0: ml_dtypes gives +0 for -0.0 and for tiny negatives
    return code


def encoding(name: str) -> tuple[tuple[float, ...], tuple[int, int], tuple[int, int], int, str]:
    """What ``encode`` reads, for a C encoder to do the same (src/casts_floats.h): the magnitudes
    of the codes 0 to the largest finite one with the overflow value after them, the NaN
    codes and the overflow codes (each positive, negative), the sign bit (0: none), and
    the kind ("fnuz", "e8m0" or another)."""
    f = _spec(name)
    return (
        _table(name),
        (_nan(f, False), _nan(f, True)),
        (_overflow(f, False), _overflow(f, True)),
        _sign_bit(f),
        f.kind,
    )


def decode(name: str, bits: int) -> float:
    """The float value of bit pattern ``bits`` in format ``name``."""
    f = _spec(name)
    sign = _sign_bit(f)
    nbits = f.ebits + f.mbits + (1 if sign else 0)
    bits = int(bits)
    if not 0 <= bits < (1 << nbits):
        raise ValueError(f"{bits!r} is not a {nbits}-bit pattern of {name}")
    negative = bool(bits & sign)
    code = bits & ~sign
    if f.kind == "fnuz" and bits == 0x80:
        return math.copysign(
            math.nan, -1.0
        )  # the NaN sits on the -0 pattern; ml_dtypes reads it with the sign set
    if code > _max_finite_code(f):
        if f.kind == "ieee" and code & ((1 << f.mbits) - 1) == 0:
            return -math.inf if negative else math.inf
        return math.copysign(math.nan, -1.0 if negative else 1.0)
    value = _table(name)[code]
    return -value if negative else value
