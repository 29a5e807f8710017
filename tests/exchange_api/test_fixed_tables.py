"""dl.exchange_api_for for pyarrow's Array and Tensor and Warp's array: objects whose memory
and layout never change, described once by their own __dlpack__ and then read from a
per-object record (views and owned tensors), that record dropped as the object dies;
the framework's objects on the way back; refusals; threads."""

import ctypes
import gc
import sys
import threading
from ctypes import POINTER, byref

import numpy as np
import pytest

import dlinterop as dl
import dlinterop.testing as dt
from dlinterop import frameworks
from dlinterop.testing import _table_rules as rules
from dlinterop.testing._model import NotApplicable
from dlinterop.testing._tables import Table
from exchange_api.helpers import ExchangeTable, dltensor_layout

from forge import READ_ONLY, DLManagedTensorVersioned, DLTensor


def _pyarrow():
    return pytest.importorskip("pyarrow")


def _warp():
    wp = pytest.importorskip("warp")
    wp.config.quiet = True
    wp.init()
    return wp


def arrow_array():
    pa = _pyarrow()
    return pa.array(np.arange(10, dtype=np.float32)).slice(2, 6)  # an offset into its buffer


def arrow_tensor():
    pa = _pyarrow()
    return pa.Tensor.from_numpy(np.arange(12, dtype=np.int64).reshape(3, 4).T)


def warp_array():
    wp = _warp()
    return wp.array(np.arange(6, dtype=np.float64).reshape(2, 3), dtype=wp.float64, device="cpu")


MAKERS = {"pyarrow.Array": arrow_array, "pyarrow.Tensor": arrow_tensor, "warp.array": warp_array}


def layout(dl_tensor):
    shape, strides = dltensor_layout(dl_tensor)
    return (
        dl_tensor.data + dl_tensor.byte_offset,
        (dl_tensor.dtype.code, dl_tensor.dtype.bits, dl_tensor.dtype.lanes),
        (dl_tensor.device.device_type, dl_tensor.device.device_id),
        shape,
        strides,
    )


def own_layout(obj):
    """What the framework's own export says: through dl.from_dlpack (which calls it)."""
    t = dl.from_dlpack(obj)
    device = tuple(int(v) for v in t.__dlpack_device__())
    return (t.data_ptr, None, device, t.shape, t.strides), t


@pytest.mark.parametrize("family", MAKERS)
def test_view_is_the_frameworks_own_export_in_place(family):
    x = MAKERS[family]()
    table = ExchangeTable(dl.exchange_api_for(type(x)))
    assert dl.exchange_api_for(type(x)) is dl.exchange_api_for(x)
    first, second = table.view(x), table.view(x)
    (data, _, device, shape, strides), t = own_layout(x)
    got = layout(first)
    assert got == layout(second)
    assert (got[0], got[2], got[3], got[4]) == (data, device, shape, strides)
    assert got[1] == (t.dtype.code, t.dtype.bits, 1)
    assert bool(first.shape) and bool(first.strides)
    # Every element where the view says it is.
    expected = np.asarray(t)
    itemsize = expected.itemsize
    for index in np.ndindex(*shape):
        offset = sum(i * s for i, s in zip(index, strides)) * itemsize
        got_bytes = ctypes.string_at(first.data + first.byte_offset + offset, itemsize)
        assert got_bytes == expected[index].tobytes()


def test_pyarrow_view_points_into_the_arrays_buffer():
    x = arrow_array()
    view = ExchangeTable(dl.exchange_api_for(type(x))).view(x)
    assert view.data + view.byte_offset == x.buffers()[1].address + x.offset * 4


@pytest.mark.parametrize("family", MAKERS)
def test_the_record_lives_as_long_as_the_object(family):
    table = ExchangeTable(dl.exchange_api_for(type(MAKERS[family]())))
    gc.collect()
    before = frameworks._fixed_view_count()
    objects = [MAKERS[family]() for _ in range(5)]
    for x in objects:
        table.view(x)
    assert frameworks._fixed_view_count() == before + 5
    del objects, x
    gc.collect()
    assert frameworks._fixed_view_count() == before
    # A new object at a dead one's address gets its own description.
    for _ in range(20):
        y = MAKERS[family]()
        assert layout(table.view(y))[0] == own_layout(y)[0][0]
        del y


@pytest.mark.parametrize("family", MAKERS)
def test_owned_tensor_holds_the_object_and_releases_it_once(family):
    x = MAKERS[family]()
    table = ExchangeTable(dl.exchange_api_for(type(x)))
    view = table.view(x)
    before = sys.getrefcount(x)
    managed = table.managed(x)
    m = managed.contents
    assert sys.getrefcount(x) == before + 1
    assert layout(m.dl_tensor) == layout(view)
    assert (m.version.major, m.version.minor) == (1, 3)
    # READ_ONLY where the framework's own export says so (pa.Array's); not where it said
    # nothing (Warp's legacy capsule: dlinterop only assumes read-only memory there).
    assert bool(m.flags & READ_ONLY) == (own_layout(x)[1].readonly_reason == "flag")
    assert family != "pyarrow.Array" or m.flags & READ_ONLY
    expected = ctypes.string_at(view.data + view.byte_offset, 8)
    del view
    m.deleter(managed)
    assert sys.getrefcount(x) == before
    managed = table.managed(x)
    address = managed.contents.dl_tensor.data + managed.contents.dl_tensor.byte_offset
    del x
    gc.collect()
    assert ctypes.string_at(address, 8) == expected  # the owned tensor keeps the memory
    managed.contents.deleter(managed)


@pytest.mark.parametrize("family", MAKERS)
def test_to_py_gives_the_frameworks_object_sharing_the_memory(family):
    x = MAKERS[family]()
    table = ExchangeTable(dl.exchange_api_for(type(x)))
    t = dl.arange(6, dtype="float32")
    managed = ExchangeTable(dl.Tensor.__dlpack_c_exchange_api__).managed(t)
    result = table.to_object(managed)
    base = {"pyarrow.Array": "Array", "pyarrow.Tensor": "Tensor", "warp.array": "array"}
    assert isinstance(result, getattr(sys.modules[family.split(".")[0]], base[family]))
    assert dl.from_dlpack(result).data_ptr == t.data_ptr
    assert np.asarray(dl.from_dlpack(result)).tolist() == list(range(6))


def test_what_pyarrow_cannot_export_is_refused_as_pyarrow_refuses_it():
    pa = _pyarrow()
    x = pa.array([1.0, None, 3.0])  # nulls: pyarrow's __dlpack__ refuses
    with pytest.raises(Exception) as own:
        x.__dlpack__(max_version=(1, 3))
    table = ExchangeTable(dl.exchange_api_for(type(x)))
    with pytest.raises(Exception) as ours:
        table.view_of(id(x), byref(DLTensor()))
    assert (type(ours.value), str(ours.value)) == (type(own.value), str(own.value))


@pytest.mark.parametrize("family", MAKERS)
@pytest.mark.parametrize("obj", [np.zeros(3), dl.zeros(3), [1.0]], ids=["numpy", "dl", "list"])
def test_other_objects_are_refused(family, obj):
    table = ExchangeTable(dl.exchange_api_for(type(MAKERS[family]())))
    with pytest.raises(TypeError, match=f"takes {family} objects"):
        table.view_of(id(obj), byref(DLTensor()))
    managed = POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError, match=f"takes {family} objects"):
        table.from_py(id(obj), byref(managed))
    assert not managed


@pytest.mark.parametrize("name, family", [("pyarrow", "pyarrow.Array"), ("warp", "warp.array")])
@pytest.mark.parametrize("rule_id", sorted(rules.CHECKS))
def test_the_checkers_table_rules_pass(name, family, rule_id):
    MAKERS[family]()  # the framework, or a skip
    table = Table(dl.exchange_api_for(type(MAKERS[family]())))
    if rule_id == "producer.exchange-api-read-only":
        with pytest.raises(NotApplicable):  # the checker has no read-only array to hand
            rules.CHECKS[rule_id](dt.framework(name), table)
        return
    assert rules.CHECKS[rule_id](dt.framework(name), table) is None


def test_threads_describe_and_read_the_same_objects():
    pa = _pyarrow()
    arrays = [pa.array(np.arange(i + 1, dtype=np.int32)) for i in range(16)]
    table = ExchangeTable(dl.exchange_api_for(pa.Array))
    failures = []

    def work():
        try:
            for _ in range(50):
                for a in arrays:
                    view = table.view(a)
                    assert view.data + view.byte_offset == a.buffers()[1].address
                    managed = table.managed(a)
                    managed.contents.deleter(managed)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
