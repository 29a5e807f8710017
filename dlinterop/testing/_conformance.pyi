from typing import Any

from typing_extensions import CapsuleType, disjoint_base

@disjoint_base
class Producer:
    versioned: bool
    major: int
    minor: int
    flags: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    code: int
    bits: int
    lanes: int
    device_type: int
    device_id: int
    byte_offset: int
    shift: int
    payload: bytes
    null_data: bool
    null_shape: bool
    old_signature: bool
    force_versioned: bool
    name: str | bytes | None
    kwargs: dict[str, Any] | None
    capsule: CapsuleType | None
    ndim_override: int | None
    @property
    def data_address(self) -> int | None: ...
    @property
    def id(self) -> int: ...
    @property
    def deleter_calls(self) -> int: ...
    def __init__(
        self,
        payload: bytes = ...,
        shape: tuple[int, ...] = ...,
        code: int = ...,
        bits: int = ...,
        **fields: Any,
    ) -> None: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __dlpack__(self, **kwargs: Any) -> CapsuleType: ...
    def make_capsule(self, copied: bool = False, versioned: bool | None = None) -> CapsuleType: ...

def buffer_span(obj: Any) -> tuple[int, int, bool] | None: ...
def capsule_name(capsule: Any) -> str | None: ...
def inspect(capsule: Any) -> dict[str, Any]: ...
def read(capsule: Any, nbytes: int) -> bytes: ...
def consume(capsule: Any) -> bool: ...
def exchange_table(cls: type) -> dict[str, Any] | None: ...
def exchange_round_trip(obj: Any) -> tuple[int, Any, int]: ...
def exchange_loop(table: Any, obj: Any, n: int, kind: str) -> None: ...
