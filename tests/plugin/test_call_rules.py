"""dlinterop.testing._call_rules on its own, without a pytest session: the checking proxy
and check_consumer on one exchange at a time, the rules they apply and what they never do
to the exchange they watch."""

import pytest

import dlinterop as dl
from dlinterop.testing import _call_rules as call_rules
from dlinterop.testing._conformance import Producer, consume


def consumed(proxy, **kwargs):
    """A consumer that asks for a versioned capsule and consumes it as it should."""
    consume(proxy.__dlpack__(max_version=(1, 3), **kwargs))


def checked(producer, call=consumed, **consumer_kwargs):
    """(rule ids, violations) of one exchange through the proxy: `call(proxy)` stands for
    the consumer; its result goes to check_consumer."""
    seen = []
    exchange = call_rules.Exchange("a consumer", producer, seen.append, consumer_kwargs)
    result = call(call_rules.CheckingProxy(exchange))
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
    assert call_rules._version_rule(None) == "producer.default-legacy"
    assert call_rules._version_rule((0, 8)) == "producer.max-version-0.8"
    assert call_rules._version_rule((1, 0)) == "producer.max-version-1.0"
    assert call_rules._version_rule((1, 2)) == "producer.max-version-1.0"
    assert call_rules._version_rule((1, 3)) == "producer.max-version-1.3"
    assert call_rules._version_rule((1, 7)) == "producer.max-version-1.99"
    assert call_rules._version_rule((2, 0)) == "producer.max-version-2.0"


def test_a_versioned_capsule_for_max_version_0_8_is_caught():
    producer = Producer(strides=(1,), force_versioned=True)
    rules, seen = checked(producer, lambda proxy: consume(proxy.__dlpack__(max_version=(0, 8))))
    assert rules == ["producer.max-version-0.8"]
    assert "a versioned capsule for max_version=(0, 8)" in seen[0].seen
