"""The memory limits every allocation is checked against: the machine's memory and swap,
cgroup v1 and v2 limits; what is beyond them refused before malloc or CUDA."""

import numpy as np
import pytest

import dlinterop as dl
from dlinterop import _core

# -- memory limits ----------------------------------------------------------------------

MiB, GiB = 1 << 20, 1 << 30
MACHINE = {
    "MemTotal": 8 * GiB,
    "MemFree": 5 * GiB,
    "MemAvailable": 6 * GiB,
    "SwapTotal": 2 * GiB,
    "SwapFree": 1 * GiB,
}


def test_the_room_is_the_machines_available_memory_and_swap(machine):
    assert machine(MACHINE) == (7 * GiB, 10 * GiB)


@pytest.mark.parametrize(
    "swap_max, ceiling", [("0", 4 * GiB), (f"{GiB}", 5 * GiB), ("max", 6 * GiB)]
)
def test_a_cgroup_v2_limit_anywhere_above_binds(machine, swap_max, ceiling):
    # Available now: the limit less the usage, but for the inactive file cache, which the
    # kernel drops before it fails a charge. Ever: the limit and the swap it may use.
    room = machine(
        MACHINE,
        "0::/a/b\n",
        {
            "a/memory.max": f"{4 * GiB}\n",
            "a/memory.current": f"{3 * GiB}\n",
            "a/memory.stat": f"anon {2 * GiB}\ninactive_file {GiB}\n",
            "a/memory.swap.max": f"{swap_max}\n",
            "a/b/memory.max": "max\n",
            "a/b/memory.current": f"{3 * GiB}\n",
        },
    )
    assert room == (2 * GiB, ceiling)


@pytest.mark.parametrize("memsw, ceiling", [(None, 5 * GiB), (3 * GiB, 3 * GiB)])
def test_a_cgroup_v1_limit_binds(machine, memsw, ceiling):
    files = {
        "memory/job/memory.limit_in_bytes": f"{3 * GiB}\n",
        "memory/job/memory.usage_in_bytes": f"{GiB + 256 * MiB}\n",
        "memory/job/memory.stat": f"cache 0\ntotal_inactive_file {256 * MiB}\n",
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
        "memory/memory.usage_in_bytes": f"{4 * GiB}\n",
    }
    if memsw is not None:  # memory and swap together; absent without swap accounting
        files["memory/job/memory.memsw.limit_in_bytes"] = f"{memsw}\n"
    room = machine(MACHINE, "5:cpu,cpuacct:/\n4:memory:/job\n0::/\n", files)
    assert room == (2 * GiB, ceiling)


def test_a_containers_own_cgroup_binds_where_its_path_is_not_mounted(machine):
    # Without a cgroup namespace the container sees the host's path for its cgroup, and
    # its own cgroup mounted as the root.
    room = machine(
        MACHINE,
        "0::/system.slice/docker-1234.scope\n",
        {"memory.max": f"{GiB}\n", "memory.current": f"{512 * MiB}\n", "memory.swap.max": "0\n"},
    )
    assert room == (512 * MiB, GiB)


def test_nothing_is_known_without_proc(tmp_path):
    _core._read_memory_limits_from(str(tmp_path / "none"), str(tmp_path / "none"))
    try:
        assert _core._memory_room() == (None, None)
        assert dl.empty(128 * MiB, "uint8").nbytes == 128 * MiB
    finally:
        _core._read_memory_limits_from()


@pytest.mark.parametrize(
    "make",
    [
        lambda n: dl.empty(n, "uint8"),
        lambda n: dl.zeros(n // 8, "float64"),
        lambda n: dl.full(n, 1, "uint8"),
        lambda n: dl.from_dlpack(np.broadcast_to(np.zeros(1, np.uint8), (n,))).copy(),
    ],
)
def test_host_memory_beyond_the_ceiling_is_refused_before_malloc(machine, make):
    # malloc would have granted 512 MiB here (and, overcommitting, any size): the
    # processes the OOM killer ends when the pages are touched are often others.
    machine({**MACHINE, "MemTotal": 256 * MiB, "SwapTotal": 0})
    with pytest.raises(MemoryError, match=f"can never have more than {256 * MiB}"):
        make(512 * MiB)
    assert make(16 * MiB).nbytes == 16 * MiB  # too small to check


def test_pinned_memory_beyond_what_is_available_now_is_refused_before_cuda(machine):
    # Pinning takes the pages at once, as a shared segment does.
    machine({**MACHINE, "MemAvailable": 256 * MiB, "SwapFree": 0})
    with pytest.raises(MemoryError, match=f"cannot pin {512 * MiB} bytes of host memory"):
        dl.empty(512 * MiB, "uint8", device="cuda_host")


@pytest.mark.parametrize("make", [dl.empty, dl.zeros])
def test_a_terabyte_of_host_memory_is_a_memory_error(make):
    with pytest.raises(MemoryError, match="can never have more than"):
        make(1 << 40, "uint8")
