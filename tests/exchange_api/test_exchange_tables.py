"""dl.exchange_api_for: which DLPack 1.3 exchange table each type gets, what all of them
share, and the generic table over __dlpack__ (the NumPy table: test_numpy_table.py), called
through ctypes as a C consumer would."""

from ctypes import POINTER, byref, c_void_p

import numpy as np
import pytest

import dlinterop as dl
from exchange_api.helpers import (
    CPU,
    FUNCTIONS,
    DLPackExchangeAPI,
    ExchangeTable,
    assert_describes,
    producer_type,
    table_address,
)

from forge import READ_ONLY, DLManagedTensorVersioned, DLTensor

NUMPY = ExchangeTable(dl.exchange_api_for(np.ndarray))


def base():
    return np.arange(60, dtype=np.float32).reshape(3, 4, 5)


def test_tables_are_version_1_3_capsules_with_all_functions():
    for cls in (np.ndarray, producer_type()):
        table = ExchangeTable(dl.exchange_api_for(cls))
        assert (table.api.header.version.major, table.api.header.version.minor) == (1, 3)
        assert not table.api.header.prev_api
        for name in FUNCTIONS:
            assert getattr(table.api, name), f"{name} is NULL"


def test_dl_tensor_gets_its_own_published_table():
    assert dl.exchange_api_for(dl.Tensor) is dl.Tensor.__dlpack_c_exchange_api__
    assert dl.exchange_api_for(dl.zeros(2)) is dl.Tensor.__dlpack_c_exchange_api__


def test_tables_are_cached_per_type():
    class Sub(np.ndarray):
        pass

    numpy_table = dl.exchange_api_for(np.ndarray)
    assert dl.exchange_api_for(np.zeros(2)) is numpy_table
    assert dl.exchange_api_for(Sub) is numpy_table
    producer = producer_type()
    assert dl.exchange_api_for(producer) is dl.exchange_api_for(producer())
    generic = ExchangeTable(dl.exchange_api_for(producer)).address
    assert generic != NUMPY.address != table_address(dl.Tensor)


@pytest.mark.parametrize("obj", [3, "text", object(), int, [1.0, 2.0]])
def test_objects_without_dlpack_are_refused(obj):
    with pytest.raises(TypeError, match="no __dlpack__"):
        dl.exchange_api_for(obj)


def test_allocator_and_stream_are_dlinterops():
    dl_api = DLPackExchangeAPI.from_address(table_address(dl.Tensor))
    for cls in (np.ndarray, producer_type()):
        table = ExchangeTable(dl.exchange_api_for(cls))
        assert table.api.managed_tensor_allocator == dl_api.managed_tensor_allocator
        stream = c_void_p(1)
        assert table.current_stream(CPU, 0, byref(stream)) == 0
        assert stream.value is None


@pytest.mark.parametrize("table", ["numpy", "generic"])
def test_read_only_array_gives_a_read_only_tensor(table):
    array = base()
    array.flags.writeable = False
    source = array if table == "numpy" else producer_type()(array)
    owner = NUMPY if table == "numpy" else ExchangeTable(dl.exchange_api_for(source))
    managed = owner.managed(source)
    try:
        assert managed.contents.flags & READ_ONLY
        assert_describes(managed.contents.dl_tensor, array)
    finally:
        managed.contents.deleter(managed)


def test_generic_table_calls_dlpack_once_per_export():
    producer = producer_type()
    obj = producer(np.arange(6, dtype=np.float64).reshape(2, 3)[:, ::-1])
    table = ExchangeTable(dl.exchange_api_for(producer))
    managed = table.managed(obj)
    assert producer.dlpack_calls == 1
    assert_describes(managed.contents.dl_tensor, obj.array)
    result = table.to_object(managed)
    assert type(result) is dl.Tensor
    np.testing.assert_array_equal(np.from_dlpack(result), obj.array)


def test_generic_table_refuses_a_view():
    producer = producer_type()
    obj = producer()
    with pytest.raises(BufferError, match="managed_tensor_from_py_object_no_sync"):
        ExchangeTable(dl.exchange_api_for(producer)).view_of(id(obj), byref(DLTensor()))
    assert producer.dlpack_calls == 0


def test_generic_table_refuses_objects_without_dlpack():
    table = ExchangeTable(dl.exchange_api_for(producer_type()))
    obj = object()
    with pytest.raises(TypeError, match="__dlpack__"):
        table.from_py(id(obj), byref(POINTER(DLManagedTensorVersioned)()))


# (PyTorch's tensors have a table of their own: test_torch_exchange_table.py.)
@pytest.mark.parametrize("module", ["array_api_strict"])
def test_generic_table_on_installed_producers(module):
    xp = pytest.importorskip(module)
    x = xp.reshape(xp.arange(12, dtype=xp.float32), (3, 4))[:, 1:]
    expected = np.from_dlpack(x)
    table = ExchangeTable(dl.exchange_api_for(type(x)))
    generic = ExchangeTable(dl.exchange_api_for(producer_type()))
    assert table.address == generic.address != NUMPY.address
    managed = table.managed(x)
    try:
        assert_describes(managed.contents.dl_tensor, expected)
    finally:
        managed.contents.deleter(managed)
