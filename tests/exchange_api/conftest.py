"""The C consumer of the exchange table, compiled once per session."""

import importlib.util
import sysconfig

import pytest

from c_build import compile_c


@pytest.fixture(scope="session")
def c_consumer(tmp_path_factory):
    """tests/support/c_exchange_consumer.c, compiled against Python's and dlinterop's headers."""
    build = tmp_path_factory.mktemp("c_exchange_consumer")
    target = build / ("c_exchange_consumer" + sysconfig.get_config_var("EXT_SUFFIX"))
    compile_c("c_exchange_consumer.c", target, python_headers=True)
    spec = importlib.util.spec_from_file_location("c_exchange_consumer", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
