"""Round trips: a dlinterop Tensor out through a consumer and back, and what it leaves behind."""

import gc
import os

import dlinterop as dl

from .common import (
    LAYOUTS,
    PEERS,
    ROUND_TRIPS,
    Benchmark,
    check_consumable,
    dlinterop_tensor,
    from_dlpack_of,
)


def _rss_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        raise NotImplementedError("RSS needs /proc") from None


class RoundTrip(Benchmark):
    """dl.from_dlpack(via.from_dlpack(t)): export to a peer and import the peer's view."""

    params = [["dlinterop"] + PEERS, LAYOUTS]
    param_names = ["via", "layout"]

    def setup(self, via, layout):
        check_consumable(via, layout)
        self.via = from_dlpack_of(via)
        self.tensor = dlinterop_tensor("float32", "1 MiB", layout)

    def time_round_trip(self, via, layout):
        dl.from_dlpack(self.via(self.tensor))


class CapsuleRoundTrip(Benchmark):
    """dl.from_dlpack(t.__dlpack__(...)): both ends dlinterop, through a bare capsule."""

    params = [["legacy", "versioned"], LAYOUTS]
    param_names = ["capsule", "layout"]

    def setup(self, capsule, layout):
        self.tensor = dlinterop_tensor("float32", "1 MiB", layout)
        self.kwargs = {} if capsule == "legacy" else {"max_version": (1, 3)}

    def time_round_trip(self, capsule, layout):
        dl.from_dlpack(self.tensor.__dlpack__(**self.kwargs))


class RoundTripMemory(Benchmark):
    """100,000 export-and-import round trips: peak memory, and what RSS keeps afterwards.
    A leaked capsule or managed tensor per trip would show as megabytes."""

    params = [
        ["dl.from_dlpack(t)", "np.from_dlpack(t)", "dl.from_dlpack(a)", "dl.from_dlpack(capsule)"]
    ]
    param_names = ["trip"]
    timeout = 300

    def setup(self, trip):
        import numpy as np

        tensor = dl.zeros((16,), dl.float32)
        array = np.zeros(16, np.float32)
        self.call = {
            "dl.from_dlpack(t)": lambda: dl.from_dlpack(tensor),
            "np.from_dlpack(t)": lambda: np.from_dlpack(tensor),
            "dl.from_dlpack(a)": lambda: dl.from_dlpack(array),
            "dl.from_dlpack(capsule)": lambda: dl.from_dlpack(
                tensor.__dlpack__(max_version=(1, 3))
            ),
        }[trip]
        for _ in range(ROUND_TRIPS // 10):  # warm the allocators first
            self.call()
        gc.collect()

    def _trips(self):
        call = self.call
        for _ in range(ROUND_TRIPS):
            call()

    def peakmem_round_trips(self, trip):
        self._trips()

    def track_rss_growth(self, trip):
        before = _rss_bytes()
        self._trips()
        gc.collect()
        return _rss_bytes() - before

    track_rss_growth.unit = "bytes"
