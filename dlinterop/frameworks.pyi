from types import ModuleType
from typing import Any, TypeVar, overload

from dlinterop._core import Tensor, _DeviceLike, _DTypeLike, _ShapeLike

_T = TypeVar("_T")

def check_tensor(
    x: Any,
    name: str = "argument",
    *,
    dtype: _DTypeLike | None = None,
    ndim: int | None = None,
    device: _DeviceLike | None = None,
    c_contiguous: bool = False,
    writable: bool = False,
) -> Tensor: ...
def empty_like(
    x: Any,
    *,
    shape: _ShapeLike | None = None,
    dtype: _DTypeLike | None = None,
    device: _DeviceLike | None = None,
) -> Tensor: ...
def zeros_like(
    x: Any,
    *,
    shape: _ShapeLike | None = None,
    dtype: _DTypeLike | None = None,
    device: _DeviceLike | None = None,
) -> Tensor: ...
@overload
def to_framework(t: Any, like: str | ModuleType, *, copy: bool | None = None) -> Any: ...
@overload
def to_framework(t: Any, like: type[_T], *, copy: bool | None = None) -> _T: ...
@overload
def to_framework(t: Any, like: _T, *, copy: bool | None = None) -> _T: ...
def _borrow_routes(obj: Any) -> tuple[str, tuple[int, ...], bool]: ...
def _adapter_types_cached() -> int: ...
def _to_mlx(t: Any) -> Any: ...
def _forget_adapter_type(ref: Any) -> None: ...
