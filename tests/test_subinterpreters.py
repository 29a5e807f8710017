"""dlinterop in a subinterpreter: its compiled modules keep per-process state, so it refuses
to load there, with ImportError and before any compiled module is loaded, and the main
interpreter can import it before or after. Each order runs in a fresh process (a
subinterpreter that loaded the compiled modules first used to leave the main interpreter
unable to import them for the rest of the process: "Interpreter change detected")."""

import subprocess
import sys
import textwrap

import pytest

_testcapi = pytest.importorskip("_testcapi")
if not hasattr(_testcapi, "run_in_subinterp"):
    pytest.skip("this CPython has no _testcapi.run_in_subinterp", allow_module_level=True)

SUBINTERPRETER = """
import sys
try:
    import dlinterop
    sys.stdout.write("sub: imported\\n")
except ImportError as e:
    loaded = sorted(m for m in sys.modules if m.startswith("dlinterop."))
    sys.stdout.write(f"sub: ImportError {e} {loaded}\\n")
"""


def run(order):
    code = textwrap.dedent(f"""
        import _testcapi
        sub = {SUBINTERPRETER!r}
        if {order == "main first"}:
            import dlinterop as dl
            print("main:", dl.zeros(2).shape)
        _testcapi.run_in_subinterp(sub)
        import dlinterop as dl
        print("main:", dl.zeros(2).shape, dl.from_dlpack(dl.zeros(3)).shape)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("order", ["subinterpreter first", "main first"])
def test_subinterpreter_is_refused_and_main_interpreter_imports(order):
    lines = run(order)
    sub = [line for line in lines if line.startswith("sub:")]
    assert len(sub) == 1
    assert sub[0].startswith("sub: ImportError dlinterop cannot be imported in a subinterpreter")
    assert sub[0].endswith("[]")  # refused before any compiled module was loaded
    assert lines[-1] == "main: (2,) (3,)"
