"""The sanitizer is heard, and only when something is wrong: a correct program holding an
export to the end is listed as live at exit, not reported; and its quarantine stays within
the process's limit on mappings, so that a correct program never fails for it. Each in a
process of its own."""

import os
import subprocess
import sys
import textwrap

import pytest


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
