"""Runs a function when a module is first imported, without importing it: how dlinterop
plugs into a library that may never be used in this process (multiprocessing's pickler,
Dask's serializers) at no import cost.

`when_imported(name, register)` calls `register(module)` at once when `name` is imported
already, else right after the module has run for the first time: a meta-path finder that
finds nothing itself hands the real spec on with a loader that runs `register` after the
real loader. The finder leaves `sys.meta_path` once nothing is waited for.
"""
import _thread
import sys

_waiting: dict = {}            # module name -> [register, ...]
_lock = _thread.allocate_lock()   # (threading would cost import time)


def when_imported(name, register):
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append(register)
            if not any(isinstance(f, _Finder) for f in sys.meta_path):
                sys.meta_path.insert(0, _Finder())
            return
    register(module)


def _take(name):
    with _lock:
        registers = _waiting.pop(name, None)
        if not _waiting:
            for finder in [f for f in sys.meta_path if isinstance(f, _Finder)]:
                sys.meta_path.remove(finder)
    return registers


class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name not in _waiting:
            return None
        registers = _take(name)
        if not registers:
            return None
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, registers)
        return spec


class _Loader:
    """Runs the real loader, then each register with the module it made."""

    def __init__(self, loader, registers):
        self._loader = loader
        self._registers = registers

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for register in self._registers:
            register(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
