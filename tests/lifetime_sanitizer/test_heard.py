"""The sanitizer is heard, and only when something is wrong: its report of a fault reaches the
person running pytest with its default capture (fd) although the fault ends the process; a
correct program holding an export to the end is listed as live at exit, not reported; and
its quarantine stays within the process's limit on mappings, so that a correct program
never fails for it. Each in a process of its own."""

import os
import subprocess
import sys
import textwrap

import pytest

# A test that keeps a pointer past the release (tests/support/c_pointer_keeper.c, its path
# in KEEPER): the read faults under the sanitizer.
USE_AFTER_FREE = """
import ctypes
import os

import dlinterop as dl

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def test_reads_after_release():
    keeper = ctypes.CDLL(os.environ["KEEPER"])
    keeper.keeper_take.argtypes = [ctypes.c_void_p]
    keeper.keeper_read.argtypes = [ctypes.c_long]
    t = dl.full((100000,), 3, "uint8")  # alloc-marker
    capsule = t.__dlpack__(max_version=(1, 3))
    pointer = api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
    keeper.keeper_take(pointer)
    del t, capsule
    keeper.keeper_release()
    keeper.keeper_read(5)
"""


@pytest.mark.parametrize("how", ["--dlpack-sanitize", "DLINTEROP_SANITIZE=1"])
def test_a_fault_is_reported_through_pytests_default_capture(pytester, pointer_keeper, how):
    pytester.makepyfile(test_uaf=USE_AFTER_FREE)
    env = {"KEEPER": pointer_keeper}
    args = ["-p", "no:cacheprovider"]
    if how == "--dlpack-sanitize":
        args += ["-p", "dlinterop.pytest_plugin", how]
    else:
        env["DLINTEROP_SANITIZE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "test_uaf.py"],
        cwd=pytester.path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode < 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    out = proc.stdout + proc.stderr
    assert "access to released memory" in out, out[-3000:]
    assert "5 bytes into a buffer of 100000 bytes dlinterop released" in out
    allocated = out.split("allocated at:\n")[1].split("released at:\n")[0]
    assert "test_uaf.py" in allocated and "in test_reads_after_release" in allocated


def run(script, **env):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_an_export_held_to_the_end_is_listed_live_not_reported():
    pytest.importorskip("numpy")
    proc = run(
        """
        import numpy as np
        import dlinterop as dl

        held = np.from_dlpack(dl.zeros(3))  # released while the interpreter tears down
        """,
        DLINTEROP_SANITIZE="1",
    )
    assert proc.returncode == 0, proc.stderr
    assert "dlinterop sanitizer: 1 still live" in proc.stderr
    assert "released" not in proc.stderr, proc.stderr
    assert proc.stderr.count("dlinterop sanitizer:") == 1  # the listing alone


@pytest.mark.skipif(
    not os.path.exists("/proc/sys/vm/max_map_count"), reason="Linux's limit on mappings"
)
def test_allocating_and_freeing_past_the_limit_on_mappings_stays_within_it():
    """140,000 live buffers of a page each, every other one freed, is more mappings than the
    kernel allows a process (vm.max_map_count, 65,530 by default): the sanitizer keeps its
    own to a quarter of it, says so once, and the program goes on (a thread still starts)."""
    with open("/proc/sys/vm/max_map_count") as f:
        limit = int(f.read())
    proc = run(
        f"""
        import threading
        import dlinterop as dl
        import dlinterop.sanitizer as sanitizer

        sanitizer.enable()
        tensors = [dl.empty((1,), "uint8") for _ in range({max(140_000, 2 * limit + 10_000)})]
        del tensors[::2]
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()
        with open("/proc/self/maps") as maps:
            print("mappings", sum(1 for _ in maps))
        print("notes", len(sanitizer.notes()))
        """
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    mappings = int(proc.stdout.split("mappings ")[1].split()[0])
    assert mappings < limit // 2
    assert "notes 1" in proc.stdout
    assert f"a quarter of this process's limit (vm.max_map_count = {limit})" in proc.stderr
