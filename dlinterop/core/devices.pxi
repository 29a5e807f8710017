# Provides: the Python view of the table of device kinds (src/device_kinds.h; its
# predicates, cimported from dlinterop/_lib/device_kinds.pxd, answer every device question
# in C): _DeviceKind, _DEVICE_KINDS and _device_kind; DeviceType with every DLPack value,
# made from the table's rows; the Device class, device parsing (_parse_device,
# device_from_object) and the CPU device constant.
# Uses: nothing.

import enum as _enum


@cython.final
cdef class _DeviceKind:
    """One row of the table of device kinds (src/device_kinds.h), read where it lives: what
    dlinterop's rules say of memory on one DLPack device type. The Python modules (the
    integrations, the conformance checker, the pytest plugin) ask it what the core's rules
    ask the C table; there is one per row, made at import (_DEVICE_KINDS)."""
    cdef readonly int value

    cdef const dli_device_kind* _row(self) except NULL:
        cdef const dli_device_kind* row = dli_device_kind_of(self.value)
        if row == NULL:   # one made by __new__ alone
            raise ValueError(f"DLPack defines no device type {self.value}")
        return row

    @property
    def name(self):
        """dl.DeviceType's member, lower case: Device.type ('cuda_host')."""
        return self._row().name.decode()

    @property
    def host(self):
        """Plain host memory: dlinterop's host allocator makes it, memcpy copies it."""
        return bool(self._row().flags & DLI_KIND_HOST)

    @property
    def host_readable(self):
        """The CPU reads and writes it directly (values, buffers, NumPy, pickling)."""
        return bool(self._row().flags & DLI_KIND_HOST_READABLE)

    @property
    def pinned(self):
        """Page-locked host memory: its pages are taken when it is made."""
        return bool(self._row().flags & DLI_KIND_PINNED)

    @property
    def streams(self):
        """A GPU runtime orders it by streams: stream= takes an int, not None alone."""
        return bool(self._row().flags & DLI_KIND_STREAMS)

    @property
    def stream_zero(self):
        """Stream 0 is its default stream (ROCm); on CUDA, 0 is refused as ambiguous."""
        return bool(self._row().flags & DLI_KIND_STREAM_ZERO)

    @property
    def cuda(self):
        """The CUDA layer allocates, copies and fills it, and orders dlinterop's work."""
        return bool(self._row().flags & DLI_KIND_CUDA)

    @property
    def cuda_gpu(self):
        """On one GPU: it has that GPU's current stream, __cuda_array_interface__ says it."""
        return bool(self._row().flags & DLI_KIND_CUDA_GPU)

    @property
    def cuda_ipc(self):
        """CUDA IPC hands it to another process."""
        return bool(self._row().flags & DLI_KIND_CUDA_IPC)

    @property
    def allocatable(self):
        """dlinterop allocates, fills and copies it (its host allocator or the CUDA layer)."""
        return bool(dli_device_reachable(self.value))

    @property
    def alignment(self):
        """The alignment of dlinterop's allocations there, the most that can be asked; 0:
        any (the host's), or none are made there."""
        return self._row().alignment

    @property
    def torch(self):
        """The torch.device type torch.from_dlpack gives it ('hip' is 'cuda' in a ROCm
        build of PyTorch); None where PyTorch refuses it."""
        return None if self._row().torch == NULL else self._row().torch.decode()

    @property
    def numpy(self):
        """NumPy's name for it: 'cpu' for host-readable memory, which np.from_dlpack takes;
        None where NumPy refuses it."""
        return "cpu" if self._row().flags & DLI_KIND_HOST_READABLE else None

    def __repr__(self):
        row = dli_device_kind_of(self.value)
        return f"<device kind {row.name.decode() if row != NULL else None} ({self.value})>"


cdef list _kind_by_value = [None] * DLI_DEVICE_TYPES
for _value in range(DLI_DEVICE_TYPES):
    if dli_device_kind_of(_value) != NULL:
        _kind = _DeviceKind.__new__(_DeviceKind)
        (<_DeviceKind>_kind).value = _value
        _kind_by_value[_value] = _kind
del _value, _kind
# Every row, in the order of their values.
_DEVICE_KINDS = tuple([kind for kind in _kind_by_value if kind is not None])


def _device_kind(x):
    """The table's row for `x`: a device type as an int (None where DLPack defines no such
    device type), or anything dl.Device takes (a Device, 'cuda:0', a Tensor)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return _kind_by_value[x] if 0 <= x < DLI_DEVICE_TYPES else None
    return _kind_by_value[_parse_device(x).device_type]


# Every DLPack device type: a member per row of the table, its name in upper case.
DeviceType = _enum.IntEnum("DeviceType", [(kind.name.upper(), kind.value)
                                          for kind in _DEVICE_KINDS],
                           module=__name__, qualname="DeviceType")
DeviceType.__doc__ = ("Every DLPack device type (1.3, and ASCEND from DLPack's main): a member "
                      "per row of dlinterop's table of device kinds.")


# Indexed by the DLDeviceType value; None where DLPack defines no device type.
cdef list _device_types = [None] * DLI_DEVICE_TYPES
cdef dict _device_type_by_name = {}
for _member in DeviceType:
    _device_types[_member.value] = _member
    _device_type_by_name[_member.name.lower()] = _member
del _member

# The result of __dlpack_device__ for the CPU, built once: the hot path returns it as is.
cdef tuple _cpu_dlpack_device = (DeviceType.CPU, 0)


cdef int32_t _device_type_value(object device_type):
    """A producer's device type as a DLDeviceType's value where it is an int in int32's
    range, else -1, which no row of the table has."""
    if isinstance(device_type, int) and -2**31 <= device_type < 2**31:
        return device_type
    return -1


cdef object _device_type_member(int32_t device_type):
    if not dli_device_known(device_type):
        raise ValueError(f"unknown DLPack device type {device_type}")
    return _device_types[device_type]


cdef tuple _dlpack_device_tuple(DLDevice dev):
    if dli_device_host(dev.device_type) and dev.device_id == 0:
        return _cpu_dlpack_device
    if not dli_device_known(dev.device_type):
        return (<int>dev.device_type, dev.device_id)
    return (_device_types[<int>dev.device_type], dev.device_id)


cdef str _device_type_name(int32_t device_type):
    """The lower-case name of a device type ('cuda'); never raises, even for a value DLPack
    does not define (which only a C caller can pass)."""
    cdef const dli_device_kind* kind = dli_device_kind_of(device_type)
    if kind == NULL:
        return f"unknown device type {device_type}"
    return kind.name.decode()


cdef DLDevice _parse_device(object x) except *:
    """A DLDevice from a Device, a string ('cuda:1', 'cpu'), a DeviceType or a
    (type, index) pair."""
    cdef DLDevice dev
    if type(x) is Device:
        if not dli_device_known((<Device>x).dl.device_type):   # made by Device.__new__
            raise ValueError(f"{x!r} is not a device")
        return (<Device>x).dl
    if isinstance(x, str):
        name, sep, index = x.partition(":")
        member = _device_type_by_name.get(name.strip().lower())
        if member is None:
            raise ValueError(f"unknown device {x!r}; expected a name such as 'cpu' or 'cuda:0'")
        try:
            dev.device_id = _as_int(int(index), "device index") if sep else 0
        except (TypeError, ValueError):
            raise ValueError(f"bad device index in {x!r}") from None
        dev.device_type = member
    elif isinstance(x, tuple) and len(x) == 2:
        dev.device_type = _device_type_member(_as_int(x[0], "device type"))
        dev.device_id = _as_int(x[1], "device index")
    elif isinstance(x, int) and not isinstance(x, bool):
        dev.device_type = _device_type_member(x)
        dev.device_id = 0
    elif hasattr(x, "__dlpack_device__"):
        return _parse_device(tuple(x.__dlpack_device__()))
    else:
        raise TypeError(f"cannot interpret {x!r} as a device; pass 'cpu', 'cuda:0', a "
                        "dl.Device or a (DeviceType, index) pair")
    if dev.device_id < 0:
        raise ValueError(f"device index must be >= 0, got {dev.device_id}")
    return dev


cdef int32_t _as_int(object value, str what) except? -1:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if not (-2**31 <= value < 2**31):
        raise ValueError(f"{what} {value} is out of range")
    return value


@cython.final
cdef class Device:
    """Device(type, index=None)
--

    A DLPack device: Device('cuda:1'), Device('cpu'), Device(DeviceType.CUDA, 1)."""

    def __init__(self, type, index=None):
        if index is None:
            self.dl = _parse_device(type)
        else:
            if isinstance(type, str):
                member = _device_type_by_name.get(type.lower())
                if member is None:
                    raise ValueError(f"unknown device type {type!r}")
                self.dl.device_type = member
            else:
                self.dl.device_type = _device_type_member(_as_int(type, "device type"))
            self.dl.device_id = _as_int(index, "device index")
            if self.dl.device_id < 0:
                raise ValueError(f"device index must be >= 0, got {self.dl.device_id}")

    @property
    def type(self):
        """The lower-case name of the device type: 'cpu', 'cuda', 'cuda_host', ..."""
        return _device_type_name(self.dl.device_type)

    @property
    def index(self):
        return self.dl.device_id

    def __dlpack_device__(self):
        return _dlpack_device_tuple(self.dl)

    def __str__(self):
        return f"{self.type}:{self.dl.device_id}"

    def __repr__(self):
        return f"Device('{self}')"

    def __hash__(self):
        return hash(str(self))

    def __eq__(self, other):
        if type(other) is Device:
            return (self.dl.device_type == (<Device>other).dl.device_type
                    and self.dl.device_id == (<Device>other).dl.device_id)
        if isinstance(other, str):
            try:
                dev = _parse_device(other)
            except ValueError:
                return False
            return self.dl.device_type == dev.device_type and self.dl.device_id == dev.device_id
        return NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __reduce__(self):
        return (Device, (str(self),))


cdef Device device_from_dl(DLDevice dev):
    cdef Device d = Device.__new__(Device)
    d.dl = dev
    return d


cdef DLDevice _CPU
_CPU.device_type = kDLCPU
_CPU.device_id = 0


cdef DLDevice device_from_object(object device) except *:
    """A DLDevice from anything dl.Device accepts ("cpu", "cuda:1", (2, 0), a Device)."""
    return _parse_device(device)
