"""dlinterop.testing: a DLPack conformance checker for any producer and consumer.

    python -m dlinterop check numpy torch jax          # a table on the terminal
    python -m dlinterop check numpy --json out.json    # and the results as JSON
    python -m dlinterop check mypkg.testing:framework  # a framework described by a callable

Each framework is checked as a **producer** (its arrays' ``__dlpack__`` and
``__dlpack_device__``, its C exchange table) and as a **consumer** (its ``from_dlpack``, fed
by producers built natively to order, well-formed and malformed), one named rule at a time,
against DLPack 1.3, its Python specification and the array API standard. A rule passes,
fails (with a one-line reason) or does not apply (n/a, with why). Rules run in a child
process, so a framework that crashes fails that rule, not the run.

From another project's tests::

    from dlinterop.testing import assert_conforms, check_consumer, check_producer
    assert_conforms(check_producer("numpy"), allow={"producer.default-legacy"})

A framework is a builtin name (see FRAMEWORKS), ``"module:callable"`` (the callable
returns a Framework; it runs in the child process too), or a Framework object (checked in
this process).
"""

if getattr(__import__("dlinterop"), "_borrowed_compiled_modules", False):
    # Run from a source checkout (dlinterop/__init__.py): the compiled _conformance is in
    # the installed copy's testing/.
    __path__ = __import__("pkgutil").extend_path(__path__, __name__)

from dlinterop.testing._frameworks import FRAMEWORKS, Framework, framework
from dlinterop.testing._model import ROLES, RULES, NotApplicable, Report, Result, Rule  # noqa: F401

# The rules register themselves (rule() and register(), beside their functions) as these
# modules are imported: producer rules first, then consumer rules, in the order they print.
from dlinterop.testing import _producer_rules, _producer_ownership_rules  # noqa: F401  # isort: skip
from dlinterop.testing import _table_rules, _consumer_rules  # noqa: F401  # isort: skip
from dlinterop.testing._cli import main
from dlinterop.testing._run import (  # noqa: F401  (_worker: the child process's entry point)
    _worker,
    assert_conforms,
    check,
    check_consumer,
    check_producer,
)

__all__ = [
    "Framework",
    "NotApplicable",
    "Report",
    "Result",
    "RULES",
    "FRAMEWORKS",
    "assert_conforms",
    "check",
    "check_consumer",
    "check_producer",
    "framework",
    "main",
]
