"""dlinterop.testing._call_rules on its own, without a pytest session: the checking proxy
and check_consumer on one exchange at a time, the rules they apply and what they never do
to the exchange they watch."""

import ctypes

import pytest

import dlinterop as dl
from dlinterop import _core, sanitizer
from dlinterop.testing import _call_checks as call_checks
from dlinterop.testing import _call_rules as call_rules
from dlinterop.testing._capsules import memory_behind
from dlinterop.testing._conformance import Producer, consume
from dlinterop.testing._model import IS_COPIED

np = pytest.importorskip("numpy")


def consumed(proxy, **kwargs):
    """A consumer that asks for a versioned capsule and consumes it as it should."""
    consume(proxy.__dlpack__(max_version=(1, 3), **kwargs))


def by_dlinterop(proxy):
    """dlinterop as the consumer (the result dropped: not a NumPy or PyTorch array)."""
    dl.from_dlpack(proxy)


def checked(producer, call=consumed, **consumer_kwargs):
    """(rule ids, violations) of one exchange through the proxy: `call(proxy)` stands for
    the consumer; its result (or that it raised) goes to check_consumer."""
    seen = []
    exchange = call_rules.Exchange("a consumer", producer, seen.append, consumer_kwargs)
    try:
        result = call(call_rules.CheckingProxy(exchange))
    except Exception:
        call_rules.check_consumer(exchange, None, raised=True)
    else:
        call_rules.check_consumer(exchange, result)
    return [v.rule for v in seen], seen


@pytest.mark.parametrize("device_type", [t.value for t in dl.DeviceType])
def test_every_device_dlpack_defines_is_well_formed(device_type):
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,), device_type=device_type)
    assert checked(producer)[0] == []


def test_dlinterops_own_bcomplex32_export_is_well_formed():
    rules, _ = checked(dl.zeros((3,), "bcomplex32"), consumed)
    assert rules == []


def test_a_device_type_dlpack_does_not_define_is_malformed():
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,), device_type=22)
    rules, seen = checked(producer)
    assert rules == ["producer.well-formed"]
    assert "unknown DLPack device type 22" in seen[0].seen


def test_version_asked_maps_to_the_checker_rule_of_that_version():
    assert call_checks._version_rule(None) == "producer.default-legacy"
    assert call_checks._version_rule((0, 8)) == "producer.max-version-0.8"
    assert call_checks._version_rule((1, 0)) == "producer.max-version-1.0"
    assert call_checks._version_rule((1, 2)) == "producer.max-version-1.0"
    assert call_checks._version_rule((1, 3)) == "producer.max-version-1.3"
    assert call_checks._version_rule((1, 7)) == "producer.max-version-1.99"
    assert call_checks._version_rule((2, 0)) == "producer.max-version-2.0"


def test_a_versioned_capsule_for_max_version_0_8_is_caught():
    producer = Producer(strides=(1,), force_versioned=True)
    rules, seen = checked(producer, lambda proxy: consume(proxy.__dlpack__(max_version=(0, 8))))
    assert rules == ["producer.max-version-0.8"]
    assert "a versioned capsule for max_version=(0, 8)" in seen[0].seen


# ---- what a call can show


class Reused:
    """Hands out the same capsule on every call (a cache), consumed after the first."""

    def __init__(self):
        self.capsule = Producer(payload=bytes(4), shape=(4,), strides=(1,)).__dlpack__(
            max_version=(1, 3)
        )

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.capsule


def test_a_consumed_capsule_handed_out_again_is_its_own_rule():
    producer = Reused()
    assert checked(producer)[0] == []
    # dlinterop refuses it: only the producer broke a rule
    rules, seen = checked(producer, by_dlinterop)
    assert rules == ["producer.fresh-capsule"]
    assert "already consumed ('used_dltensor_versioned')" in seen[0].seen
    # a consumer that takes it anyway breaks one too
    rules, _ = checked(producer, lambda proxy: proxy.__dlpack__(max_version=(1, 3)) and 0)
    assert rules == ["producer.fresh-capsule", "consumer.consume-once"]


def test_a_device_answer_that_is_no_pair_of_ints_is_a_violation_not_an_error():
    class NamedDevice(Producer):
        def __dlpack_device__(self):
            return ("cpu", 0)

    producer = NamedDevice(payload=bytes(4), shape=(4,), strides=(1,))
    seen = []
    proxy = call_rules.CheckingProxy(call_rules.Exchange("a consumer", producer, seen.append, {}))
    assert proxy.__dlpack_device__() == ("cpu", 0)  # passed on as it was
    consume(proxy.__dlpack__(max_version=(1, 3)))
    assert [v.rule for v in seen] == ["producer.device"]
    assert "('cpu', 0), not a (type, index) tuple of integers" in seen[0].seen


def test_a_check_that_cannot_read_its_answer_reports_instead_of_raising(monkeypatch):
    def unreadable(capsule):
        raise RuntimeError("cannot read this")

    monkeypatch.setattr(call_checks, "inspect", unreadable)
    rules, seen = checked(Producer(payload=bytes(4), shape=(4,), strides=(1,)))
    assert rules == ["producer.well-formed"]
    assert "could not read the answer: RuntimeError: cannot read this" in seen[0].seen


class DataTypeError(Producer):
    """Raises TypeError for its data whatever it is asked: DLPack says BufferError."""

    def __dlpack__(self, **kwargs):
        raise TypeError("this dtype cannot be exported")


def test_a_type_error_for_the_data_is_caught_even_with_new_keywords():
    producer = DataTypeError(payload=bytes(4), shape=(4,), strides=(1,))
    rules, seen = checked(producer)
    assert rules == ["producer.unexportable-buffer-error"]
    assert "again without max_version" in seen[0].seen


def test_an_old_producers_type_error_for_a_keyword_is_no_violation():
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,), old_signature=True)
    assert checked(producer, by_dlinterop)[0] == []


def versioned_pointer(capsule):
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")


def set_is_copied(capsule):
    # DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter, then flags
    ctypes.c_uint64.from_address(versioned_pointer(capsule) + 24).value |= IS_COPIED


class CopiedFlagOnShared:
    """Flags IS_COPIED on a capsule of its own array's memory."""

    def __init__(self):
        self.array = np.arange(4.0)

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        capsule = self.array.__dlpack__(**{k: v for k, v in kwargs.items() if k != "copy"})
        set_is_copied(capsule)
        return capsule


@pytest.mark.parametrize(
    "copy, rule", [(None, "producer.is-copied-fresh"), (True, "producer.copy-true")]
)
def test_is_copied_on_shared_memory_is_caught_whatever_copy_was_asked(copy, rule):
    rules, seen = checked(CopiedFlagOnShared(), lambda proxy: consumed(proxy, copy=copy))
    assert rules == [rule]
    assert "flagged IS_COPIED whose data is the producer's own memory" in seen[0].seen


def test_is_copied_on_a_real_copy_is_no_violation():
    # Producer copies its payload into each capsule: flagged IS_COPIED, and truly fresh
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,), flags=IS_COPIED)
    assert checked(producer)[0] == []


class ReadOnlyBehind:
    """Not an array itself: holds a read-only one, and exports it through a writable view."""

    def __init__(self):
        self.array = np.arange(4, dtype=np.uint8)
        self.array.flags.writeable = False
        self.view = np.ctypeslib.as_array((ctypes.c_uint8 * 4).from_address(self.array.ctypes.data))

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kwargs):
        return self.view.__dlpack__(**kwargs)


def test_read_only_memory_behind_a_wrapper_is_found():
    rules, seen = checked(ReadOnlyBehind())
    assert rules == ["producer.read-only"]
    assert "its .array __array_interface__" in seen[0].seen


def test_a_read_only_buffer_is_found_where_it_holds_the_data():
    data = bytes(range(8))
    found = memory_behind(data, np.frombuffer(data, np.uint8).ctypes.data + 3)
    assert found is not None and found.readonly
    assert memory_behind(data, np.frombuffer(data, np.uint8).ctypes.data + 8) is None
    assert memory_behind(object(), 1234) is None


# ---- what the consumer did: read by name only; the deleter watched


def deleter_of(pointer):
    """The deleter a consumer would call, through ctypes (PYFUNCTYPE: holding the GIL)."""
    address = ctypes.c_void_p.from_address(pointer + 16).value
    return ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(address)


def set_name(capsule, name):
    ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ctypes.pythonapi.PyCapsule_SetName(capsule, name)


def test_a_deleter_called_twice_is_reported_and_not_passed_on():
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,))
    mark = sanitizer.report_count()

    def releases_twice(proxy):
        capsule = proxy.__dlpack__(max_version=(1, 3))
        pointer = versioned_pointer(capsule)
        set_name(capsule, b"used_dltensor_versioned")
        deleter_of(pointer)(pointer)
        deleter_of(pointer)(pointer)  # the bug

    exchange = call_rules.Exchange("a consumer", producer, [].append, {}, watch=True)
    releases_twice(call_rules.CheckingProxy(exchange))
    call_rules.check_consumer(exchange, None)
    assert producer.deleter_calls == 1  # the second call went no further
    (text,) = sanitizer.reports(since=mark)
    violation = call_rules.deleter_violation(text)
    assert violation.rule == "consumer.deleter-once"
    assert violation.producer == "dlinterop.testing._conformance.Producer"
    assert violation.consumer == "a consumer"
    for label in ("handed over at", "first released at", "released again at"):
        assert f"{label}:\n" in text and "in releases_twice" in text.split(f"{label}:\n")[1]


def test_dlinterops_own_exports_are_left_to_the_sanitizer():
    capsule = dl.arange(3).__dlpack__(max_version=(1, 3))
    assert not _core._sanitizer_watch(capsule, "dl -> a consumer")
    assert _core._sanitizer_watch(np.arange(3).__dlpack__(max_version=(1, 3)), "np -> c")


def test_after_the_consumer_returns_only_the_capsules_name_is_read(monkeypatch):
    """A consumer that releases the tensor at once without renaming the capsule (as MLX
    does, making the capsule's destructor a no-op): the struct is freed, so not read."""
    producer = Producer(payload=bytes(4), shape=(4,), strides=(1,))
    seen = []
    exchange = call_rules.Exchange("a consumer", producer, seen.append, {})
    capsule = call_rules.CheckingProxy(exchange).__dlpack__(max_version=(1, 3))
    ctypes.pythonapi.PyCapsule_SetDestructor.argtypes = [ctypes.py_object, ctypes.c_void_p]
    ctypes.pythonapi.PyCapsule_SetDestructor(capsule, None)
    pointer = versioned_pointer(capsule)
    deleter_of(pointer)(pointer)
    del capsule
    monkeypatch.setattr(call_checks, "inspect", lambda capsule: pytest.fail("struct read"))
    call_rules.check_consumer(exchange, None)
    assert [v.rule for v in seen] == ["consumer.renames-capsule"]
    assert all(call.capsule is None for call in exchange.calls)  # let go


# ---- probes


def test_a_probe_makes_the_calls_a_consumer_never_made():
    seen = []
    call_rules.probe(Producer(strides=(1,), force_versioned=True), "a consumer", seen.append)
    assert [v.rule for v in seen] == ["producer.default-legacy"]
    assert seen[0].consumer == "dlinterop probe (after a consumer)"


@pytest.mark.parametrize("make", [lambda: np.arange(6.0).reshape(2, 3), lambda: dl.arange(4)])
def test_a_probe_of_a_conforming_producer_finds_nothing(make):
    seen = []
    call_rules.probe(make(), "a consumer", seen.append)
    assert seen == []
