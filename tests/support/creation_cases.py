"""What the creation tests (test_creation_*.py) share: every registered dtype's name, and
the objects that send an argument down creation's general path with the same value.

dl.empty, dl.zeros, dl.ones, dl.full and dl.arange have common paths, read and written in C,
and a general one. The common paths take exact ints (small ones), tuples of them, dtypes given
as a dl.DType, a registered name or None, exact bools, ints and floats as values; anything
else (a list, a NumPy integer, an int or float subclass, a large int) goes the general way.
The tests pair the two: the same Tensor, or the same error, whichever path an argument takes."""

import dlinterop as dl

from tensor_cases import _raw

ALL_NAMES = sorted({v.name for v in vars(dl).values() if isinstance(v, dl.DType)})


class Int(int):
    """An int the common paths do not take: it goes the general way, with the same value."""


class Float(float):
    """A float the common paths do not take."""


class Index:
    """Not an int, but converts to one (as NumPy integers do)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def _outcome(make, *args, **kwargs):
    """What make(*args, **kwargs) gives: (shape, dtype name, bytes), or the error's type
    and message."""
    try:
        t = make(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - compared below
        return type(error), str(error)
    return t.shape, t.dtype.name, _raw(t)


def _general(value):
    """The same number as an object the common paths leave to the general one."""
    if type(value) is bool:
        return Int(value)
    if type(value) is int:
        return Int(value)
    if type(value) is float:
        return Float(value)
    return value
