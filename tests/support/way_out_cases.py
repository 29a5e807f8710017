"""What the tests of the way out share: PyTorch where it is installed, and the live buffers."""

import gc

import pytest

import dlinterop as dl

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def live_buffers():
    gc.collect()
    return dl.memory_stats()["live_buffers"]
