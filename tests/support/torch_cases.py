"""What the PyTorch interop tests share: a torch tensor's bytes, and a torch.Tensor subclass."""

import pytest

torch = pytest.importorskip("torch")


def torch_bytes(x):
    """The bytes of a C-contiguous torch tensor, whatever its dtype."""
    assert x.is_contiguous()
    return x.view(torch.uint8).numpy().tobytes() if x.numel() else b""


class TorchSubclass(torch.Tensor):
    """A subclass: dlinterop asks its is_neg/is_conj methods instead of reading the bits."""
