"""The checker's rules on exchange tables (dlinterop.testing._table_rules): each passes on
dlinterop's tables (dl.Tensor's, dl.exchange_api_for's NumPy, JAX, torch and generic
tables) and fails on a table forged with one thing broken: dl.Tensor's table, one function
or header field replaced."""

import ctypes
from ctypes import c_void_p

import numpy as np
import pytest

import dlinterop as dl
import dlinterop.testing as dt
from dlinterop.testing import _table_rules as rules
from dlinterop.testing._model import NotApplicable, RuleFailure
from dlinterop.testing._tables import (
    ALLOCATOR,
    CURRENT_STREAM,
    FROM_PY,
    TO_PY,
    VIEW,
    DLPackExchangeAPI,
    DLPackExchangeAPIHeader,
    Table,
)

from forge import make_capsule

API_NAME = "dlpack_exchange_api"
DLINTEROP = dt.framework("dlinterop")
NUMPY = dt.framework("numpy")
GOOD = Table(dl.Tensor.__dlpack_c_exchange_api__)
_KEEP = []  # forged tables and their callbacks outlive every call made through them
_incref = ctypes.PYFUNCTYPE(None, c_void_p)(("Py_IncRef", ctypes.pythonapi))
_decref = ctypes.PYFUNCTYPE(None, c_void_p)(("Py_DecRef", ctypes.pythonapi))


def forged(**fields):
    """dl.Tensor's table with `fields` replaced (ctypes callbacks become their pointers)."""
    api = DLPackExchangeAPI()
    ctypes.memmove(ctypes.addressof(api), GOOD.address, ctypes.sizeof(api))
    for name, value in fields.items():
        if name in ("major", "minor"):
            setattr(api.header.version, name, value)
        elif name == "prev_api":
            api.header.prev_api = value(api)
        else:
            setattr(api, name, ctypes.cast(value, c_void_p).value if value else None)
    _KEEP.append((api, fields))
    return Table(make_capsule(ctypes.addressof(api), API_NAME))


def good(name):
    return GOOD.function(name)


def check(rule_id, table, fw=DLINTEROP):
    return rules.CHECKS[rule_id](fw, table)


def fails(rule_id, table, match):
    with pytest.raises(RuleFailure, match=match):
        check(rule_id, table)


def test_every_table_rule_is_registered_and_checked_on_dl_tensor():
    ids = [r.id for r in dt.RULES if r.id in rules.CHECKS]
    assert len(ids) == len(rules.CHECKS) >= 9
    report = dt.check_producer("dlinterop", rules=ids)
    assert report.counts() == {"pass": len(ids), "fail": 0, "n/a": 0}, report.results


@pytest.mark.parametrize("rule_id", sorted(rules.CHECKS))
@pytest.mark.parametrize("which", ["tensor", "numpy", "generic", "jax", "torch"])
def test_dlinterop_tables_pass(rule_id, which):
    if which == "jax":
        jax = pytest.importorskip("jax")
        table = (Table(dl.exchange_api_for(jax.Array)), dt.framework("jax"))
    elif which == "torch":
        torch = pytest.importorskip("torch")
        table = (Table(dl.exchange_api_for(torch.Tensor)), dt.framework("torch"))
    else:
        table = {
            "tensor": (GOOD, DLINTEROP),
            "numpy": (Table(dl.exchange_api_for(np.ndarray)), NUMPY),
            "generic": (Table(dl.exchange_api_for(type("P", (), {"__dlpack__": 0}))), NUMPY),
        }[which]
    if which == "generic" and rule_id == "producer.exchange-api-view":
        with pytest.raises(NotApplicable, match="refuses by design"):
            check(rule_id, *table)
        return
    # JAX and PyTorch have no read-only arrays to hand: that rule does not apply. The view
    # rule compares with a versioned capsule of JAX's __dlpack__, which JAX gives from 0.12
    # (before: an unversioned one, and the rule does not apply either); where it applies it
    # must pass.
    if which in ("jax", "torch") and rule_id == "producer.exchange-api-read-only":
        with pytest.raises(NotApplicable):
            check(rule_id, *table)
        return
    if which == "jax" and rule_id == "producer.exchange-api-view":
        try:
            check(rule_id, *table)
        except NotApplicable as reason:
            assert "versioned capsule" in str(reason)
        return
    assert check(rule_id, table[0], table[1]) is None


def test_header_version_and_prev_api_chain():
    fails("producer.exchange-api-header", forged(minor=2), r"header version \(1, 2\)")
    fails("producer.exchange-api-header", forged(major=2), r"header version \(2, 3\)")
    older = DLPackExchangeAPIHeader()
    older.version.major, older.version.minor = 1, 4  # newer than the table, not older
    _KEEP.append(older)
    fails("producer.exchange-api-header", forged(prev_api=lambda api: ctypes.pointer(older)),
          r"prev_api of version \(1, 3\) is \(1, 4\)")  # fmt: skip
    cycle = DLPackExchangeAPIHeader()
    cycle.version.major, cycle.version.minor = 1, 2
    cycle.prev_api = ctypes.pointer(cycle)
    _KEEP.append(cycle)
    fails("producer.exchange-api-header", forged(prev_api=lambda api: ctypes.pointer(cycle)),
          "cycle")  # fmt: skip
    older.version.minor = 1
    check("producer.exchange-api-header", forged(prev_api=lambda api: ctypes.pointer(older)))


def test_null_functions_fail_one_rule_and_make_the_others_not_applicable():
    table = forged(current_work_stream=None, dltensor_from_py_object_no_sync=None)
    fails("producer.exchange-api-functions", table, "current_work_stream")
    with pytest.raises(NotApplicable, match="current_work_stream is NULL"):
        check("producer.exchange-api-stream-cpu", table)


def test_a_view_without_strides_or_elsewhere_fails():
    def no_strides(obj, out):
        rc = good("dltensor_from_py_object_no_sync")(obj, out)
        out.contents.strides = None
        return rc

    def elsewhere(obj, out):
        rc = good("dltensor_from_py_object_no_sync")(obj, out)
        out.contents.data += 4
        return rc

    fails("producer.exchange-api-view", forged(dltensor_from_py_object_no_sync=VIEW(no_strides)),
          "shape or strides NULL")  # fmt: skip
    fails("producer.exchange-api-view", forged(dltensor_from_py_object_no_sync=VIEW(elsewhere)),
          "does not share")  # fmt: skip


def test_an_owned_tensor_that_keeps_a_reference_fails():
    leaked = []

    def leaky(obj, out):
        _incref(obj)  # a reference the deleter never gives back
        leaked.append(obj)
        return good("managed_tensor_from_py_object_no_sync")(obj, out)

    table = forged(managed_tensor_from_py_object_no_sync=FROM_PY(leaky))
    fails("producer.exchange-api-deleter", table, "reference count went")
    _decref(leaked.pop())  # (the test's own leak, given back)


def test_to_py_that_does_not_steal_a_refused_tensor_fails():
    def refuse_without_deleting(tensor, out):
        if tensor.contents.dl_tensor.device.device_type == 99:
            return -1  # leaks the tensor and sets no exception
        return good("managed_tensor_to_py_object_no_sync")(tensor, out)

    def take_everything(tensor, out):
        tensor.contents.dl_tensor.device.device_type = 1
        return good("managed_tensor_to_py_object_no_sync")(tensor, out)

    fails("producer.exchange-api-to-py-steals",
          forged(managed_tensor_to_py_object_no_sync=TO_PY(refuse_without_deleting)),
          "deleter ran 0x")  # fmt: skip
    fails("producer.exchange-api-to-py-steals",
          forged(managed_tensor_to_py_object_no_sync=TO_PY(take_everything)),
          "taken without complaint")  # fmt: skip


def test_an_export_that_drops_read_only_fails():
    def writable(obj, out):
        rc = good("managed_tensor_from_py_object_no_sync")(obj, out)
        out[0].contents.flags = 0
        return rc

    table = forged(managed_tensor_from_py_object_no_sync=FROM_PY(writable))
    fails("producer.exchange-api-read-only", table, "without the READ_ONLY flag")
    check("producer.exchange-api-read-only", Table(dl.exchange_api_for(np.ndarray)), NUMPY)


def test_an_allocator_that_ignores_the_prototype_fails():
    def float64(prototype, out, ctx, set_error):
        rc = good("managed_tensor_allocator")(prototype, out, ctx, set_error)
        out[0].contents.dl_tensor.dtype.bits = 64
        return rc

    def refusing(prototype, out, ctx, set_error):
        set_error(ctx, b"MemoryError", b"no memory today")
        return -1

    fails("producer.exchange-api-allocator", forged(managed_tensor_allocator=ALLOCATOR(float64)),
          r"\(2, 64, 1\)")  # fmt: skip
    fails("producer.exchange-api-allocator", forged(managed_tensor_allocator=ALLOCATOR(refusing)),
          "no memory today")  # fmt: skip


def test_a_cpu_stream_that_is_not_null_fails():
    def stream(device_type, device_id, out):
        out[0] = 1
        return 0

    fails("producer.exchange-api-stream-cpu", forged(current_work_stream=CURRENT_STREAM(stream)),
          "stream 1")  # fmt: skip


def test_a_function_that_fails_without_an_exception_fails():
    def silent(obj, out):
        return -1

    table = forged(managed_tensor_from_py_object_no_sync=FROM_PY(silent))
    fails("producer.exchange-api-errors", table, "answered -1 for an object")
    table = forged(dltensor_from_py_object_no_sync=VIEW(lambda obj, out: 0))
    fails("producer.exchange-api-errors", table, "dltensor_from_py_object_no_sync answered 0")
