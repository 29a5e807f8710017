"""dlinterop's exchange table used by a C consumer compiled on the fly
(tests/support/c_exchange_consumer.c), as a C extension would use it."""

import sys

import numpy as np
import pytest

import dlinterop as dl
from exchange_api.helpers import ALLOCATIONS, CPU, CUDA, readonly_tensor

from forge import READ_ONLY, c_strides


def test_c_consumer_reads_the_header(c_consumer):
    assert c_consumer.header(dl.zeros((1,))) == (1, 3, True, True)


def test_c_consumer_round_trips_a_tensor(c_consumer, live_counters):
    t = dl.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 4)[1:])
    refs = sys.getrefcount(t)
    before = live_counters()
    u = c_consumer.round_trip(t)
    assert type(u) is dl.Tensor and u is not t
    assert (u.data_ptr, u.shape, u.strides, u.dtype) == (t.data_ptr, t.shape, t.strides, t.dtype)
    assert sys.getrefcount(u) == 2
    np.asarray(u)[0, 0] = -1
    assert np.asarray(t)[0, 0] == -1
    # dlinterop's own export made back into a Tensor: the export is released at once and
    # u holds what keeps t's memory alive (the NumPy array, or t where t holds NumPy's
    # capsule), not a chain through t.
    assert live_counters() == before
    assert u.owner is t.owner or u.owner is t
    del u
    assert sys.getrefcount(t) == refs
    assert live_counters() == before


def test_c_consumer_round_trip_keeps_read_only(c_consumer):
    t = readonly_tensor()
    assert c_consumer.export_info(t)[:2] == ((1, 3), READ_ONLY)
    assert c_consumer.round_trip(t).readonly


def test_c_consumer_sees_type_error_for_other_objects(c_consumer):
    with pytest.raises(TypeError, match="dlinterop.Tensor"):
        c_consumer.round_trip([1, 2], dl.zeros((1,)))


@pytest.mark.parametrize("shape, dtype", ALLOCATIONS.values(), ids=ALLOCATIONS.keys())
def test_c_consumer_allocates_through_the_table(c_consumer, shape, dtype, live_counters):
    before = live_counters()
    t = c_consumer.allocate(dl.zeros((1,)), shape, dtype, (CPU, 0))
    assert type(t) is dl.Tensor
    assert t.shape == shape
    assert t.dtype.__dlpack_data_type__() == dtype
    assert t.strides == c_strides(shape)
    assert t.data_ptr % 256 == 0
    assert not t.readonly
    assert live_counters()["live_buffers"] == before["live_buffers"] + 1
    del t
    assert live_counters() == before


@pytest.mark.parametrize(
    "shape, dtype, device, kind",
    [
        ((2, 3), (3, 8, 1), (CPU, 0), ValueError),
        ((2, -1), (2, 32, 1), (CPU, 0), ValueError),
        ((1,) * 65, (2, 32, 1), (CPU, 0), ValueError),
        pytest.param(
            (2, 3),
            (2, 32, 1),
            (CUDA, 0),
            Exception,
            marks=pytest.mark.skipif(
                dl.cuda.is_available(), reason="needs a machine without a usable GPU"
            ),
        ),
    ],
    ids=["bad dtype", "negative dim", "ndim 65", "cuda without gpu"],
)
def test_c_consumer_allocator_errors_raise_the_named_kind(c_consumer, shape, dtype, device, kind):
    with pytest.raises(kind, match="dlinterop allocator") as info:
        c_consumer.allocate(dl.zeros((1,)), shape, dtype, device)
    assert type(info.value) is not SystemError


def test_c_consumer_views_a_tensor(c_consumer):
    t = dl.from_dlpack(np.arange(24, dtype=np.uint8).reshape(4, 6)[::2, 1:])
    info = c_consumer.view(t)
    assert info["data"] + info["byte_offset"] == t.data_ptr
    assert info["device"] == (CPU, 0)
    assert info["dtype"] == (1, 8, 1)
    assert (info["ndim"], info["shape"], info["strides"]) == (2, t.shape, t.strides)


def test_c_consumer_gets_null_cpu_stream(c_consumer):
    assert c_consumer.current_stream(dl.zeros((1,)), CPU, 0) == 0
