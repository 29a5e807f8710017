# dlinterop._capi exists for C: the stable ABI's table of dlinterop/abi.h, which
# DLInterop_Import() and dlinterop.abi's import_dlinterop() read.

abi_table: object
"""A capsule named "dlinterop._capi.abi_table" holding the table."""

def abi_version() -> tuple[int, int]:
    """The (major, minor) version of the stable ABI's table this dlinterop publishes."""
