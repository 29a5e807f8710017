"""Handles of Tensors in shared memory, crafted: every way a crafted handle or segment must
fail cleanly (bad descriptors, files that are no segment, shrunk or oversized segments, no
memfd, CUDA handles without a GPU)."""

import errno
import fcntl
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="shared-memory Tensors are built on Linux memfds"
)


def run_apart(code, timeout=120):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _handle():
    """A shared Tensor and its handle, the segment given as (descriptor, length)."""
    t = dl.zeros(16, shared=True)
    segment, *layout = _core._shared_handle(t)
    return t, (segment.fd, segment.length, *layout)


CRAFTED = {
    "too long": lambda fd, h: (fd, h[1] * 4, 0, (16,), (1,), (2, 32, 1), False),
    "shape beyond": lambda fd, h: (fd, h[1], 0, (h[1],), (1,), (2, 32, 1), False),
    "offset beyond": lambda fd, h: (fd, h[1], h[1] - 4, (2,), (1,), (2, 32, 1), False),
    "negative stride": lambda fd, h: (fd, h[1], 0, (2,), (-1,), (2, 32, 1), False),
    "huge stride": lambda fd, h: (fd, h[1], 0, (2,), (2**60,), (2, 32, 1), False),
    "strides mismatch": lambda fd, h: (fd, h[1], 0, (2, 2), (1,), (2, 32, 1), False),
    "bad dtype": lambda fd, h: (fd, h[1], 0, (2,), (1,), (2, 7, 1), False),
    "non-int shape": lambda fd, h: (fd, h[1], 0, (2.0,), (1,), (2, 32, 1), False),
    "readonly not bool": lambda fd, h: (fd, h[1], 0, (2,), (1,), (2, 32, 1), 1),
    "zero length": lambda fd, h: (fd, 0, 0, (0,), (1,), (2, 32, 1), False),
}


@pytest.mark.parametrize("craft", CRAFTED.values(), ids=CRAFTED.keys())
def test_crafted_handles_raise_and_close_the_descriptor(craft):
    t, handle = _handle()
    fd = os.dup(handle[0])
    with pytest.raises((ValueError, TypeError)):
        _core._tensor_from_shared(*craft(fd, handle))
    with pytest.raises(OSError):
        os.fstat(fd)  # closed: nothing leaks


def test_a_regular_file_is_not_a_segment(tmp_path):
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * 8192)
    fd = os.open(path, os.O_RDWR)
    with pytest.raises(ValueError, match="not a dlinterop shared-memory segment"):
        _core._tensor_from_shared(fd, 8192, 0, (4,), (1,), (2, 32, 1), False)


def test_a_closed_descriptor_is_os_error():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError):
        _core._tensor_from_shared(r, 4096, 0, (4,), (1,), (2, 32, 1), False)


def test_a_segment_cannot_be_shrunk_under_a_mapping():
    # The seal is what makes a crafted or hostile peer unable to turn reads into SIGBUS.
    t, handle = _handle()
    with pytest.raises(OSError):
        os.ftruncate(handle[0], 0)


def test_a_shrunk_file_sent_as_a_segment_cannot_crash_the_receiver():
    # A memfd without the seal, truncated after the fact: refused, never mapped.
    proc = run_apart("""
        import os
        from dlinterop import _core
        fd = os.memfd_create("x")
        os.ftruncate(fd, 1 << 16)
        try:
            _core._tensor_from_shared(fd, 1 << 16, 0, (1024,), (1,), (2, 32, 1), False)
        except ValueError as e:
            print("refused")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "refused"


def test_running_out_of_descriptors_is_os_error():
    proc = run_apart("""
        import resource
        import dlinterop as dl
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        kept = []
        try:
            for _ in range(1000):
                kept.append(dl.zeros(4, shared=True))
        except OSError as e:
            print("OSError", e.errno)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "OSError"


def test_segments_larger_than_memory_are_refused_before_any_page():
    # 256 GiB and more, refused before a page is reserved: reserving them filled the
    # machine, and the OOM killer ended other processes first (a segment's pages count
    # towards no process's size). RLIMIT_FSIZE, which memfds obey, turns a refusal that did
    # not happen into EFBIG rather than a machine out of memory (RLIMIT_AS would fail any
    # mapping, and prove nothing).
    proc = run_apart("""
        import resource
        import numpy as np
        import dlinterop as dl
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))
        huge = 1 << 38
        makers = [
            lambda: dl.zeros(huge, "uint8", shared=True),
            lambda: dl.empty(huge, "uint8", shared=True),
            lambda: dl.ones(huge // 4, "float32", shared=True),
            lambda: dl.full(huge // 8, 2.0, "float64", shared=True),
            lambda: dl.full(huge * 2, 1.0, dl.float4_e2m1fn, shared=True),
            lambda: dl.zeros(16, shared=True, alignment=huge),
            lambda: dl.share(np.broadcast_to(np.zeros(1, np.uint8), (huge,))),
            lambda: dl.zeros(1 << 59, "uint8", shared=True),
        ]
        for make in makers:
            try:
                make()
                print("made")
            except MemoryError as e:
                print("without the kernel taking memory from another" in str(e))
        print(dl.memory_stats()["total_allocations"])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True"] * 8 + ["0"]


def test_a_segment_beyond_the_memory_available_now_is_refused(machine):
    machine({"MemTotal": 8 << 30, "MemAvailable": 100 << 20})
    with pytest.raises(MemoryError, match=f"can take {100 << 20} bytes now"):
        dl.zeros(128 << 20, "uint8", shared=True)
    assert dl.zeros(32 << 20, "uint8", shared=True).is_shared  # too small to check


def test_a_segment_stops_reserving_when_others_take_the_memory_meanwhile():
    # /proc/meminfo a FIFO: the machine has 1 GiB available when the 192 MiB segment is
    # asked for, 32 MiB when 64 MiB of it are reserved. The rest no longer fits: a
    # MemoryError, not the OOM killer.
    proc = run_apart(
        """
        import os, tempfile, threading
        import dlinterop as dl
        from dlinterop import _core
        root = tempfile.mkdtemp()
        os.makedirs(f"{root}/proc/self")
        open(f"{root}/proc/self/cgroup", "w").close()
        meminfo = f"{root}/proc/meminfo"
        os.mkfifo(meminfo)
        served = []

        def serve(available):
            for size in available:
                with open(meminfo, "w") as f:      # waits for the next read
                    f.write(f"MemTotal: {8 << 20} kB\\nMemAvailable: {size >> 10} kB\\n")
                served.append(size)
                while True:                        # until that reader has closed it
                    try:
                        os.close(os.open(meminfo, os.O_WRONLY | os.O_NONBLOCK))
                    except OSError:
                        break

        writer = threading.Thread(target=serve, args=([1 << 30, 32 << 20],), daemon=True)
        writer.start()
        _core._read_memory_limits_from(f"{root}/proc", f"{root}/sys")
        try:
            dl.zeros(192 << 20, "uint8", shared=True)
            print("made")
        except MemoryError as e:
            print("refused", len(served), dl.memory_stats()["live_bytes"])
    """,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["refused", "2", "0"]


# -- without memfd ------------------------------------------------------------------------


def test_without_memfd_there_is_no_shared_memory():
    # A POSIX shared-memory object, the old fallback, cannot be sealed: any process holding
    # it could shrink it under the others' mappings (SIGBUS).
    _core._pretend_no_memfd(True)
    try:
        with pytest.raises(OSError, match="needs memfd_create") as info:
            dl.zeros(4, shared=True)
        assert info.value.errno == errno.ENOSYS
        with pytest.raises(OSError, match="needs memfd_create"):
            dl.share(np.arange(3.0))
    finally:
        _core._pretend_no_memfd(False)
    assert dl.zeros(4, shared=True).is_shared


def test_a_posix_shared_memory_object_is_not_a_segment():
    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(create=True, size=8192)
    try:
        fd = os.open(f"/dev/shm/{shm.name}", os.O_RDWR)
        with pytest.raises(ValueError, match="not a dlinterop shared-memory segment"):
            _core._tensor_from_shared(fd, 8192, 0, (4,), (1,), (2, 32, 1), False)
        with pytest.raises(OSError):
            os.fstat(fd)  # the descriptor it was given, closed
    finally:
        shm.close()
        shm.unlink()


def test_a_sealed_segment_with_holes_is_not_a_segment():
    # Touching a hole allocates a page: mapped, a sparse segment of any size would make its
    # receiver take the memory its sender never reserved.
    fd = os.memfd_create("sparse", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 1 << 40)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    with pytest.raises(ValueError, match="its pages all reserved"):
        _core._tensor_from_shared(fd, 1 << 40, 0, (1 << 38,), (1,), (2, 32, 1), False)


def _read_only_shared_int64():
    writable = dl.zeros((1,), "int64", shared=True)
    segment, offset, shape, strides, dtype, _readonly = _core._shared_handle(writable)
    return _core._tensor_in_segment(segment, offset, shape, strides, dtype, True)


@pytest.mark.parametrize(
    "counter",
    [
        lambda: None,
        lambda: dl.zeros((1,), "int64"),
        lambda: dl.zeros((1,), "int32", shared=True),
        lambda: dl.zeros((0,), "int64", shared=True),
        lambda: dl.zeros((2,), "int64", shared=True).view(dl.uint8)[3:11].view(dl.int64),
        _read_only_shared_int64,
    ],
)
def test_a_crafted_cuda_handle_with_a_bad_counter_is_refused_first(counter):
    # The receivers' count goes down when the received Tensor dies, where an error could
    # only be swallowed: it is checked with the rest of the handle, before the driver.
    with pytest.raises(TypeError, match="a counter is a writable int64 Tensor in shared"):
        _core._tensor_from_cuda_ipc(
            bytes(64), 0, 0, bytes(64), (4,), (1,), (2, 32, 1), False, counter()
        )


def test_a_crafted_cuda_handle_without_a_gpu_is_an_error_not_a_crash():
    proc = run_apart("""
        import dlinterop as dl
        from dlinterop import _core
        try:
            _core._tensor_from_cuda_ipc(bytes(64), 0, 0, bytes(64), (4,), (1,), (2, 32, 1),
                                        False, dl.zeros((1,), "int64", shared=True))
        except (dl.cuda.CUDAError, ValueError, TypeError) as e:
            print(type(e).__name__)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "CUDAError"  # no device here: the driver refuses
