"""What the PyTorch interop tests share: a tensor's bytes on each side, and a torch.Tensor
subclass."""

import pickle

import pytest

torch = pytest.importorskip("torch")


def tensor_bytes(t):
    """The bytes of a dl.Tensor in C order, through its pickle buffer: works for every
    dtype, including those NumPy and the buffer protocol cannot express."""
    buffers = []
    pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    with buffers[0].raw() as raw:
        return raw.tobytes()


def torch_bytes(x):
    """The bytes of a C-contiguous torch tensor, whatever its dtype."""
    assert x.is_contiguous()
    return x.view(torch.uint8).numpy().tobytes() if x.numel() else b""


class TorchSubclass(torch.Tensor):
    """A subclass: dlinterop asks its is_neg/is_conj methods instead of reading the bits."""
