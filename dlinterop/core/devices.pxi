# Provides: DeviceType with every DLPack value, the Device class, device parsing
# (_parse_device, device_from_object) and the CPU device constant.
# Uses: nothing.

import enum as _enum


class DeviceType(_enum.IntEnum):
    """Every DLPack device type (1.3, and ASCEND from DLPack's main)."""
    CPU = kDLCPU
    CUDA = kDLCUDA
    CUDA_HOST = kDLCUDAHost
    OPENCL = kDLOpenCL
    VULKAN = kDLVulkan
    METAL = kDLMetal
    VPI = kDLVPI
    ROCM = kDLROCM
    ROCM_HOST = kDLROCMHost
    EXT_DEV = kDLExtDev
    CUDA_MANAGED = kDLCUDAManaged
    ONEAPI = kDLOneAPI
    WEBGPU = kDLWebGPU
    HEXAGON = kDLHexagon
    MAIA = kDLMAIA
    TRN = kDLTrn
    TPU = kDLTPU
    TPU_HOST = kDLTPUHost
    ASCEND = kDLAscend


# Indexed by the DLDeviceType value; None where DLPack defines no device type.
cdef list _device_types = [None] * (kDLAscend + 1)
cdef dict _device_type_by_name = {}
for _member in DeviceType:
    _device_types[_member.value] = _member
    _device_type_by_name[_member.name.lower()] = _member
del _member

# The result of __dlpack_device__ for the CPU, built once: the hot path returns it as is.
cdef tuple _cpu_dlpack_device = (DeviceType.CPU, 0)


cdef inline bint _known_device_type(int32_t device_type) noexcept nogil:
    return 1 <= device_type <= kDLAscend and device_type not in (5, 6)


cdef object _device_type_member(int32_t device_type):
    if not _known_device_type(device_type):
        raise ValueError(f"unknown DLPack device type {device_type}")
    return _device_types[device_type]


cdef tuple _dlpack_device_tuple(DLDevice dev):
    if dev.device_type == kDLCPU and dev.device_id == 0:
        return _cpu_dlpack_device
    if not _known_device_type(dev.device_type):
        return (<int>dev.device_type, dev.device_id)
    return (_device_types[<int>dev.device_type], dev.device_id)


cdef str _device_type_name(int32_t device_type):
    """The lower-case name of a device type ('cuda'); never raises, even for a value DLPack
    does not define (which only a C caller can pass)."""
    if not _known_device_type(device_type):
        return f"unknown device type {device_type}"
    return _device_types[device_type].name.lower()


cdef DLDevice _parse_device(object x) except *:
    """A DLDevice from a Device, a string ('cuda:1', 'cpu'), a DeviceType or a
    (type, index) pair."""
    cdef DLDevice dev
    if type(x) is Device:
        if not _known_device_type((<Device>x).dl.device_type):   # made by Device.__new__
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
