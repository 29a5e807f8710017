"""A minimal DLPack producer around forged tensors: :class:`CountingProducer`."""

import inspect

from .forged import Forged


class CountingProducer:
    """A minimal DLPack producer around a Forged (or a factory of Forged objects).

    ``__dlpack__`` records its keyword arguments in ``.calls`` (a list of dicts) and
    returns ``forged.capsule``: the same capsule every time for a Forged, a fresh one per
    call for a factory. A factory is called with the call's kwargs dict if it accepts a
    parameter, else with no arguments. Every Forged handed out is kept in ``.forged``
    (so its memory outlives the consumer). ``__dlpack_device__`` returns ``device`` if
    given, else the (last) forged device, else (1, 0); its calls are counted in
    ``.device_calls``.
    """

    def __init__(self, forged_or_factory, device=None):
        self.calls = []
        self.device_calls = 0
        self.forged = []
        self._device = None if device is None else tuple(device)
        if isinstance(forged_or_factory, Forged):
            self._factory = None
            self.forged.append(forged_or_factory)
        elif callable(forged_or_factory):
            self._factory = forged_or_factory
            try:
                self._pass_kwargs = bool(inspect.signature(forged_or_factory).parameters)
            except (TypeError, ValueError):
                self._pass_kwargs = False
        else:
            raise TypeError("CountingProducer needs a Forged or a callable returning one")

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Record the call and return the forged capsule."""
        kwargs = dict(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        self.calls.append(kwargs)
        if self._factory is None:
            return self.forged[0].capsule
        f = self._factory(dict(kwargs)) if self._pass_kwargs else self._factory()
        self.forged.append(f)
        return f.capsule

    def __dlpack_device__(self):
        """The forged device as a (device_type, device_id) tuple."""
        self.device_calls += 1
        if self._device is not None:
            return self._device
        if self.forged:
            return tuple(self.forged[-1].device)
        return (1, 0)
