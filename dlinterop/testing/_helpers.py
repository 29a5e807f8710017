"""What the rules share: reading capsules natively (dlinterop.testing._conformance) and
the values and bytes a rule compares."""

from dlinterop.testing._frameworks.dtypes import _np, _numpy_dtype
from dlinterop.testing._model import IS_SUBBYTE_TYPE_PADDED, NotApplicable, _fail


def _native():
    from dlinterop.testing import _conformance

    return _conformance


def _code(name):
    import dlinterop as dl

    d = dl.dtype(name)
    return (d.code, d.bits, d.lanes)


def _values(n=6):
    return _np().arange(n, dtype=_np().float64) % 5 + 1


def _export(x, **kwargs):
    capsule = x.__dlpack__(**kwargs)
    info = _native().inspect(capsule)
    return capsule, info


def _nbytes(info):
    count = 1
    for extent in info["shape"] or ():
        count *= extent
    return (count * info["dtype"][1] * info["dtype"][2] + 7) // 8


def _expected_bytes(values, dtype):
    return _np().ascontiguousarray(_np().asarray(values).astype(_numpy_dtype(dtype))).tobytes()


def _capsule_bytes(capsule, info):
    """The bytes a C-contiguous capsule shows, read without consuming it."""
    if info["strides"] is not None and info["ndim"] > 0:
        step = 1
        for extent, stride in reversed(list(zip(info["shape"], info["strides"]))):
            if extent > 1 and stride != step:
                _fail(f"expected C-contiguous strides, got {info['strides']}")
            step *= extent
    return _native().read(capsule, _nbytes(info))


def _versioned(x, **kwargs):
    capsule, info = _export(x, max_version=(1, 3), **kwargs)
    if not info.get("versioned"):
        raise NotApplicable(f"no versioned capsule for max_version=(1, 3) (got {info['name']!r})")
    return capsule, info


def _expected_codes(values, dtype):
    """The codes of a sub-byte type holding `values` (ml_dtypes keeps one per byte)."""
    bits = _code(dtype)[1]
    codes = _np().asarray(values).astype(_numpy_dtype(dtype)).view(_np().uint8)
    return [int(c) & ((1 << bits) - 1) for c in codes.ravel()]


def _capsule_codes(capsule, info):
    """The codes a C-contiguous capsule of a sub-byte type holds, read as its flags say:
    one per byte when IS_SUBBYTE_TYPE_PADDED is set, else packed, little bit-endian."""
    bits = info["dtype"][1]
    count = 1
    for extent in info["shape"] or ():
        count *= extent
    mask = (1 << bits) - 1
    if info.get("flags", 0) & IS_SUBBYTE_TYPE_PADDED:
        _capsule_bytes(capsule, dict(info, dtype=(info["dtype"][0], 8, 1)))
        return [b & mask for b in _native().read(capsule, count)]
    packed = int.from_bytes(_capsule_bytes(capsule, info), "little")
    return [(packed >> (i * bits)) & mask for i in range(count)]
