"""dlinterop.cuda: devices, streams and synchronisation.

Importing it never fails for lack of CUDA. Without the CUDA allocator (dlinterop._cuda,
built when CMake finds nvcc), a driver or a GPU, device_count() is 0 and everything that
needs a device raises CUDAError.
"""
import importlib
import threading


class CUDAError(RuntimeError):
    """A CUDA runtime failure: `code` is the cudaError_t value, the message the runtime's."""

    def __init__(self, code, message):
        super().__init__(f"CUDA error {code}: {message}")
        self.code = code


class CUDAOutOfMemoryError(CUDAError, MemoryError):
    """The CUDA allocator is out of memory."""


_module = None
_loaded = False


def _load():
    global _module, _loaded
    if not _loaded:
        try:
            _module = importlib.import_module("dlinterop._cuda")
        except ImportError:
            _module = None
        _loaded = True
    return _module


def _require():
    module = _load()
    if module is None:
        raise CUDAError(-1, "dlinterop was built without its CUDA allocator "
                            "(reinstall with nvcc on PATH, or DLINTEROP_CUDA=ON)")
    return module


def device_count():
    """The number of usable CUDA devices; 0 without the allocator, a driver or a GPU."""
    module = _load()
    return 0 if module is None else module.device_count()


def is_available():
    return device_count() > 0


def _device_index(device):
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    from dlinterop import Device

    d = device if isinstance(device, Device) else Device(device)
    if d.type not in ("cuda", "cuda_managed", "cuda_host"):
        raise ValueError(f"{d} is not a CUDA device")
    return d.index


def synchronize(device=None):
    """Waits for all work on `device` (default: cuda:0)."""
    _require().synchronize(_device_index(device))


_local = threading.local()


class Stream:
    """A CUDA stream. Used as a context manager it becomes the current stream of its device
    on this thread: dlinterop issues its own copies and fills there, and exports and imports
    order themselves after it."""

    def __init__(self, device=None, *, ptr=None):
        self.device = _device_index(device)
        module = _require()
        if ptr is None:
            self._ptr = module.stream_create(self.device)
            self._owned = True
        else:
            self._ptr = int(ptr)
            self._owned = False
        self._module = module
        self._previous = []

    @property
    def ptr(self):
        """The cudaStream_t as an int (0 is the legacy default stream)."""
        return self._ptr

    def synchronize(self):
        self._module.stream_synchronize(self._ptr)

    def __enter__(self):
        self._previous.append(self._module.enter_stream(self.device, self._ptr))
        return self

    def __exit__(self, *exc):
        self._module.exit_stream(self.device, self._previous.pop())
        return False

    def __del__(self):
        if getattr(self, "_owned", False) and self._ptr:
            try:
                self._module.stream_destroy(self.device, self._ptr)
            except Exception:
                pass

    def __repr__(self):
        return f"Stream(device={self.device}, ptr=0x{self._ptr:x})"


def current_stream(device=None):
    """The stream dlinterop issues work on for `device` on this thread."""
    index = _device_index(device)
    return Stream(index, ptr=_require().current_stream_ptr(index))
