"""A pytest plugin that makes dlinterop the first consumer of every tensor a peer's own test
suite hands to a consumer: `numpy.from_dlpack`, `warp.from_dlpack`, `torch.from_dlpack`,
`torch.utils.dlpack.from_dlpack` and `jax.dlpack.from_dlpack`, those the collected tests
imported, receive `dl.from_dlpack(x)` (a dl.Tensor over the producer's memory) instead of
`x`, with their own keywords.

    PYTHONPATH=tests/support python -m pytest -p dlpack_relay --pyargs pyarrow.tests.test_dlpack

So a peer's suite, which checks what its producer hands over, also checks what dlinterop
makes of it: the values, the layout, read-only memory and the errors, as the consumer sees
them. What dlinterop cannot take it raises, and the relay then lets the consumer take the
original (the suite's expectations about refusals stay the producer's and the consumer's).
Keywords the consumer cannot forward (copy=, device=) are given to the consumer, which
then takes the dl.Tensor as a producer and asks it. The relayed calls are counted and
printed at the end; a run that relayed nothing fails (it would prove nothing)."""

import functools
import sys

import dlinterop as dl

_CONSUMERS = (
    ("numpy", "from_dlpack"),
    ("warp", "from_dlpack"),
    ("torch", "from_dlpack"),
    ("torch.utils.dlpack", "from_dlpack"),
    ("jax.dlpack", "from_dlpack"),
)

relayed = {"relayed": 0, "taken directly": 0}
_patched = []


def _relay(consumer):
    @functools.wraps(consumer)
    def from_dlpack(x, *args, **kwargs):
        try:
            tensor = dl.from_dlpack(x)
        except Exception:
            # dlinterop refused it (or it is no DLPack producer): the consumer's own verdict
            relayed["taken directly"] += 1
            return consumer(x, *args, **kwargs)
        relayed["relayed"] += 1
        return consumer(tensor, *args, **kwargs)

    from_dlpack.__wrapped_consumer__ = consumer
    return from_dlpack


def pytest_collection_finish(session):
    # The consumers the collected tests imported (importing the others would only slow the
    # run: a suite's per-test gc.collect() over PyTorch's and JAX's heaps costs seconds).
    for module_name, attribute in _CONSUMERS:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        consumer = getattr(module, attribute, None)
        if consumer is None or hasattr(consumer, "__wrapped_consumer__"):
            continue
        setattr(module, attribute, _relay(consumer))
        _patched.append((module, attribute, consumer))


def pytest_unconfigure(config):
    while _patched:
        module, attribute, consumer = _patched.pop()
        setattr(module, attribute, consumer)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and relayed["relayed"] == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        f"dlpack_relay: {relayed['relayed']} tensors went through dlinterop, "
        f"{relayed['taken directly']} were taken by the consumer directly"
        + ("" if relayed["relayed"] else " (nothing relayed: this run fails)")
    )
