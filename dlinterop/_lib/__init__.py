"""dlinterop's private helpers, shared by the core and the public modules.

Python: the build's facts (build_config, written by CMake) and dl.build_info /
dl.get_include (info); element values as Python objects (values) and the small float
formats' bit patterns (minifloat); the handles a Tensor crosses a process boundary as
(handles).
Cython, compiled into each module that cimports them (no module of their own): the rules
the core, frameworks and the CUDA layer share (rules.pxd), reads that stay safe without a
GIL (threadsafe.pxd) and the per-type cache (type_cache.pxd)."""

if getattr(__import__("dlinterop"), "_borrowed_compiled_modules", False):
    # Run from a source checkout (dlinterop/__init__.py): what the build wrote here is in
    # the installed copy's folder.
    __path__ = __import__("pkgutil").extend_path(__path__, __name__)
