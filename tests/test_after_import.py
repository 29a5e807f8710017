"""dlinterop._after_import: a function run when a module is first imported, without
importing it (how dlinterop plugs into multiprocessing's pickler and Dask's serializers)."""
import sys

import pytest

from dlinterop import _after_import


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("dl_after_")]:
        del sys.modules[name]


def _finders():
    return [f for f in sys.meta_path if isinstance(f, _after_import._Finder)]


def test_runs_after_the_module_runs_and_only_then(module_dir):
    (module_dir / "dl_after_a.py").write_text("value = 41\n")
    seen = []
    _after_import.when_imported("dl_after_a", lambda m: seen.append(m.value + 1))
    assert seen == [] and "dl_after_a" not in sys.modules    # nothing imported by waiting
    import dl_after_a  # noqa: F401
    assert seen == [42]
    assert "dl_after_a" not in _after_import._waiting         # nothing left waiting
    import importlib
    importlib.reload(sys.modules["dl_after_a"])
    assert seen == [42]                                       # once


def test_runs_at_once_for_a_module_imported_already(module_dir):
    (module_dir / "dl_after_b.py").write_text("value = 1\n")
    import dl_after_b  # noqa: F401
    seen = []
    _after_import.when_imported("dl_after_b", lambda m: seen.append(m.value))
    assert seen == [1] and "dl_after_b" not in _after_import._waiting


def test_several_waits_for_several_modules(module_dir):
    (module_dir / "dl_after_c.py").write_text("")
    (module_dir / "dl_after_d.py").write_text("")
    seen = []
    _after_import.when_imported("dl_after_c", lambda m: seen.append("c1"))
    _after_import.when_imported("dl_after_d", lambda m: seen.append("d"))
    _after_import.when_imported("dl_after_c", lambda m: seen.append("c2"))
    assert len(_finders()) == 1
    import dl_after_d  # noqa: F401
    assert seen == ["d"] and len(_finders()) == 1
    import dl_after_c  # noqa: F401
    assert seen == ["d", "c1", "c2"]
    assert not {"dl_after_c", "dl_after_d"} & set(_after_import._waiting)
    assert len(_finders()) == (1 if _after_import._waiting else 0)


def test_a_module_that_does_not_exist_stays_an_import_error(module_dir):
    _after_import.when_imported("dl_after_missing", lambda m: None)
    with pytest.raises(ModuleNotFoundError):
        import dl_after_missing  # noqa: F401
    assert "dl_after_missing" not in _after_import._waiting
