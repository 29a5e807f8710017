"""The sanitizer on memory that is not dlinterop's: a foreign managed tensor's deleter watched
(dlinterop's imports, and what the pytest plugin sees handed to a consumer), so that a second
call is reported and goes no further, whoever made the capsule; a double consume of a
foreign capsule reported with where it was first consumed; and, once per producer type, a
note that its released memory cannot be quarantined."""

import ctypes

import pytest

import dlinterop as dl
from dlinterop import _core, sanitizer
from dlinterop.testing._conformance import Producer, consume

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def native():
    return Producer(payload=bytes(4), shape=(4,), strides=(1,))


def deleter_of(pointer):
    """The deleter field of a DLManagedTensorVersioned, callable holding the GIL."""
    address = ctypes.c_void_p.from_address(pointer + 16).value
    return ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(address)


def test_a_foreign_import_released_twice_is_reported_and_freed_once():
    producer = native()
    with sanitizer.sanitize() as session:
        capsule = producer.__dlpack__(max_version=(1, 3))
        pointer = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        t = dl.from_dlpack(capsule)  # import-marker
        deleter = deleter_of(pointer)  # what a buggy producer's destructor would call
        del t, capsule
        assert producer.deleter_calls == 1
        deleter(pointer)  # again-marker
        reports = session.reports()
    assert producer.deleter_calls == 1
    (report,) = reports
    assert report.startswith("dlinterop sanitizer: a DLPack deleter called twice")
    assert "(imported by dlinterop)" in report
    assert report.count("test_a_foreign_import_released_twice_is_reported_and_freed_once") == 3


def test_a_watched_capsule_consumed_elsewhere_then_by_dlinterop_is_reported():
    producer = native()
    with sanitizer.sanitize() as session:
        capsule = producer.__dlpack__(max_version=(1, 3))
        assert _core._sanitizer_watch(capsule, "Producer -> a consumer")
        consume(capsule)  # the consumer the plugin watched: renamed, released
        with pytest.raises(ValueError, match="already consumed"):
            dl.from_dlpack(capsule)
        (report,) = session.reports()
    assert "a DLPack capsule consumed twice (Producer -> a consumer)" in report
    assert "handed to its consumer at" in report and "released (its deleter called) at" in report
    assert "handed to dlinterop again at" in report
    assert producer.deleter_calls == 1


def test_a_watched_deleter_called_once_is_silent_and_listed_until_then():
    producer = native()

    def watched():  # this test's (another's may still be live, held where it was)
        return [r for r in sanitizer.live(("watched",)) if r.what == "Producer -> this test"]

    with sanitizer.sanitize() as session:
        capsule = producer.__dlpack__(max_version=(1, 3))
        _core._sanitizer_watch(capsule, "Producer -> this test")
        assert [r.kind for r in watched()] == ["watched"]
        consume(capsule)
        assert watched() == []
        assert session.reports() == []
    assert producer.deleter_calls == 1


def test_watching_twice_or_a_capsule_without_deleter_does_nothing():
    capsule = native().__dlpack__(max_version=(1, 3))
    assert _core._sanitizer_watch(capsule, "first")
    assert not _core._sanitizer_watch(capsule, "second")
    assert not _core._sanitizer_watch(object(), "not a capsule")
    consume(capsule)
    assert not _core._sanitizer_watch(capsule, "consumed already")


def test_each_foreign_producer_type_is_noted_once():
    np = pytest.importorskip("numpy")
    before = len(sanitizer.notes())
    with sanitizer.sanitize():
        for _ in range(3):
            with pytest.raises(TypeError):
                dl.from_dlpack(3)  # not a producer: nothing to note
            dl.from_dlpack(np.arange(3.0))
            dl.from_dlpack(native())
            dl.from_dlpack(dl.arange(3))  # dlinterop's own memory: watched, no note
    notes = sanitizer.notes()[before:]
    named = sorted(n.split("the memory of ")[1].split(" is not")[0] for n in notes)
    assert named == ["dlinterop.testing._conformance.Producer", "numpy.ndarray"]
    assert all("is not dlinterop's" in n and "AddressSanitizer" in n for n in notes)


def test_no_note_while_the_sanitizer_is_off():
    np = pytest.importorskip("numpy")
    before = len(sanitizer.notes())
    dl.from_dlpack(np.arange(3.0))
    assert len(sanitizer.notes()) == before
