"""What the core knows DLPack defines (device types, type codes, flags: one list each, read by
the importer, the conformance checker and the pytest plugin) is what the DLPack header
dlinterop ships says, read from the header itself."""

import os
import re

import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop.testing import _model
from dlinterop.testing._conformance import Producer


def _header():
    with open(os.path.join(dl.get_include(), "dlpack", "dlpack.h")) as f:
        text = f.read()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)  # comments may hold names too


def _enum(name):
    """{member: value} of the header's `typedef enum {...} name;`."""
    body = re.search(r"enum\s*(?::\s*\w+\s*)?\{([^}]*)\}\s*" + name + r"\s*;", _header())
    if body is None:  # the C++ branch of an #ifdef comes first: the C one holds the body
        body = re.search(r"\{([^{}]*)\}\s*" + name + r"\s*;", _header())
    members = re.findall(r"(\w+)\s*=\s*(\d+)U?", body.group(1))
    return {member: int(value) for member, value in members}


def test_the_device_types_are_the_headers():
    header = _enum("DLDeviceType")
    assert len(header) >= 19  # DLPack 1.3 (and kDLAscend)
    by_name = {name.lower(): value for name, value in header.items()}
    # DeviceType.CUDA_HOST is kDLCUDAHost: the same name, in another case and without "_"
    ours = {"kdl" + m.name.replace("_", "").lower(): m.value for m in dl.DeviceType}
    assert ours == by_name


@pytest.mark.parametrize("value", range(-1, 40))
def test_the_importer_knows_exactly_the_headers_device_types(value):
    defined = value in _enum("DLDeviceType").values()
    capsule = Producer(payload=bytes(4), shape=(4,), strides=(1,), device_type=value).__dlpack__(
        max_version=(1, 3)
    )
    problem = _core._layout_problem(capsule)
    assert (problem is None) == defined, problem
    if not defined:
        assert f"unknown DLPack device type {value}" in problem


def test_the_type_codes_are_the_headers():
    assert _core._DLPACK_TYPE_CODES == _enum("DLDataTypeCode")


def test_the_flags_are_the_headers():
    defines = re.findall(r"#define\s+(DLPACK_FLAG_BITMASK_\w+)\s+\(1UL << (\d+)UL\)", _header())
    assert defines
    assert _core._DLPACK_FLAGS == {name: 1 << int(bit) for name, bit in defines}
    assert _model.KNOWN_FLAGS == sum(1 << int(bit) for _, bit in defines)


@pytest.mark.parametrize("code", range(0, 30))
def test_a_type_code_is_well_formed_exactly_when_the_header_defines_it(code):
    # a width dlinterop has no DType for is still DLPack's (bits 24: no type of dlinterop's)
    defined = code in _enum("DLDataTypeCode").values()
    for bits in (8, 24):
        capsule = Producer(payload=bytes(12), shape=(4,), strides=(1,), code=code, bits=bits)
        problem = _core._layout_problem(capsule.__dlpack__(max_version=(1, 3)))
        assert (problem is None) == defined, (bits, problem)


def test_layout_problem_names_what_dlpack_itself_rules_out():
    def problem(**fields):
        fields = {"payload": bytes(4), "shape": (4,), "strides": (1,), **fields}
        capsule = Producer(**fields).__dlpack__(max_version=(1, 3))
        return _core._layout_problem(capsule)

    assert problem() is None
    assert "NULL data pointer" in problem(null_data=True)
    assert "bits=0" in problem(bits=0)
    assert "negative dimension" in problem(shape=(-1,), payload=b"")
    assert problem(lanes=4) is None  # DLPack's, only not dlinterop's
    assert _core._layout_problem(object()) is None
    assert _core._layout_problem(Producer(name="other").__dlpack__()) is None
