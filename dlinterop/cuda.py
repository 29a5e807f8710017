"""dlinterop.cuda: the CUDA layer. Importing it never fails for lack of CUDA; without the
CUDA allocator, a driver or a GPU, device_count() is 0."""
import importlib

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


def device_count():
    """The number of usable CUDA devices; 0 without the allocator, a driver or a GPU."""
    module = _load()
    return 0 if module is None else module.device_count()


def is_available():
    return device_count() > 0
