"""dlinterop.sanitizer: provenance of what dlinterop exports and imports, reports of double
releases, double consumes and releases after shutdown, and the quarantine that makes a kept
pointer fault at its bad access. What could end the interpreter runs in a subprocess."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import dlinterop as dl
from dlinterop import sanitizer

# The C consumer (tests/support/c_pointer_keeper.c) through ctypes, as a subprocess's
# script starts. give(t) exports t as a versioned capsule and hands its managed tensor to
# the keeper, renaming the capsule as a consumer does.
PRELUDE = """\
import ctypes, sys
import dlinterop as dl
import dlinterop.sanitizer as sanitizer

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
USED = ctypes.create_string_buffer(b"used_dltensor_versioned")
keeper = ctypes.CDLL(sys.argv[1])
keeper.keeper_take.argtypes = [ctypes.c_void_p]
keeper.keeper_read.argtypes = [ctypes.c_long]
keeper.keeper_allocate.argtypes = [ctypes.c_void_p, ctypes.c_long]


def give(t):
    capsule = t.__dlpack__(max_version=(1, 3))
    pointer = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    api.PyCapsule_SetName(capsule, ctypes.addressof(USED))
    keeper.keeper_take(pointer)
"""


def run_script(body, keeper, env=None):
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script, keeper],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def line_of(body, marker):
    """The line number, in the subprocess's script, of the line of `body` holding marker."""
    lines = (PRELUDE + textwrap.dedent(body)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def test_off_by_default_records_nothing():
    assert not sanitizer.is_enabled()
    t = dl.zeros((3,), "float32")
    capsule = t.__dlpack__(max_version=(1, 3))
    assert sanitizer.live(("export", "import", "buffer")) == []
    del capsule


def test_live_exports_and_imports_listed_with_their_stacks():
    np = pytest.importorskip("numpy")
    with sanitizer.sanitize() as session:
        t = dl.arange(4)
        capsule = t.__dlpack__(max_version=(1, 3))  # export-marker
        imported = dl.from_dlpack(np.arange(3).__dlpack__())  # import-marker
        records = session.live()
        text = session.format_live()
        del capsule, imported
        after = session.live()
    kinds = sorted(r.kind for r in records)
    assert kinds == ["export", "import"]
    export = next(r for r in records if r.kind == "export")
    assert export.what == "dltensor_versioned"
    assert "test_live_exports_and_imports_listed_with_their_stacks" in export.stack
    assert "2 still live" in text and "export-marker" not in text  # stacks, not source
    assert __file__.rstrip("c") in text
    assert after == []
    assert not sanitizer.is_enabled()


def test_buffers_are_listed_on_request():
    with sanitizer.sanitize():
        t = dl.full((1000,), 7, "uint8")
        buffers = sanitizer.live(("buffer",))
        assert [r.nbytes for r in buffers] == [1000]
        assert t.data_ptr % 256 == 0
        assert int(t[999]) == 7
        del t
        assert sanitizer.live(("buffer",)) == []


@pytest.mark.parametrize("alignment", [64, 4096, 65536])
def test_buffers_keep_their_alignment_and_zeros(alignment):
    with sanitizer.sanitize():
        t = dl.zeros((3, 5), "float64", alignment=alignment)
        assert t.data_ptr % alignment == 0
        assert t.tolist() == [[0.0] * 5] * 3
        empty = dl.empty((0,), "float32")
        assert empty.data_ptr != 0


def test_capsule_consumed_twice_reported_with_both_stacks():
    with sanitizer.sanitize() as session:
        t = dl.arange(3)
        capsule = t.__dlpack__()
        dl.from_dlpack(capsule)
        with pytest.raises(ValueError, match="already consumed"):
            dl.from_dlpack(capsule)
        reports = session.reports()
    assert len(reports) == 1
    assert "consumed twice" in reports[0]
    assert "exported at" in reports[0] and "handed to dlinterop again at" in reports[0]
    assert reports[0].count("test_capsule_consumed_twice_reported_with_both_stacks") == 3


def test_foreign_capsule_consumed_twice_names_the_first_consume():
    np = pytest.importorskip("numpy")
    with sanitizer.sanitize() as session:
        capsule = np.arange(3).__dlpack__()
        first = dl.from_dlpack(capsule)
        with pytest.raises(ValueError, match="already consumed"):
            dl.from_dlpack(capsule)
        reports = session.reports()
        del first
    assert len(reports) == 1 and "first consumed at" in reports[0]


def test_session_sees_only_its_own_reports():
    with sanitizer.sanitize():
        capsule = dl.arange(2).__dlpack__()
        dl.from_dlpack(capsule)
        with pytest.raises(ValueError):
            dl.from_dlpack(capsule)
    with sanitizer.sanitize() as session:
        assert session.reports() == []


def test_invalid_limits_refused():
    with pytest.raises(ValueError):
        sanitizer.enable(frames=0)
    assert not sanitizer.is_enabled()


def test_deleter_called_twice_is_reported_not_a_double_free(pointer_keeper):
    body = """
    sanitizer.enable()
    t = dl.arange(10)
    give(t)  # give-marker
    del t
    keeper.keeper_release()  # first-marker
    keeper.keeper_release()  # again-marker
    print("survived", len(sanitizer.reports()))
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == 0, proc.stderr
    assert "survived 1" in proc.stdout
    err = proc.stderr
    assert "a dlinterop export released twice" in err
    for label, marker in [
        ("exported at", "give-marker"),
        ("first released at", "first-marker"),
        ("released again at", "again-marker"),
    ]:
        assert f"{label}:\n" in err
        assert f"line {line_of(body, marker)}, in <module>" in err.split(f"{label}:\n")[1]


def test_release_after_shutdown_is_reported(pointer_keeper):
    body = """
    sanitizer.enable()
    t = dl.arange(10)
    give(t)  # give-marker
    keeper.keeper_release_at_exit()
    print("exiting")
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == 0, proc.stderr
    assert "a dlinterop export released after interpreter shutdown" in proc.stderr
    assert f"line {line_of(body, 'give-marker')}, in <module>" in proc.stderr


def test_kept_pointer_faults_and_the_fault_is_reported(pointer_keeper):
    body = """
    sanitizer.enable()
    t = dl.full((100000,), 3, "uint8")  # alloc-marker
    give(t)
    del t
    print("before", keeper.keeper_read(5), flush=True)
    keeper.keeper_release()  # release-marker
    print("after", keeper.keeper_read(5), flush=True)
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr)
    assert "before 3" in proc.stdout and "after" not in proc.stdout
    err = proc.stderr
    assert "access to released memory" in err
    assert "5 bytes into a buffer of 100000 bytes" in err
    allocated = err.split("allocated at:\n")[1].split("released at:\n")
    assert f"line {line_of(body, 'alloc-marker')}, in <module>" in allocated[0]
    assert f"line {line_of(body, 'release-marker')}, in <module>" in allocated[1]


def test_without_the_sanitizer_the_same_release_frees(pointer_keeper):
    # The control: the same consumer, no sanitizer, reading before the release only.
    body = """
    t = dl.full((100000,), 3, "uint8")
    give(t)
    del t
    print("read", keeper.keeper_read(5))
    keeper.keeper_release()
    print("live", dl.memory_stats()["live_buffers"], sanitizer.live(("buffer",)))
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == 0, proc.stderr
    assert "read 3" in proc.stdout and "live 0 []" in proc.stdout
    assert "dlinterop sanitizer" not in proc.stderr


def test_environment_variable_lists_what_is_live_at_exit(pointer_keeper):
    body = """
    import numpy as np
    assert sanitizer.is_enabled()
    kept = dl.arange(5).__dlpack__()  # export-marker
    held = dl.from_dlpack(np.arange(3).__dlpack__())  # import-marker
    released = dl.arange(5).__dlpack__()
    del released
    """
    pytest.importorskip("numpy")
    proc = run_script(body, pointer_keeper, env={"DLINTEROP_SANITIZE": "1"})
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "dlinterop sanitizer: 2 still live" in err
    assert f"line {line_of(body, 'export-marker')}, in <module>" in err
    assert f"line {line_of(body, 'import-marker')}, in <module>" in err


def _protection(address):
    """The permissions of the mapping holding `address` ("---p" when quarantined), from
    /proc/self/maps; None when nothing is mapped there."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= address < end:
                return perms
    return None


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps")
def test_quarantine_makes_released_pages_inaccessible_and_frees_the_oldest():
    with sanitizer.sanitize(quarantine_count=1):
        first = dl.full((100000,), 3, "uint8")
        address = first.data_ptr
        assert _protection(address) == "rw-p"
        del first
        assert _protection(address) == "---p"
        second = dl.full((100000,), 4, "uint8")
        other = second.data_ptr
        del second
        assert _protection(other) == "---p"
        assert _protection(address) != "---p"  # unmapped (or the address reused since)
    assert _protection(other) != "---p"  # disable() frees the quarantine


def test_exchange_allocator_tensor_released_twice_is_reported(pointer_keeper):
    # The C exchange table's allocator hands out tensors no capsule ever held; a consumer
    # that releases one twice is told, as for a capsule's.
    body = """
    sanitizer.enable()
    assert keeper.keeper_allocate(dl.Tensor.__c_dlpack_exchange_api__, 1000) == 0
    keeper.keeper_release()
    keeper.keeper_release()
    print("survived", len(sanitizer.reports()))
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == 0, proc.stderr
    assert "survived 1" in proc.stdout
    assert "a dlinterop export released twice" in proc.stderr
    assert "(managed tensor (C exchange API allocator))" in proc.stderr


def test_exchange_allocator_tensor_released_after_shutdown_is_safe(pointer_keeper):
    # That allocator's deleter is plain C, safe after shutdown: under the sanitizer too
    # (which then takes no Python stack).
    body = """
    sanitizer.enable()
    assert keeper.keeper_allocate(dl.Tensor.__c_dlpack_exchange_api__, 1000) == 0
    keeper.keeper_release_at_exit()
    print("exiting")
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout


@pytest.mark.parametrize("faulthandler", [False, True])
def test_enabled_twice_an_unrelated_crash_still_ends_the_process(pointer_keeper, faulthandler):
    body = f"""
    import faulthandler
    if {faulthandler}:
        faulthandler.enable()
    with sanitizer.sanitize():
        pass
    sanitizer.enable()
    sanitizer.enable(frames=4)
    ctypes.string_at(0)   # an ordinary crash, not dlinterop's memory
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])
    assert "dlinterop sanitizer" not in proc.stderr
    assert ("Fatal Python error" in proc.stderr) == faulthandler


def test_fault_reported_when_faulthandler_came_after(pointer_keeper):
    # pytest, for one, turns faulthandler on: the report must not depend on the order.
    body = """
    import faulthandler
    sanitizer.enable()
    faulthandler.enable()
    t = dl.full((100000,), 3, "uint8")  # alloc-marker
    give(t)
    del t
    keeper.keeper_release()
    keeper.keeper_read(100004)
    """
    proc = run_script(body, pointer_keeper)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])
    err = proc.stderr
    assert "access to released memory" in err and "4 bytes past the end of" in err
    assert f"line {line_of(body, 'alloc-marker')}, in <module>" in err
    assert "Fatal Python error" in err  # faulthandler's traceback follows


def test_sanitize_inside_a_running_sanitizer_keeps_its_limits():
    sanitizer.enable(frames=1)
    try:
        with sanitizer.sanitize():
            capsule = dl.arange(2).__dlpack__()
            (record,) = sanitizer.live()
            assert "..." in record.stack and record.stack.count("File ") == 1
            del capsule
        assert sanitizer.is_enabled()
    finally:
        sanitizer.disable()


def test_reports_since_a_mark_survive_a_clear():
    with sanitizer.sanitize() as session:
        mark = sanitizer.report_count()
        for _ in range(2):
            capsule = dl.arange(2).__dlpack__()
            dl.from_dlpack(capsule)
            with pytest.raises(ValueError):
                dl.from_dlpack(capsule)
        assert len(sanitizer.reports(since=mark)) == 2
        sanitizer.reports(clear=True)
        capsule = dl.arange(2).__dlpack__()
        dl.from_dlpack(capsule)
        with pytest.raises(ValueError):
            dl.from_dlpack(capsule)
        assert len(sanitizer.reports(since=mark)) == 1  # the two cleared are gone
        assert len(session.reports()) == 1
        assert sanitizer.report_count() == mark + 3
