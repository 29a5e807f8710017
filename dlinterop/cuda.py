"""dlinterop.cuda: devices, streams and synchronisation.

Importing it never fails for lack of CUDA. Without the CUDA allocator (dlinterop._cuda,
built when CMake finds nvcc), a driver or a GPU, device_count() is 0 and everything that
needs a device raises CUDAError.
"""

from __future__ import annotations

import threading
from types import ModuleType

from dlinterop import _core
from dlinterop._core import CUDAError as CUDAError
from dlinterop._core import CUDAOutOfMemoryError as CUDAOutOfMemoryError

TYPE_CHECKING = False  # not typing's: importing dlinterop stays free of typing
if TYPE_CHECKING:
    from typing import Literal, SupportsInt, TypeAlias

    from typing_extensions import Self

    from dlinterop._core import _DeviceLike

    _AnyDevice: TypeAlias = int | _DeviceLike | None


def _load() -> ModuleType | None:
    """dlinterop._cuda (through the core's one loader), or None when it was not built."""
    return _core._cuda_module()


def _require() -> ModuleType:
    module = _load()
    if module is None:
        raise CUDAError(
            -1,
            "dlinterop was built without its CUDA allocator "
            "(reinstall with nvcc on PATH, or DLINTEROP_CUDA=ON)",
        )
    return module


def device_count() -> int:
    """The number of usable CUDA devices; 0 without the allocator, a driver or a GPU."""
    module = _load()
    return 0 if module is None else int(module.device_count())


def is_available() -> bool:
    return device_count() > 0


def _device_index(device: _AnyDevice) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    from dlinterop import Device, _core

    d = device if isinstance(device, Device) else Device(device)
    if not _core._device_kind(d).cuda:  # the table of device kinds: the CUDA layer's memory
        raise ValueError(f"{d} is not a CUDA device")
    return int(d.index)


def synchronize(device: _AnyDevice = None) -> None:
    """Waits for all work on `device` (default: cuda:0)."""
    _require().synchronize(_device_index(device))


_local = threading.local()


class Stream:
    """A CUDA stream. Used as a context manager it becomes the current stream of its device
    on this thread: dlinterop issues its own copies and fills there, and exports and imports
    order themselves after it."""

    device: int

    def __init__(self, device: _AnyDevice = None, *, ptr: SupportsInt | None = None) -> None:
        self.device = _device_index(device)
        module = _require()
        if ptr is None:
            self._ptr: int = module.stream_create(self.device)
            self._owned = True
        else:
            self._ptr = int(ptr)
            self._owned = False
        self._module = module
        self._previous: list[int] = []

    @property
    def ptr(self) -> int:
        """The cudaStream_t as an int (0 is the legacy default stream)."""
        return self._ptr

    def synchronize(self) -> None:
        self._module.stream_synchronize(self._ptr)

    def __enter__(self) -> Self:
        self._previous.append(self._module.enter_stream(self.device, self._ptr))
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self._module.exit_stream(self.device, self._previous.pop())
        return False

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and self._ptr:
            try:
                self._module.stream_destroy(self.device, self._ptr)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"Stream(device={self.device}, ptr=0x{self._ptr:x})"


def current_stream(device: _AnyDevice = None) -> Stream:
    """The stream dlinterop issues work on for `device` on this thread."""
    index = _device_index(device)
    return Stream(index, ptr=_require().current_stream_ptr(index))
