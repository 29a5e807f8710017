"""What the tests of tests/threads/ share: how many threads and iterations (fewer per copy under
pytest-run-parallel), threads started together, reference counts that settle, a short GIL
switch interval."""

import os
import sys
import threading

import pytest

# More threads where the GIL is off (.ci/freethreaded.sh sets DLINTEROP_THREADS=16).
THREADS = int(os.environ.get("DLINTEROP_THREADS", "8"))


# The run-parallel run (four copies of each test at once) divides the work between copies.
_SHARE = int(os.environ.get("DLINTEROP_RUN_PARALLEL_COPIES", "1"))


ITERATIONS = 10_000 // _SHARE


@pytest.fixture(autouse=True)
def _short_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(target, count=THREADS):
    """Runs target(index) on `count` threads started together; re-raises the first error."""
    errors = []
    start = threading.Barrier(count)

    def body(index):
        try:
            start.wait()
            target(index)
        except BaseException as error:  # noqa: BLE001 - reported below, with its traceback
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def refcounts_settle(read, expected, seconds=5.0):
    """read() once it equals `expected` (or after `seconds`): reference counts, read by the
    same expression that read `expected`. Where there is no GIL, CPython counts references
    dropped by other threads apart and merges them later (biased reference counting), so a
    count read just after the threads stop may still include releases in flight; a leak
    stays, and still fails the comparison."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        counts = read()
        if counts == expected or time.monotonic() > deadline:
            return counts
        time.sleep(0.01)
