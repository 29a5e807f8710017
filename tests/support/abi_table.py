"""The stable ABI's table (dlinterop/abi.h) read with ctypes, for tests that call an entry as
a C extension would without compiling one: abi_entry("tensor_from_managed") is the function
pointer the installed table holds, at the place the header gives it."""

import ctypes
import os
import re

import dlinterop as dl

CAPSULE = b"dlinterop._capi.abi_table"


def entry_names():
    """The table's fields in order, read from the installed header."""
    with open(os.path.join(dl.get_include(), "dlinterop", "abi.h")) as f:
        body = re.search(r"typedef struct DLInteropABI \{(.*?)\} DLInteropABI;", f.read(), re.S)
    text = re.sub(r"/\*.*?\*/", " ", body.group(1), flags=re.S)
    names = []
    for declaration in filter(str.strip, text.split(";")):
        pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", declaration)
        names.append(pointer.group(1) if pointer else declaration.split()[-1])
    return names


def abi_entry(name):
    """The address of the installed table's entry `name` (a function pointer, or the object
    pointer of copy_error). The table starts with major and minor (uint32), size (uint64)
    and version (a pointer); every entry after those is one pointer wide."""
    from dlinterop import _capi

    names = entry_names()
    assert names[:4] == ["major", "minor", "size", "version"], names[:4]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get_pointer(_capi.abi_table, CAPSULE)
    offset = 16 + ctypes.sizeof(ctypes.c_void_p) * (names.index(name) - 3)
    return ctypes.c_void_p.from_address(table + offset).value
