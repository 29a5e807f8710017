"""dl.DeviceType and dl.Device (every DLPack 1.3 device type)."""

import pickle

import pytest

import dlinterop as dl

# -- DeviceType -------------------------------------------------------------------------

DEVICE_TYPES = {
    "CPU": 1,
    "CUDA": 2,
    "CUDA_HOST": 3,
    "OPENCL": 4,
    "VULKAN": 7,
    "METAL": 8,
    "VPI": 9,
    "ROCM": 10,
    "ROCM_HOST": 11,
    "EXT_DEV": 12,
    "CUDA_MANAGED": 13,
    "ONEAPI": 14,
    "WEBGPU": 15,
    "HEXAGON": 16,
    "MAIA": 17,
    "TRN": 18,
    "TPU": 19,
    "TPU_HOST": 20,
    "ASCEND": 21,
}


@pytest.mark.parametrize("name, value", DEVICE_TYPES.items())
def test_device_type_values(name, value):
    member = getattr(dl.DeviceType, name)
    assert member == value
    assert isinstance(member, int)
    assert dl.DeviceType(value) is member


def test_device_type_has_exactly_the_spec_members():
    assert {m.name: m.value for m in dl.DeviceType} == DEVICE_TYPES


# -- Device -----------------------------------------------------------------------------


@pytest.mark.parametrize("name, value", DEVICE_TYPES.items())
def test_device_type_attribute_is_lower_case_name(name, value):
    for dev in (
        dl.Device(dl.DeviceType[name], 3),
        dl.Device(value, 3),
        dl.Device(name.lower(), 3),
        dl.Device(f"{name.lower()}:3"),
    ):
        assert dev.type == name.lower()
        assert dev.index == 3
        assert dev.__dlpack_device__() == (dl.DeviceType[name], 3)
        assert type(dev.__dlpack_device__()[0]) is dl.DeviceType
        assert str(dev) == f"{name.lower()}:3"
        assert dev == f"{name.lower()}:3"


def test_device_from_string_with_index():
    dev = dl.Device("cuda:1")
    assert dev.type == "cuda"
    assert dev.index == 1
    assert str(dev) == "cuda:1"
    assert dev == "cuda:1"
    assert dev.__dlpack_device__() == (dl.DeviceType.CUDA, 1)


def test_device_from_string_without_index_is_index_zero():
    dev = dl.Device("cpu")
    assert (dev.type, dev.index) == ("cpu", 0)
    assert str(dev) == "cpu:0"
    assert dev == "cpu"
    assert dev == "cpu:0"
    assert dev.__dlpack_device__() == (dl.DeviceType.CPU, 0)


def test_device_from_device_type_and_index():
    dev = dl.Device(dl.DeviceType.CUDA, 1)
    assert dev == dl.Device("cuda:1")
    assert dev == "cuda:1"
    assert dev != "cuda:0"
    assert dev != "cpu"
    assert dev != dl.Device("cuda_host:1")


@pytest.mark.parametrize("spec", ["cuda:1", ("cuda", 1), (dl.DeviceType.CUDA, 1), (2, 1)])
def test_device_constructions_agree(spec):
    dev = dl.Device(*spec) if isinstance(spec, tuple) else dl.Device(spec)
    assert dev == dl.Device("cuda:1")
    assert hash(dev) == hash(dl.Device("cuda:1"))


def test_device_from_pair_and_from_device():
    assert dl.Device((2, 1)) == "cuda:1"
    assert dl.Device(dl.Device("cuda:1")) == "cuda:1"
    assert dl.Device(dl.DeviceType.ROCM) == "rocm:0"


def test_device_hash_matches_its_canonical_string():
    for s in ("cpu:0", "cuda:1", "cuda_managed:2"):
        assert hash(dl.Device(s)) == hash(s)


def test_device_is_case_insensitive_on_names():
    assert dl.Device("CUDA:1") == dl.Device("cuda:1")


def test_device_attributes_are_read_only():
    dev = dl.Device("cuda:1")
    with pytest.raises(AttributeError):
        dev.index = 2
    with pytest.raises(AttributeError):
        dev.type = "cpu"
    assert dev == "cuda:1"


def test_device_pickles():
    dev = dl.Device("cuda_host:2")
    assert pickle.loads(pickle.dumps(dev)) == dev


def test_device_compares_unequal_to_unrelated_objects():
    assert dl.Device("cpu") != 1
    assert dl.Device("cpu") != None  # noqa: E711
    assert dl.Device("cpu") != "gpu"


@pytest.mark.parametrize(
    "args",
    [
        ("gpu",),
        ("cuda:x",),
        ("cuda:",),
        ("cuda:-1",),
        ("",),
        (5,),
        (6,),
        (0,),
        (22,),
        ("cuda", -1),
        ("tpu_hosts", 0),
        (99, 0),
        ((2, -1),),
        ((99, 0),),
    ],
)
def test_device_bad_values_are_value_error(args):
    with pytest.raises(ValueError):
        dl.Device(*args)


@pytest.mark.parametrize(
    "args",
    [
        (1.5,),
        (None,),
        (object(),),
        (b"cpu",),
        ("cuda", 1.0),
        ("cuda", "1"),
        ((2.0, 0),),
        ((1, "0"),),
    ],
)
def test_device_bad_types_are_type_error(args):
    with pytest.raises(TypeError):
        dl.Device(*args)


def test_device_index_out_of_int32_range_is_value_error():
    with pytest.raises(ValueError):
        dl.Device("cuda:3000000000")


def test_device_equality_with_out_of_range_string_is_false():
    assert (dl.Device("cpu") == "cuda:3000000000") is False


def test_device_index_out_of_int32_range_given_separately_is_value_error():
    with pytest.raises(ValueError):
        dl.Device("cuda", 2**31)


def test_the_data_types_table_lists_every_dtype_once_with_its_dlpack_triple():
    # docs/concepts.md's table: every DType dlinterop exports, with its (code, bits, lanes).
    import os
    import re

    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "concepts.md")
    text = open(page).read()
    table = text[text.index("| dtype | DLPack (code, bits, lanes)") :]
    table = table[: table.index("\n\n")]
    listed = {}
    for row in table.splitlines()[2:]:
        names_cell, triple_cell = row.split("|")[1:3]
        for name in re.findall(r"`(\w+)`", names_cell):
            assert name not in listed, name
            listed[name] = triple_cell.strip()
    dtypes = {n: getattr(dl, n) for n in dl.__all__ if isinstance(getattr(dl, n), dl.DType)}
    assert set(listed) == {d.name for d in dtypes.values()}
    for d in dtypes.values():
        code, bits, lanes = d.__dlpack_data_type__()
        cell = listed[d.name]
        assert (
            re.search(rf"\b{code}\b|\b\d+ to \d+\b", cell)
            and str(bits) in cell
            and cell.endswith(f"{lanes})")
        ), (d.name, cell)
