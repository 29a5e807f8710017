"""The table of device kinds (src/device_kinds.h), the one answer to "what kind of device is
this?": its Python view (dlinterop._core._device_kind) reads the C table's rows, dl.DeviceType
is made from them, and its columns agree with what the peers do with such memory (NumPy takes
exactly the host-readable device types; PyTorch names each as the table says)."""

import ctypes
import json
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from dlinterop.testing._conformance import Producer

from forge import forge

KINDS = {kind.value: kind for kind in _core._DEVICE_KINDS}


def test_every_device_type_is_one_row_and_one_member():
    assert [kind.value for kind in _core._DEVICE_KINDS] == [int(t) for t in dl.DeviceType]
    for kind in _core._DEVICE_KINDS:
        assert dl.DeviceType[kind.name.upper()] == kind.value
        assert dl.Device(kind.value, 0).type == kind.name


@pytest.mark.parametrize("value", [-(2**40), -1, 0, 5, 6, 22, 31, 32, 2**40])
def test_a_value_dlpack_does_not_define_has_no_row(value):
    assert _core._device_kind(value) is None


@pytest.mark.parametrize(
    "x", ["cuda_host:1", (3, 1), dl.Device("cuda_host", 1), dl.DeviceType.CUDA_HOST, 3]
)
def test_a_row_is_found_from_anything_a_device_is_made_from(x):
    assert _core._device_kind(x) is KINDS[3]


def test_a_tensors_row_is_its_devices():
    assert _core._device_kind(dl.zeros(2)) is KINDS[1]


def test_plain_host_memory_is_the_cpus_alone():
    assert [k.name for k in _core._DEVICE_KINDS if k.host] == ["cpu"]


def test_what_dlinterop_allocates_is_the_host_allocators_and_the_cuda_layers():
    assert [k.name for k in _core._DEVICE_KINDS if k.allocatable] == [
        "cpu",
        "cuda",
        "cuda_host",
        "cuda_managed",
    ]
    for kind in _core._DEVICE_KINDS:
        assert kind.allocatable == (kind.host or kind.cuda)
        assert kind.alignment == (256 if kind.cuda else 0)


def test_only_cuda_device_memory_crosses_through_cuda_ipc():
    assert [k.name for k in _core._DEVICE_KINDS if k.cuda_ipc] == ["cuda"]


def test_stream_zero_is_a_rule_of_devices_with_streams():
    for kind in _core._DEVICE_KINDS:
        assert not kind.stream_zero or kind.streams
        assert not kind.cuda or kind.streams
        assert not kind.pinned or kind.host_readable


def _numpy_takes(device_type):
    p = Producer(payload=bytes(4), shape=(4,), strides=(1,), device_type=device_type)
    try:
        np.from_dlpack(p)
    except (RuntimeError, BufferError) as e:  # NumPy 2.5 raises BufferError, earlier RuntimeError
        assert "Unsupported device" in str(e)
        return False
    return True


@pytest.mark.parametrize("value", sorted(KINDS))
def test_host_readable_memory_is_what_numpy_takes(value):
    assert KINDS[value].host_readable == _numpy_takes(value)
    assert KINDS[value].numpy == ("cpu" if KINDS[value].host_readable else None)


# What torch.from_dlpack makes of memory on every device type, in a child process: without the
# device's runtime, PyTorch fails an internal assertion on OpenCL memory and crashes at exit.
_TORCH_NAMES = """
import json, torch
from dlinterop.testing._conformance import Producer
answers = {}
for value in VALUES:
    capsule = Producer(payload=bytes(4), shape=(4,), strides=(1,), device_type=value).__dlpack__(
        max_version=(1, 3))
    try:
        answers[value] = torch.from_dlpack(capsule).device.type
    except BufferError as e:
        answers[value] = None if "Unsupported device_type" in str(e) else repr(e)
    except Exception as e:   # a device PyTorch knows, without its runtime here
        answers[value] = "needs a runtime: " + repr(e)
print(json.dumps([answers, bool(torch.version.hip)]))
"""


def test_the_torch_names_are_what_torch_from_dlpack_gives():
    pytest.importorskip("torch")
    values = [value for value in KINDS if value != dl.DeviceType.OPENCL]
    code = _TORCH_NAMES.replace("VALUES", repr(values))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    answers, rocm_build = json.loads(out.stdout.splitlines()[-1])
    for value in values:
        answer, expected = answers[str(value)], KINDS[value].torch
        if expected == "hip" and rocm_build:
            expected = "cuda"
        if answer is not None and answer.startswith("needs a runtime"):
            assert expected is not None, (value, answer)
        else:
            assert answer == expected, value


def _on(device_type, values=(1.5, 2.5, 3.5, 4.5)):
    """A forged capsule over host memory holding float32 `values`, said to be on
    `device_type`, and the Tensor dlinterop imports from it."""
    forged = forge(shape=(len(values),), dtype=(2, 32, 1), device=(device_type, 0))
    data = np.array(values, np.float32).tobytes()
    ctypes.memmove(forged.element_ptr, data, len(data))
    return forged, dl.from_dlpack(forged.capsule)


def test_rocm_host_memory_is_read_by_the_host_as_numpy_reads_it():
    forged, t = _on(dl.DeviceType.ROCM_HOST)
    assert t.device == dl.Device("rocm_host:0")
    assert t.tolist() == [1.5, 2.5, 3.5, 4.5]
    assert t[1].item() == 2.5
    assert np.asarray(t).tolist() == np.from_dlpack(t).tolist() == [1.5, 2.5, 3.5, 4.5]
    assert memoryview(t).tolist() == [1.5, 2.5, 3.5, 4.5]
    assert pickle.loads(pickle.dumps(t)).tolist() == [1.5, 2.5, 3.5, 4.5]
    assert "2.5" in repr(t)
    del t
    forged.release()


def test_rocm_host_memory_is_written_by_the_host():
    forged, t = _on(dl.DeviceType.ROCM_HOST)
    t[0] = 9.0
    np.asarray(t)[3] = 8.0
    assert np.frombuffer(ctypes.string_at(forged.element_ptr, 16), np.float32).tolist() == [
        9.0,
        2.5,
        3.5,
        8.0,
    ]
    del t
    forged.release()


def test_rocm_host_memory_is_copied_to_the_host_by_the_host():
    forged, t = _on(dl.DeviceType.ROCM_HOST)
    for copy in (t.to("cpu"), t[::2].to("cpu"), dl.from_dlpack(t, device="cpu")):
        assert copy.device == dl.Device("cpu")
        assert copy.tolist() == t.tolist()[:: 1 if copy.shape == (4,) else 2]
    exported = dl.from_dlpack(t.__dlpack__(max_version=(1, 3), dl_device=(1, 0)))
    assert exported.device == dl.Device("cpu") and exported.tolist() == t.tolist()
    del t, copy, exported
    forged.release()


def test_rocm_device_memory_is_not_read_by_the_host():
    forged, t = _on(dl.DeviceType.ROCM)
    with pytest.raises(BufferError, match="rocm"):
        t.tolist()
    with pytest.raises(BufferError, match="rocm"):
        t.to("cpu")
    with pytest.raises(TypeError, match="rocm"):
        pickle.dumps(t)
    del t
    forged.release()


@pytest.mark.parametrize("device_type", list(dl.DeviceType))
def test_the_cuda_array_interface_describes_memory_on_one_gpu(device_type):
    forged, t = _on(device_type)
    if device_type in (dl.DeviceType.CUDA, dl.DeviceType.CUDA_MANAGED):
        assert t.__cuda_array_interface__["data"][0] == t.data_ptr
    else:
        with pytest.raises(AttributeError, match="no __cuda_array_interface__"):
            t.__cuda_array_interface__  # noqa: B018
    del t
    forged.release()


def test_the_cuda_layers_alignment_is_the_most_that_can_be_asked_of_it():
    with pytest.raises(ValueError, match="^cuda allocations are 256-byte aligned; alignment=512"):
        dl.zeros(4, device="cuda", shared=True, alignment=512)
    assert dl.zeros(4, alignment=4096).data_ptr % 4096 == 0


def test_the_devices_table_of_the_docs_is_the_device_table():
    # docs/concepts.md's table: a row per device type, each column what the table says.
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "concepts.md")
    text = open(page).read()
    table = text[text.index("| device | DLPack | host-readable |") :]
    table = table[: table.index("\n\n")]
    rows = [[cell.strip() for cell in row.split("|")[1:-1]] for row in table.splitlines()[2:]]
    assert [row[0] for row in rows] == [f"`{kind.name}`" for kind in _core._DEVICE_KINDS]
    for row, kind in zip(rows, _core._DEVICE_KINDS):
        name, dlpack, readable, streams, made, ipc, numpy_name, torch_name = row
        assert dlpack.endswith(f"({kind.value})"), row
        assert readable == ("yes" if kind.host_readable else "no"), row
        assert streams == (
            ("yes, 0 its default" if kind.stream_zero else "yes, 0 refused")
            if kind.streams
            else "no"
        ), row
        assert made == (
            "the host"
            if kind.host
            else "the CUDA layer"
            if kind.cuda
            else "copied out by the host"
            if kind.host_readable
            else "carried only"
        ), row
        assert ipc == ("yes" if kind.cuda_ipc else "no"), row
        assert numpy_name == (f"`{kind.numpy}`" if kind.numpy else "—"), row
        assert torch_name == (f"`{kind.torch}`" if kind.torch else "—"), row


@pytest.mark.parametrize("device", ["cpu:0", "rocm:0", "rocm_host:0", "vulkan:0"])
def test_dl_cuda_takes_no_device_outside_the_cuda_layer(device):
    with pytest.raises(ValueError, match=f"^{device} is not a CUDA device"):
        dl.cuda.Stream(device)


def test_the_cuda_layer_allocates_exactly_the_tables_cuda_rows():
    # src/cuda_layer.h numbers the kinds of memory it allocates as DLPack's device types (and
    # IPC-capable device memory past them), so that dlinterop._cuda is handed device types.
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "cuda_layer.h")
    text = open(header).read()
    block = text[text.index("enum {\n  DLI_CUDA_DEVICE") :]
    kinds = dict(re.findall(r"(DLI_CUDA_\w+) = (\w+)", block[: block.index("};")]))
    del kinds["DLI_CUDA_DEVICE_IPC"]
    assert {int(value, 0) for value in kinds.values()} == {
        kind.value for kind in _core._DEVICE_KINDS if kind.cuda
    }


@pytest.mark.parametrize("device_type", [1, 3, 11, 13])
def test_numpys_hand_back_wraps_plain_host_memory_alone(device_type):
    # Other host-readable memory goes through np.from_dlpack, whose array's base (the
    # capsule) says where the memory is.
    if not dl.build_info()["numpy_route_built"]:
        pytest.skip("built without NumPy's headers: there is no native hand-back")
    previous = _core._set_numpy_route(True)
    forged, t = _on(device_type)
    try:
        dl.to_framework(dl.zeros(1), like=np)  # decides the hand-back
        assert _core._numpy_handback()
        a = dl.to_framework(t, like=np)
        wrapped = a.base is t
        assert a.tolist() == [1.5, 2.5, 3.5, 4.5]
        del a
    finally:
        _core._set_numpy_route(previous)
    assert wrapped == (device_type == dl.DeviceType.CPU)
    del t
    forged.release()
