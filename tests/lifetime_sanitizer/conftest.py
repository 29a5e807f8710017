"""tests/support/c_pointer_keeper.c, compiled once per session into a plain shared
library (no Python headers) that the sanitizer tests load with ctypes."""

import pytest

from c_build import compile_c


@pytest.fixture(scope="session")
def pointer_keeper(tmp_path_factory):
    """The path of the compiled C consumer."""
    target = tmp_path_factory.mktemp("c_pointer_keeper") / "c_pointer_keeper.so"
    return compile_c("c_pointer_keeper.c", target)
