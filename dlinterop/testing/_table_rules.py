"""The producer rules on the C exchange table a type publishes as
__dlpack_c_exchange_api__ (DLPack 1.3's DLPackExchangeAPI), read through ctypes
(dlinterop.testing._tables). Registered after dlinterop.testing._producer_ownership_rules.

Each rule is a check of (framework, table): the rule hands it the table the framework's
array type publishes; the tests hand it other tables (dl.exchange_api_for's, forged ones)
through CHECKS."""

import ctypes
import gc
import sys
from ctypes import POINTER, byref, c_void_p

from dlinterop.testing._helpers import _export, _values, _versioned
from dlinterop.testing._model import READ_ONLY, NotApplicable, _fail, rule
from dlinterop.testing._tables import (
    CPU,
    DLPACK_MAJOR_VERSION,
    FIRST_MINOR,
    FUNCTIONS,
    SET_ERROR,
    CountedTensor,
    DLManagedTensorVersioned,
    DLTensor,
    Table,
    delete,
    take_object,
)

CHECKS: dict = {}  # rule id -> check(fw, table)


def _published(fw):
    x = fw.make(_values(), "float32")
    capsule = getattr(type(x), "__dlpack_c_exchange_api__", None)
    if capsule is None:
        raise NotApplicable(f"{type(x).__name__} publishes no __dlpack_c_exchange_api__")
    try:
        return Table(capsule)
    except (TypeError, ValueError) as e:  # producer.exchange-api's failure
        raise NotApplicable(f"no 'dlpack_exchange_api' capsule ({e})") from None


def table_rule(rule_id, description):
    def register(check):
        CHECKS[rule_id] = check
        rule(rule_id, description)(lambda fw: check(fw, _published(fw)))
        return check

    return register


def _function(table, name):
    f = table.function(name)
    if f is None:
        raise NotApplicable(f"{name} is NULL (producer.exchange-api-functions)")
    return f


def _version(v):
    return (v.major, v.minor)


@table_rule("producer.exchange-api-header", "the table's version is 1.3 or newer, prev_api older")
def t_header(fw, table):
    header = table.api.header
    version = _version(header.version)
    if version[0] != DLPACK_MAJOR_VERSION or version[1] < FIRST_MINOR:
        _fail(f"header version {version}: a table is {DLPACK_MAJOR_VERSION}.{FIRST_MINOR} or newer")
    seen = {ctypes.addressof(header)}
    link = header.prev_api
    while link:
        address = ctypes.cast(link, c_void_p).value
        if address in seen:
            _fail("the prev_api chain has a cycle")
        seen.add(address)
        older = _version(link.contents.version)
        if older >= version:
            _fail(f"prev_api of version {version} is {older}, not older")
        version, link = older, link.contents.prev_api


@table_rule("producer.exchange-api-functions", "every function pointer of the table is set")
def t_functions(fw, table):
    missing = [name for name in FUNCTIONS if not getattr(table.api, name)]
    if missing:
        _fail("NULL: " + ", ".join(missing))


@table_rule("producer.exchange-api-view", "the view fills strides and shares the array's memory")
def t_view(fw, table):
    view = _function(table, "dltensor_from_py_object_no_sync")
    x = fw.make(_values(), "float32")
    try:
        _, reference = _versioned(x)
    except TypeError:
        # A producer whose __dlpack__ takes no max_version (Warp 1.19): its one capsule is
        # the reference.
        _, reference = _export(x)
    out = DLTensor()
    try:
        rc = view(id(x), byref(out))
    except BufferError as e:
        raise NotApplicable(f"the view refuses by design: {e}") from None
    if rc != 0:
        _fail(f"the view returned {rc} with no exception set")
    if out.ndim != reference["ndim"] or not out.shape or not out.strides:
        _fail(f"the view has ndim {out.ndim}, shape or strides NULL")
    if out.data + out.byte_offset != reference["data"] + reference["byte_offset"]:
        _fail("the view does not share the array's memory")
    shape = tuple(out.shape[: out.ndim])
    if shape != tuple(reference["shape"]):
        _fail(f"the view's shape {shape}, the array's {reference['shape']}")


@table_rule("producer.exchange-api-deleter", "the owned tensor's deleter releases the array")
def t_deleter(fw, table):
    from_py = _function(table, "managed_tensor_from_py_object_no_sync")
    x = fw.make(_values(), "float32")
    before = sys.getrefcount(x)
    out = POINTER(DLManagedTensorVersioned)()
    if from_py(id(x), byref(out)) != 0 or not out:
        _fail("managed_tensor_from_py_object_no_sync failed with no exception set")
    if not out.contents.deleter:
        _fail("the owned tensor has a NULL deleter")
    delete(out)
    gc.collect()
    after = sys.getrefcount(x)
    if after != before:
        _fail(f"the array's reference count went {before} -> {after} across export and deleter")


@table_rule("producer.exchange-api-to-py-steals", "to_py takes the tensor: its deleter runs once")
def t_to_py_steals(fw, table):
    to_py = _function(table, "managed_tensor_to_py_object_no_sync")
    refused = CountedTensor(device_type=99)
    out = c_void_p()
    try:
        rc, raised = to_py(refused.pointer(), byref(out)), None
    except Exception as e:
        rc, raised = -1, e
    if rc == 0:
        take_object(out.value)
        _fail("a tensor on device type 99 was taken without complaint")
    if refused.deleted != 1:
        _fail(f"a refused tensor's deleter ran {refused.deleted}x (the call steals it: once)")
    if raised is None:
        _fail(f"refused a tensor with {rc} and no exception set (its deleter ran once)")
    taken = CountedTensor()
    out = c_void_p()
    if to_py(taken.pointer(), byref(out)) != 0 or not out.value:
        _fail("managed_tensor_to_py_object_no_sync failed with no exception set")
    obj = take_object(out.value)
    if taken.deleted:
        _fail("the deleter ran while the object lived")
    del obj
    gc.collect()
    if taken.deleted != 1:
        _fail(f"the object's death ran the deleter {taken.deleted}x, not once")


@table_rule("producer.exchange-api-read-only", "a read-only array is exported READ_ONLY")
def t_read_only(fw, table):
    from_py = _function(table, "managed_tensor_from_py_object_no_sync")
    x = fw.readonly(_values()) if fw.readonly else None
    if x is None:
        raise NotApplicable("the framework has no read-only arrays")
    out = POINTER(DLManagedTensorVersioned)()
    if from_py(id(x), byref(out)) != 0 or not out:
        _fail("managed_tensor_from_py_object_no_sync failed with no exception set")
    flags = out.contents.flags
    delete(out)
    if not flags & READ_ONLY:
        _fail("a read-only array was exported without the READ_ONLY flag")


@table_rule("producer.exchange-api-allocator", "the allocator makes the prototype's tensor")
def t_allocator(fw, table):
    allocator = _function(table, "managed_tensor_allocator")
    shape = (ctypes.c_int64 * 2)(2, 3)
    prototype = DLTensor()
    prototype.device.device_type, prototype.ndim = CPU, 2
    prototype.dtype.code, prototype.dtype.bits, prototype.dtype.lanes = 2, 32, 1
    prototype.shape = ctypes.cast(shape, POINTER(ctypes.c_int64))
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, message: errors.append((kind, message)))
    out = POINTER(DLManagedTensorVersioned)()
    try:
        rc = allocator(byref(prototype), byref(out), None, set_error)
    except Exception as e:  # a pure C call, made without the GIL, left an exception set
        e = e.__cause__ or e.__context__ or e
        _fail(f"refused a 2x3 float32 CPU tensor, SetError {errors}, exception left set: {e!r}")
    if rc != 0 or not out:
        _fail(f"a 2x3 float32 CPU tensor not allocated ({rc}): SetError {errors}")
    t = out.contents.dl_tensor
    got = (
        (t.device.device_type, t.device.device_id),
        (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        tuple(t.shape[: t.ndim]) if t.shape else None,
        bool(t.data),
    )
    delete(out)
    if got != ((CPU, 0), (2, 32, 1), (2, 3), True):
        _fail(f"asked for a 2x3 float32 CPU tensor, got (device, dtype, shape, data) {got}")


@table_rule("producer.exchange-api-stream-cpu", "the CPU's current work stream is NULL")
def t_stream_cpu(fw, table):
    current = _function(table, "current_work_stream")
    stream = c_void_p(0x5A5A)
    rc = current(CPU, 0, byref(stream))
    if rc != 0 or stream.value is not None:
        _fail(f"current_work_stream(kDLCPU, 0) gave {rc} and stream {stream.value}")


@table_rule("producer.exchange-api-errors", "another type's object: -1 with an exception set")
def t_errors(fw, table):
    stranger = object()
    for name, out in (
        ("managed_tensor_from_py_object_no_sync", POINTER(DLManagedTensorVersioned)()),
        ("dltensor_from_py_object_no_sync", DLTensor()),
    ):
        try:
            rc = _function(table, name)(id(stranger), byref(out))
        except Exception:
            continue
        if rc == 0 and isinstance(out, POINTER(DLManagedTensorVersioned)):
            delete(out)
        _fail(f"{name} answered {rc} for an object() with no exception set")
