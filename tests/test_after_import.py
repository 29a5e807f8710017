"""dlinterop._integrations.after_import: a function run once a module has run, without
importing it (how dlinterop plugs into multiprocessing's pickler and Dask's serializers)."""

import _thread
import importlib
import subprocess
import sys
import textwrap

import pytest

from dlinterop._integrations import after_import as _after_import


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    registers = {name: list(waiting) for name, waiting in _after_import._registers.items()}
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("dl_after_")]:
        del sys.modules[name]
    _after_import._registers.clear()
    _after_import._registers.update(registers)


def _finders():
    return [f for f in sys.meta_path if isinstance(f, _after_import._Finder)]


def test_runs_after_the_module_runs_and_only_then(module_dir):
    (module_dir / "dl_after_a.py").write_text("value = 41\n")
    seen = []
    _after_import.when_imported("dl_after_a", lambda m: seen.append(m.value + 1))
    assert seen == [] and "dl_after_a" not in sys.modules  # nothing imported by waiting
    import dl_after_a  # noqa: F401

    assert seen == [42]


def test_runs_at_once_for_a_module_imported_already(module_dir):
    (module_dir / "dl_after_b.py").write_text("value = 1\n")
    import dl_after_b  # noqa: F401

    seen = []
    _after_import.when_imported("dl_after_b", lambda m: seen.append(m.value))
    assert seen == [1]


def test_several_waits_for_several_modules_share_one_finder(module_dir):
    (module_dir / "dl_after_c.py").write_text("")
    (module_dir / "dl_after_d.py").write_text("")
    seen = []
    _after_import.when_imported("dl_after_c", lambda m: seen.append("c1"))
    _after_import.when_imported("dl_after_d", lambda m: seen.append("d"))
    _after_import.when_imported("dl_after_c", lambda m: seen.append("c2"))
    assert len(_finders()) == 1
    import dl_after_d  # noqa: F401

    assert seen == ["d"]
    import dl_after_c  # noqa: F401

    assert seen == ["d", "c1", "c2"] and len(_finders()) == 1


def test_a_module_that_does_not_exist_stays_an_import_error(module_dir):
    seen = []
    _after_import.when_imported("dl_after_missing", seen.append)
    with pytest.raises(ModuleNotFoundError):
        import dl_after_missing  # noqa: F401
    (module_dir / "dl_after_missing.py").write_text("value = 2\n")
    importlib.invalidate_caches()
    import dl_after_missing  # noqa: F401,F811

    assert [m.value for m in seen] == [2]  # still waiting after the failed import


def test_a_failed_import_keeps_the_register_for_the_next(module_dir):
    (module_dir / "dl_after_flaky.py").write_text(
        textwrap.dedent("""
        import sys
        tries = sys.modules.setdefault("dl_after_tries", [])
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("first import fails")
        value = 3
        """)
    )
    seen = []
    _after_import.when_imported("dl_after_flaky", seen.append)
    with pytest.raises(RuntimeError, match="first import fails"):
        import dl_after_flaky  # noqa: F401
    assert seen == []
    import dl_after_flaky  # noqa: F401,F811

    assert [m.value for m in seen] == [3]


def test_a_reload_runs_the_register_again(module_dir):
    # A reload makes the module's classes anew: a register made with the old ones is gone.
    (module_dir / "dl_after_e.py").write_text("class Pickler:\n    table = {}\n")

    def register(m):
        m.Pickler.table["tensor"] = True

    _after_import.when_imported("dl_after_e", register)
    import dl_after_e

    old = dl_after_e.Pickler
    importlib.reload(dl_after_e)
    assert dl_after_e.Pickler is not old and dl_after_e.Pickler.table == {"tensor": True}


def test_a_reload_of_a_module_imported_before_runs_the_register_again(module_dir):
    (module_dir / "dl_after_f.py").write_text("class Pickler:\n    table = {}\n")
    import dl_after_f

    def register(m):
        m.Pickler.table["tensor"] = True

    _after_import.when_imported("dl_after_f", register)
    importlib.reload(dl_after_f)
    assert dl_after_f.Pickler.table == {"tensor": True}


def test_a_forgotten_register_no_longer_runs(module_dir):
    (module_dir / "dl_after_g.py").write_text("value = 7\n")
    seen = []

    def kept(m):
        seen.append(("kept", m.value))

    def forgotten(m):
        seen.append(("forgotten", m.value))

    _after_import.when_imported("dl_after_g", kept)
    _after_import.when_imported("dl_after_g", forgotten)
    _after_import.forget("dl_after_g", forgotten)
    _after_import.forget("dl_after_g", lambda m: None)  # never registered: nothing happens
    import dl_after_g

    importlib.reload(dl_after_g)
    assert seen == [("kept", 7), ("kept", 7)]
    _after_import.forget("dl_after_g", kept)
    assert "dl_after_g" not in _after_import._registers


def test_waits_for_a_module_another_thread_is_still_running(module_dir):
    # The module is in sys.modules, half run, while the other thread's import runs it: it
    # finishes only once this thread has started waiting for it.
    (module_dir / "dl_after_slow.py").write_text(
        textwrap.dedent("""
        import sys, time
        sys.modules["dl_after_gate"].release()
        from dlinterop._integrations import after_import as _after_import
        deadline = time.monotonic() + 30
        while "dl_after_slow" not in _after_import._registers and time.monotonic() < deadline:
            time.sleep(0.001)
        value = 4
        """)
    )
    gate = _thread.allocate_lock()
    gate.acquire()
    sys.modules["dl_after_gate"] = gate
    imported = _thread.allocate_lock()
    imported.acquire()

    def import_slowly():
        try:
            import dl_after_slow  # noqa: F401
        finally:
            imported.release()

    _thread.start_new_thread(import_slowly, ())
    gate.acquire()  # dl_after_slow is in sys.modules, running
    seen = []
    _after_import.when_imported("dl_after_slow", lambda m: seen.append(m.value))
    imported.acquire()
    assert seen == [4]


def test_waits_for_a_module_this_thread_is_running(module_dir):
    # A circular import: the module, running, makes its own importer wait for it.
    (module_dir / "dl_after_circular.py").write_text(
        textwrap.dedent("""
        import sys
        from dlinterop._integrations import after_import as _after_import
        seen = sys.modules["dl_after_seen"]
        _after_import.when_imported(__name__, lambda m: seen.append(m.value))
        value = 5
        """)
    )
    seen = sys.modules["dl_after_seen"] = []
    import dl_after_circular

    assert seen == [5]
    assert type(dl_after_circular.__spec__) is importlib.machinery.ModuleSpec


def test_a_failed_circular_import_keeps_the_register_for_the_next(module_dir):
    (module_dir / "dl_after_circular_flaky.py").write_text(
        textwrap.dedent("""
        import sys
        from dlinterop._integrations import after_import as _after_import
        if "dl_after_registered" not in sys.modules:
            sys.modules["dl_after_registered"] = sys
            seen = sys.modules["dl_after_seen"]
            _after_import.when_imported(__name__, lambda m: seen.append(m.value))
            raise RuntimeError("first import fails")
        value = 6
        """)
    )
    seen = sys.modules["dl_after_seen"] = []
    with pytest.raises(RuntimeError, match="first import fails"):
        import dl_after_circular_flaky  # noqa: F401
    assert seen == []
    import dl_after_circular_flaky  # noqa: F401,F811

    assert seen == [6]


_RACE = textwrap.dedent("""
    import _thread, sys
    # An editable install's finder rebuilds at the first import of a compiled module,
    # importing subprocess while it holds the global import lock: deadlocked with a thread
    # that imports threading meanwhile. Imported first, so that only dlinterop races.
    import subprocess
    imported = _thread.allocate_lock()
    imported.acquire()
    def import_multiprocessing():
        try:
            import multiprocessing.reduction
        finally:
            imported.release()
    _thread.start_new_thread(import_multiprocessing, ())
    import dlinterop
    imported.acquire()
    from multiprocessing import reduction
    assert dlinterop.Tensor in reduction.ForkingPickler._extra_reducers
    """)


@pytest.mark.parametrize("run", range(6))
def test_import_dlinterop_while_another_thread_imports_multiprocessing(run):
    # Before when_imported took the module's import lock, 7 runs of 20 raised AttributeError:
    # dlinterop registered its reducer with a half-run multiprocessing.reduction.
    result = subprocess.run(
        [sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_a_reload_of_multiprocessing_reduction_keeps_the_reducer():
    code = textwrap.dedent("""
        import importlib
        import dlinterop
        from multiprocessing import reduction
        importlib.reload(reduction)
        assert dlinterop.Tensor in reduction.ForkingPickler._extra_reducers
        """)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
