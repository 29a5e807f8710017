"""dl.from_dlpack as a consumer of producers' exchange tables: forged tables, the lookup
on the type, the per-type cache, and the fall-back to __dlpack__ when a table is absent,
unusable or refuses."""

import gc
import subprocess
import sys

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core
from exchange_api.helpers import CPU, ForgedTable, producer_type


def test_from_dlpack_imports_through_a_producer_table():
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    t = dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (1, 0)
    assert t.data_ptr == table.last_data()
    assert list(np.asarray(t)) == [1, 2, 3, 4]
    assert table.factory.deleted == 0
    del t
    gc.collect()
    assert table.factory.deleted == 1


def test_from_dlpack_accepts_any_1_x_minor_version():
    table = ForgedTable(version=(1, 7))
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    assert dl.from_dlpack(cls()).data_ptr == table.last_data()
    assert (table.calls, cls.dlpack_calls) == (1, 0)


def test_table_is_looked_up_on_the_type_not_the_instance(c_consumer):
    cls = producer_type()
    obj = cls()
    obj.__dlpack_c_exchange_api__ = c_consumer.raising_table()
    assert dl.from_dlpack(obj).data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1


def test_table_is_cached_per_type():
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    for _ in range(3):
        dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (3, 0)


def test_cache_follows_changes_to_the_type():
    """The cache is keyed on the type's version tag: assigning to a class attribute (as a
    monkeypatch does) is seen on the next import."""
    table = ForgedTable()
    cls = producer_type(__dlpack_c_exchange_api__=table.capsule)
    dl.from_dlpack(cls())
    cls.__dlpack_c_exchange_api__ = None
    dl.from_dlpack(cls())
    assert (table.calls, cls.dlpack_calls) == (1, 1)


@pytest.mark.parametrize("kind", ["numpy.ndarray", "Python class", "ndarray subclass"])
def test_cache_describes_a_type_once_until_it_changes(kind):
    """Imports of one type describe it once; a change to the type, once more. CPython 3.13
    stopped setting Py_TPFLAGS_VALID_VERSION_TAG, which the cache once required: there every
    import described its producer afresh (and, on free-threaded builds, replaced the cache
    entry under other threads' feet)."""
    array = np.arange(6.0)
    if kind == "numpy.ndarray":
        cls, make = np.ndarray, lambda: array
    elif kind == "Python class":
        # Not producer_type(): its call counter is a class attribute, a change per call.
        cls = type(
            "Plain",
            (),
            {
                "__dlpack__": lambda self, **kw: array.__dlpack__(**kw),
                "__dlpack_device__": lambda self: (CPU, 0),
            },
        )
        make = cls
    else:
        cls = type("Sub", (np.ndarray,), {})
        make = lambda: array.view(cls)  # noqa: E731
    dl.from_dlpack(make())
    before = _core._producer_descriptions_made()
    for _ in range(50):
        assert dl.from_dlpack(make()).data_ptr == array.ctypes.data
    assert _core._producer_descriptions_made() == before
    if kind != "numpy.ndarray":
        cls.marker = 1  # a new version tag
        dl.from_dlpack(make())
        dl.from_dlpack(make())
        assert _core._producer_descriptions_made() == before + 1


def test_cache_tells_types_apart():
    first, second = ForgedTable(), ForgedTable()
    cls_a = producer_type(__dlpack_c_exchange_api__=first.capsule)
    cls_b = producer_type(__dlpack_c_exchange_api__=second.capsule)
    cls_c = producer_type()
    for _ in range(3):
        assert dl.from_dlpack(cls_a()).data_ptr == first.last_data()
        assert dl.from_dlpack(cls_b()).data_ptr == second.last_data()
        dl.from_dlpack(cls_c())
    assert (first.calls, second.calls, cls_c.dlpack_calls) == (3, 3, 3)
    assert cls_a.dlpack_calls == cls_b.dlpack_calls == 0


UNUSABLE = {
    "None": lambda: None,
    "wrong capsule name": lambda: ForgedTable(name="not_the_exchange_api"),
    "major 2": lambda: ForgedTable(version=(2, 0)),
    "major 0": lambda: ForgedTable(version=(0, 9)),
    "NULL from_py": lambda: ForgedTable(from_py=False),
    "a string": lambda: "dlpack_exchange_api",
}


@pytest.mark.parametrize("make", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_unusable_table_falls_back_to_dlpack(make):
    table = make()
    attribute = table.capsule if isinstance(table, ForgedTable) else table
    cls = producer_type(__dlpack_c_exchange_api__=attribute)
    array = np.arange(5, dtype=np.int64)
    for _ in range(2):
        assert dl.from_dlpack(cls(array)).data_ptr == array.ctypes.data
    assert cls.dlpack_calls == 2
    if isinstance(table, ForgedTable):
        assert table.calls == 0


@pytest.mark.parametrize("name", ["__c_dlpack_exchange_api__", "__dlpack_c_exchange_api__"])
def test_int_address_is_never_dereferenced(name):
    # The withdrawn DLPack 1.2 spelling (a bare int address) carries nothing to check: an
    # int that is not a table would be dereferenced. It is ignored; __dlpack__ answers.
    table = ForgedTable()
    cls = producer_type(**{name: table.address})
    array = np.arange(3, dtype=np.float32)
    assert dl.from_dlpack(cls(array)).data_ptr == array.ctypes.data
    assert (table.calls, cls.dlpack_calls) == (0, 1)


def test_int_class_attribute_that_is_no_table_does_not_crash():
    # Run apart: before the fix this dereferenced address 8 and killed the interpreter.
    script = (
        "import numpy as np, dlinterop as dl\n"
        "class P:\n"
        "    __c_dlpack_exchange_api__ = 8\n"
        "    def __init__(self): self.a = np.arange(3.0)\n"
        "    def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)\n"
        "    def __dlpack_device__(self): return (1, 0)\n"
        "print(dl.from_dlpack(P()).shape)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(3,)"


def test_capsule_under_the_1_2_name_is_honoured():
    # tvm-ffi 0.1.4 patched torch.Tensor with the capsule under the old name: the capsule's
    # name says what it holds, so it is read like the new spelling.
    table = ForgedTable()
    cls = producer_type(__c_dlpack_exchange_api__=table.capsule)
    assert dl.from_dlpack(cls()).data_ptr == table.last_data()
    assert (table.calls, cls.dlpack_calls) == (1, 0)


def test_producer_table_error_falls_back_to_dlpack(c_consumer):
    # A table that refuses an object leaves the answer to __dlpack__, whose errors are the
    # producer's documented ones (PyTorch's table raises RuntimeError with a C++ trace
    # where its __dlpack__ raises a one-line BufferError).
    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.raising_table())
    obj = cls()
    t = dl.from_dlpack(obj)
    assert t.data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1


def test_producer_table_and_dlpack_errors_give_the_dlpack_error(c_consumer):
    def refuse(self, **kwargs):
        type(self).dlpack_calls += 1
        raise BufferError("refused by __dlpack__ too")

    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.raising_table(), __dlpack__=refuse)
    with pytest.raises(BufferError, match="refused by __dlpack__ too"):
        dl.from_dlpack(cls())
    assert cls.dlpack_calls == 1


def test_silent_producer_failure_falls_back_to_dlpack(c_consumer):
    cls = producer_type(__dlpack_c_exchange_api__=c_consumer.silent_table())
    obj = cls()
    assert dl.from_dlpack(obj).data_ptr == obj.array.ctypes.data
    assert cls.dlpack_calls == 1
