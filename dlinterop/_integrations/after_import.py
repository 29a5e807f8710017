"""Runs a function once a module has run, without importing it: how dlinterop plugs into a
library that may never be used in this process (multiprocessing's pickler, Dask's
serializers) at no import cost.

`when_imported(name, register)` calls `register(module)` once module `name` has finished
running: at once where it has, else right after its import, and again after each
importlib.reload of it (a reload makes its classes anew: what was registered with the old
ones is gone). An import that fails leaves `register` waiting for the next attempt.
`forget(name, register)` stops that (the pytest plugin's, at the end of its session).

A meta-path finder that finds nothing itself hands the real spec on with a loader that runs
the registers after the real loader, on import and on reload. A module in sys.modules has
not necessarily run: the import machinery puts it there first, then runs it, and marks it
with `__spec__._initializing` meanwhile (importlib._bootstrap._load_unlocked). So
`when_imported` looks at sys.modules holding the module's import lock, as an import of it
does: that waits out an import of it in another thread. A module still running then is
being imported further up this thread's own stack (a circular import); its registers run
when the import machinery marks it done.
"""

import _thread
import sys
from importlib import _bootstrap
from importlib.machinery import ModuleSpec

_registers: dict = {}  # module name -> [register, ...], kept for reloads
_lock = _thread.allocate_lock()  # (threading would cost import time)
_watched: dict = {}  # id(spec) -> (spec, module, [register, ...]): see _watch


def when_imported(name, register):
    with _lock:
        _registers.setdefault(name, []).append(register)
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
    # From here on an import of `name` finds the register; one begun before is waited out.
    try:
        with _bootstrap._ModuleLockManager(name):
            _run_if_run(name, register)
    except _bootstrap._DeadlockError:
        # The thread importing `name` waits for a module this thread is importing: look
        # without waiting (a module still running is then watched, as in a circular import).
        _run_if_run(name, register)


def forget(name, register):
    """`register` is no longer called for imports or reloads of `name` (a registration
    already waiting for a module being imported may still run once)."""
    with _lock:
        registers = _registers.get(name, [])
        for i, known in enumerate(registers):
            if known is register:
                del registers[i]
                break
        if not registers:
            _registers.pop(name, None)


def _run_if_run(name, register):
    module = sys.modules.get(name)
    if module is None:
        return  # _Finder hands its import a _Loader
    spec = getattr(module, "__spec__", None)
    if not getattr(spec, "_initializing", False):
        register(module)
    elif not isinstance(spec.loader, _Loader):  # a _Loader runs registers added meanwhile
        _watch(spec, module, register)


def _watch(spec, module, register):
    """Runs register(module) when the import machinery marks spec's module done (sets
    `spec._initializing` False), if its import succeeded. The spec, a ModuleSpec, is a
    _Watched until then; a spec of another type is left alone, and the register waits for
    the module's next import or reload."""
    if type(spec) not in (ModuleSpec, _Watched):
        return
    with _lock:
        _watched.setdefault(id(spec), (spec, module, []))[2].append(register)
        spec.__class__ = _Watched
    if not spec._initializing:  # marked done (in another thread) before it was watched
        _done(spec)


class _Watched(ModuleSpec):
    def __setattr__(self, attribute, value):
        super().__setattr__(attribute, value)
        if attribute == "_initializing" and not value:
            _done(self)


def _done(spec):
    with _lock:
        spec.__class__ = ModuleSpec
        entry = _watched.pop(id(spec), None)
    if entry is None:  # done already
        return
    _spec, module, registers = entry
    if sys.modules.get(spec.name) is module:  # else the import failed
        for register in registers:
            register(module)


class _Finder:
    """Finds nothing itself: for a module waited for, hands on the spec the finders after
    it find, with a _Loader."""

    def find_spec(self, name, path=None, target=None):
        if name not in _registers:
            return None
        # The meta path walked as importlib._bootstrap._find_spec walks it, minus this
        # finder (importlib.util.find_spec would come back here).
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None or isinstance(finder, _Finder):
                continue
            spec = find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if hasattr(spec.loader, "exec_module") and not isinstance(spec.loader, _Loader):
            spec.loader = _Loader(spec.loader, name)
        return spec


class _Loader:
    """Runs the real loader, then each register of the module with the module it made:
    those added while they run too (a register may import what waits for this module)."""

    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        done = 0
        while True:
            with _lock:
                registers = _registers.get(self._name, [])[done:]
            if not registers:
                return
            for register in registers:
                register(module)
            done += len(registers)

    def __getattr__(self, name):
        return getattr(self._loader, name)
