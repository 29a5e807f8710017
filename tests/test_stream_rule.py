"""The one stream= rule, on export, import and Tensor.to: DLPack's Python specification
passes a stream for memory a GPU runtime orders (CUDA, CUDA managed, CUDA host, ROCm, ROCm
host); every other device takes None or -1. CUDA refuses 0 (ambiguous there), ROCm takes it
as its default stream. No GPU is needed: ROCm and CUDA tensors here are forged, and only
carried (dlinterop issues no work on them)."""

import pytest

import dlinterop as dl

from forge import forge

CUDA, CUDA_HOST, ROCM, ROCM_HOST, CUDA_MANAGED = 2, 3, 10, 11, 13
WITH_STREAMS = [ROCM, ROCM_HOST]  # carried without a runtime: export needs none
WITHOUT_STREAMS = [1, 4, 7, 9]  # cpu, opencl, vulkan, metal


def _carried(device_type):
    forged = forge(shape=(3,), device=(device_type, 0))
    return forged, dl.from_dlpack(forged.capsule)


@pytest.mark.parametrize("device_type", WITH_STREAMS)
@pytest.mark.parametrize("stream", [None, -1, 0, 1, 2, 0x7F00])
def test_a_tensor_on_a_device_with_streams_exports_with_any_stream_it_takes(device_type, stream):
    forged, t = _carried(device_type)
    capsule = t.__dlpack__(stream=stream, max_version=(1, 3))
    assert dl.from_dlpack(capsule).device == t.device
    del capsule, t
    forged.release()


@pytest.mark.parametrize("device_type", WITH_STREAMS)
def test_a_stream_below_minus_one_is_refused_on_a_device_with_streams(device_type):
    forged, t = _carried(device_type)
    with pytest.raises(ValueError, match="invalid stream -2"):
        t.__dlpack__(stream=-2, max_version=(1, 3))
    del t
    forged.release()


@pytest.mark.parametrize("device_type", WITHOUT_STREAMS)
def test_a_tensor_on_a_device_without_streams_takes_none_or_minus_one(device_type):
    forged, t = _carried(device_type)
    for stream in (None, -1):
        t.__dlpack__(stream=stream, max_version=(1, 3))
    with pytest.raises(ValueError, match="stream must be None or -1"):
        t.__dlpack__(stream=5, max_version=(1, 3))
    del t
    forged.release()


class _Producer:
    """A producer on any device that records the keywords it is asked with."""

    def __init__(self, device_type):
        self.device_type = device_type
        self.asked = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, **kwargs):
        self.asked.append(kwargs)
        self.forged = forge(shape=(3,), device=(self.device_type, 0))
        return self.forged.capsule


@pytest.mark.parametrize("device_type", [CUDA, CUDA_HOST, CUDA_MANAGED, ROCM, ROCM_HOST])
def test_import_passes_the_stream_on_for_every_device_with_streams(device_type):
    producer = _Producer(device_type)
    t = dl.from_dlpack(producer, stream=7)
    assert producer.asked[-1].get("stream") == 7
    assert t.device == dl.Device((device_type, 0))


@pytest.mark.parametrize("device_type", [ROCM, ROCM_HOST])
def test_import_passes_stream_0_on_to_rocm(device_type):
    producer = _Producer(device_type)
    dl.from_dlpack(producer, stream=0)
    assert producer.asked[-1].get("stream") == 0


@pytest.mark.parametrize("device_type", [CUDA, CUDA_HOST, CUDA_MANAGED])
def test_import_refuses_stream_0_for_cuda_before_asking_the_producer(device_type):
    producer = _Producer(device_type)
    with pytest.raises(ValueError, match="stream=0 is ambiguous"):
        dl.from_dlpack(producer, stream=0)
    assert producer.asked == []


@pytest.mark.parametrize("device_type", WITHOUT_STREAMS)
def test_import_from_a_device_without_streams_takes_none_or_minus_one(device_type):
    producer = _Producer(device_type)
    dl.from_dlpack(producer, stream=-1)
    assert "stream" not in producer.asked[-1]
    with pytest.raises(ValueError, match="stream must be None or -1"):
        dl.from_dlpack(producer, stream=5)


def test_the_three_routes_agree_on_a_host_tensor():
    t = dl.zeros(3)
    with pytest.raises(ValueError, match=r"^stream must be None or -1 for a tensor on cpu:0, "):
        t.__dlpack__(stream=5)
    # The memory named by its device, not by its device type's number ("device 1").
    with pytest.raises(ValueError, match=r"^stream must be None or -1 for memory on cpu:0, "):
        dl.from_dlpack(_Producer(1), stream=5)
    with pytest.raises(ValueError, match=r"^stream must be None or -1 for a copy from cpu:0 "):
        t.to("cpu", copy=True, stream=5)
