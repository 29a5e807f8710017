"""Tensors in shared memory (dl.share, shared=True) and the handles they cross process
boundaries as: what a shared Tensor is, and every way a crafted handle must fail cleanly."""

import errno
import fcntl
import os
import pickle
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


def values(t):
    return np.from_dlpack(t).tolist()


@pytest.mark.parametrize(
    "make",
    [
        lambda: dl.empty((3, 4), shared=True),
        lambda: dl.zeros((3, 4), "int16", shared=True),
        lambda: dl.full((3, 4), 2.5, shared=True),
        lambda: dl.full((5,), 1, dl.float4_e2m1fn, shared=True),
        lambda: dl.zeros((), shared=True),
        lambda: dl.zeros((0, 3), shared=True),
    ],
)
def test_shared_tensors_are_page_aligned_and_shared(make):
    t = make()
    assert t.is_shared and t.owner is not None and not t.readonly
    assert t.data_ptr % 4096 == 0 and t.is_contiguous()


def test_zeros_and_full_hold_their_values():
    assert values(dl.zeros((2, 3), shared=True)) == [[0.0] * 3] * 2
    assert values(dl.full((2, 2), 7, "int32", shared=True)) == [[7, 7], [7, 7]]


def test_a_larger_alignment_is_honoured():
    t = dl.zeros(10, shared=True, alignment=1 << 16)
    assert t.data_ptr % (1 << 16) == 0 and t.is_shared


def test_shared_memory_is_host_or_cuda_device_memory():
    with pytest.raises(ValueError, match="shared=True makes host or CUDA device memory"):
        dl.zeros(3, device="cuda_managed:0", shared=True)


@pytest.mark.skipif(dl.cuda.is_available(), reason="tests/gpu covers shared CUDA Tensors")
def test_shared_cuda_memory_without_a_gpu_is_a_cuda_error():
    with pytest.raises(dl.cuda.CUDAError):
        dl.zeros(3, device="cuda:0", shared=True)


def test_ordinary_tensors_are_not_shared():
    assert not dl.zeros(3).is_shared
    assert not dl.from_dlpack(np.arange(3.0)).is_shared


def test_share_copies_anything_into_shared_memory():
    a = np.arange(6.0).reshape(2, 3)[:, ::2]  # strided
    t = dl.share(a)
    assert t.is_shared and t.data_ptr != a.ctypes.data
    assert values(t) == a.tolist() and t.is_contiguous()
    ro = np.arange(3.0)
    ro.flags.writeable = False
    assert not dl.share(ro).readonly  # a copy: writable


def test_share_of_a_shared_tensor_is_that_tensor():
    t = dl.zeros(4, shared=True)
    assert dl.share(t) is t


def test_views_of_a_shared_tensor_are_shared():
    t = dl.zeros(4, shared=True)
    assert dl.from_dlpack(t).is_shared
    assert dl.from_dlpack(dl.to_dlpack(t, versioned=True)).is_shared
    u = dl.from_dlpack(t)
    del t
    assert u.is_shared and values(u) == [0.0] * 4


def test_share_refuses_device_memory():
    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("not reachable")

    with pytest.raises(BufferError):
        dl.share(OnGpu())


def test_shared_memory_is_counted_and_released():
    before = dl.memory_stats()
    t = dl.zeros(1000, shared=True)
    during = dl.memory_stats()
    assert during["live_buffers"] == before["live_buffers"] + 1
    assert during["live_bytes"] >= before["live_bytes"] + 4000
    del t
    assert dl.memory_stats()["live_buffers"] == before["live_buffers"]


def test_ordinary_pickle_goes_by_value():
    t = dl.full((4,), 3.0, shared=True)
    for protocol in (2, 4, 5):
        u = pickle.loads(pickle.dumps(t, protocol=protocol))
        assert not u.is_shared and values(u) == [3.0] * 4


# -- handles ------------------------------------------------------------------------------


def test_a_handle_rebuilds_a_tensor_over_the_same_memory():
    t = dl.full((2, 3), 1.0, shared=True)
    segment, *layout = _core._shared_handle(t)
    u = _core._tensor_from_shared(os.dup(segment.fd), segment.length, *layout)
    assert u.is_shared and (u.shape, u.strides, u.dtype) == (t.shape, t.strides, t.dtype)
    np.from_dlpack(u)[1, 2] = 9.0
    assert values(t)[1][2] == 9.0


def test_a_handle_keeps_the_offset_and_strides_of_a_view():
    t = dl.full((16,), 1.0, shared=True)
    segment, offset, shape, strides, triple, readonly = _core._shared_handle(t)
    view = _core._tensor_from_shared(
        os.dup(segment.fd), segment.length, 8, (3,), (2,), triple, readonly
    )
    np.from_dlpack(view)[:] = [5.0, 6.0, 7.0]
    assert values(t)[2:7] == [5.0, 1.0, 6.0, 1.0, 7.0]
    again = _core._shared_handle(dl.from_dlpack(view))
    assert again[0].length == segment.length
    assert again[1:] == (8, (3,), (2,), triple, readonly)


def test_a_read_only_handle_gives_a_read_only_tensor():
    t = dl.zeros(4, shared=True)
    segment, offset, shape, strides, triple, _ = _core._shared_handle(t)
    u = _core._tensor_from_shared(
        os.dup(segment.fd), segment.length, offset, shape, strides, triple, True
    )
    assert u.readonly and u.readonly_reason == "flag"


def test_a_shared_handle_names_its_fields_and_rebuilds_its_view():
    t = dl.full((2, 3), 1.0, shared=True)[:, 1:]
    handle = _core._shared_handle(t)
    assert type(handle).__name__ == "SharedHandle"
    assert (handle.offset, handle.shape, handle.strides) == (4, (2, 2), (3, 1))
    assert (handle.dtype, handle.readonly) == ((2, 32, 1), False)
    u = _core._tensor_in_segment(*handle)
    assert (u.data_ptr, u.shape, u.strides) == (t.data_ptr, t.shape, t.strides)


def test_a_cuda_ipc_handle_is_checked_by_the_core_before_the_driver():
    from dlinterop._integrations import cuda_ipc
    from dlinterop._lib.handles import CudaIpcHandle

    layout = (bytes(64), 0, 0, bytes(64), (4,), (1,), (2, 32, 1))
    with pytest.raises(TypeError, match="a counter is a writable int64 Tensor in shared"):
        cuda_ipc.receive(CudaIpcHandle(*layout, False, dl.zeros((1,), "int64")))
    counter = dl.zeros((1,), "int64", shared=True)
    with pytest.raises(TypeError, match="readonly is a bool"):
        cuda_ipc.receive(CudaIpcHandle(*layout, 0, counter))


def test_no_handle_for_memory_that_is_not_shared():
    assert _core._shared_handle(dl.zeros(3)) is None


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
