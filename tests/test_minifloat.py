"""dlinterop._lib.minifloat must agree with ml_dtypes bit for bit."""

import importlib.util
import math
import pathlib

import pytest

# Load the pure-Python module straight from the source tree so these tests run
# whether or not the (compiled) dlinterop package has been built.
_spec = importlib.util.spec_from_file_location(
    "_minifloat", pathlib.Path(__file__).parents[1] / "dlinterop" / "_lib" / "minifloat.py"
)
_minifloat = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_minifloat)

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

NBITS = {
    "float8_e3m4": 8,
    "float8_e4m3": 8,
    "float8_e4m3fn": 8,
    "float8_e4m3fnuz": 8,
    "float8_e4m3b11fnuz": 8,
    "float8_e5m2": 8,
    "float8_e5m2fnuz": 8,
    "float8_e8m0fnu": 8,
    "float6_e2m3fn": 6,
    "float6_e3m2fn": 6,
    "float4_e2m1fn": 4,
}
NAMES = sorted(NBITS)


def _dtype(name):
    return getattr(ml_dtypes, name)


def _ml_decode(name, codes):
    return np.asarray(codes, dtype=np.uint8).view(_dtype(name)).astype(np.float64)


def _ml_encode(name, values):
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is what we probe
        return np.asarray(values, dtype=np.float64).astype(_dtype(name)).view(np.uint8)


def _same_float(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    # == alone would let 0.0 pass for -0.0.
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _probe_values(name):
    """Every value, midpoints (ties), their float64 neighbours, and specials."""
    codes = range(1 << NBITS[name])
    finite = sorted({v for v in _ml_decode(name, codes).tolist() if math.isfinite(v)})
    values = list(finite)
    for lo, hi in zip(finite, finite[1:]):
        mid = (lo + hi) / 2
        values += [mid, math.nextafter(mid, -math.inf), math.nextafter(mid, math.inf)]
    for v in finite:
        values += [math.nextafter(v, -math.inf), math.nextafter(v, math.inf)]
    top, bottom = max(finite), min(abs(v) for v in finite if v != 0)
    values += [
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        math.nan,
        -math.nan,
        1e300,
        -1e300,
        1e10,
        -1e10,
        top * 1.01,
        top * 1.5,
        top * 2,
        -top * 1.5,
        bottom / 2,
        bottom / 4,
        bottom * 0.75,
        -bottom / 2,
        -bottom / 3,
        1e-300,
        -1e-300,
        5e-324,
        -5e-324,
        1.0,
        -1.0,
        0.1,
        math.pi,
        -math.e,
    ]
    return values


def test_formats_listed():
    assert _minifloat.FORMATS == frozenset(NBITS)


@pytest.mark.parametrize("name", NAMES)
def test_decode_every_code(name):
    codes = range(1 << NBITS[name])
    expected = _ml_decode(name, codes).tolist()
    for code, want in zip(codes, expected):
        got = _minifloat.decode(name, code)
        assert _same_float(got, want), (name, hex(code), got, want)


@pytest.mark.parametrize("name", NAMES)
def test_encode_matches_ml_dtypes(name):
    values = _probe_values(name)
    assert len(values) > 100
    expected = _ml_encode(name, values).tolist()
    nan_codes = {
        c for c, v in enumerate(_ml_decode(name, range(1 << NBITS[name]))) if math.isnan(v)
    }
    for value, want in zip(values, expected):
        got = _minifloat.encode(name, value)
        assert 0 <= got < (1 << NBITS[name])
        if want in nan_codes and got in nan_codes:
            continue  # any NaN pattern is as good as another
        assert got == want, (name, value, hex(got), hex(want))


@pytest.mark.parametrize("name", NAMES)
def test_encode_random_values(name):
    rng = np.random.default_rng(1234)
    top = float(ml_dtypes.finfo(_dtype(name)).max)
    values = np.concatenate(
        [
            rng.uniform(-top * 1.2, top * 1.2, 1000),
            np.exp2(rng.uniform(-140, 130, 1000)) * rng.choice([-1.0, 1.0], 1000),
        ]
    ).tolist()
    expected = _ml_encode(name, values).tolist()
    for value, want in zip(values, expected):
        assert _minifloat.encode(name, value) == want, (name, value, hex(want))


@pytest.mark.parametrize("name", NAMES)
def test_round_trip(name):
    for code in range(1 << NBITS[name]):
        value = _minifloat.decode(name, code)
        if not math.isnan(value):
            assert _minifloat.encode(name, value) == code, (name, hex(code))


def test_bad_arguments():
    with pytest.raises(ValueError):
        _minifloat.encode("float8_e9m9", 1.0)
    with pytest.raises(ValueError):
        _minifloat.decode("float4_e2m1fn", 16)
    with pytest.raises(ValueError):
        _minifloat.decode("float8_e5m2", 256)
