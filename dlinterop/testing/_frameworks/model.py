"""What the checker needs of a framework: a Framework."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass
class Framework:
    """What the checker needs of a framework.

    make(values, dtype): a new array of this framework with the values of the NumPy array
    `values` cast to `dtype` (a dlinterop dtype name: "float32", "bfloat16", ...).
    dtypes: the dtype names it has. from_dlpack(obj, **kwargs): its consumer.
    view(kind, values): an array of the framework whose layout is `kind` ("reversed",
    "strided", "broadcast") over `values`, or None when it cannot make one.
    readonly(values): a read-only array, or None when it has none. writable(obj): whether
    an array may be written (None: cannot say). unexportable(): an array of the framework
    whose data type DLPack cannot carry (a string array, a quantized tensor), or None when
    it has none. Missing optional parts make their rules n/a.
    """

    name: str
    make: Callable[[Any, str], Any]
    from_dlpack: Callable[..., Any]
    dtypes: frozenset
    view: Callable[[str, Any], Any] | None = None
    readonly: Callable[[Any], Any] | None = None
    writable: Callable[[Any], bool | None] | None = None
    immutable: bool = False  # its arrays can never be written (JAX, array-api-strict)
    unexportable: Callable[[], Any] | None = None
