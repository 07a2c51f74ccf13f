"""The unit tier mirrors the modules: tests/unit/<package>/test_<module>.py tests
src/agentcron/<package>/<module>.py (top-level modules: tests/unit/test_<module>.py).

Three folders are not packages of src/: `architecture/` holds the rules over the whole source
(layers, asserts, store classes, edges, dead code, this one), `helpers/` tests the suite's own
helpers (tests/helpers/<module>.py) and `bench/` the benchmarks' code (bench/<module>.py). Every folder that holds tests is a package (`__init__.py`), so two
files of one name in two folders never clash.
"""

from __future__ import annotations

from pathlib import Path

UNIT = Path(__file__).resolve().parents[1]
TESTS = UNIT.parent
SRC = TESTS.parent / "src" / "agentcron"

WHOLE_SOURCE = "architecture"
SUITE_HELPERS = "helpers"
BENCH = "bench"


def mirror_offenders(unit: Path, src: Path, helpers: Path, bench: Path | None = None) -> list[str]:
    """Each test file under `unit` that names no module, and each test folder without an
    `__init__.py`, as one line.
    """
    offenders = []
    tests = sorted(unit.rglob("test_*.py"))
    for test in tests:
        relative = test.relative_to(unit)
        folders = relative.parts[:-1]
        if folders[:1] == (WHOLE_SOURCE,):
            continue
        root = src
        if folders[:1] == (SUITE_HELPERS,):
            root, folders = helpers, folders[1:]
        elif folders[:1] == (BENCH,) and bench is not None:
            root, folders = bench, folders[1:]
        module = root.joinpath(*folders, test.name.removeprefix("test_"))
        if not module.is_file():
            offenders.append(f"{relative.as_posix()}: no module {module.relative_to(root.parent)}")
    for folder in sorted({t.parent for t in tests}):
        if not (folder / "__init__.py").is_file():
            offenders.append(f"{folder.relative_to(unit).as_posix()}/: no __init__.py")
    return offenders


def test_every_unit_test_file_names_the_module_it_tests() -> None:
    assert len(list(UNIT.rglob("test_*.py"))) > 30  # the check walked the real tree
    assert mirror_offenders(UNIT, SRC, TESTS / "helpers", TESTS.parent / "bench") == []


def test_the_mirror_check_finds_a_file_that_names_no_module(tmp_path: Path) -> None:
    src, helpers, unit = tmp_path / "src" / "agentcron", tmp_path / "helpers", tmp_path / "unit"
    for path in (
        src / "top.py",
        src / "pkg" / "mod.py",
        src / "pkg" / "sub" / "deep.py",
        helpers / "postgres.py",
        unit / "__init__.py",
        unit / "test_top.py",  # mirrors src/agentcron/top.py
        unit / "test_gone.py",  # no top-level module gone.py
        unit / "pkg" / "__init__.py",
        unit / "pkg" / "test_mod.py",
        unit / "pkg" / "test_renamed.py",  # the module was renamed, its test was not
        unit / "pkg" / "sub" / "test_deep.py",  # a folder without __init__.py
        unit / "pkg" / "conftest.py",  # not a test file
        unit / "other" / "__init__.py",
        unit / "other" / "test_mod.py",  # pkg/mod.py, filed under the wrong package
        unit / "architecture" / "__init__.py",
        unit / "architecture" / "test_any_rule.py",
        unit / "helpers" / "__init__.py",
        unit / "helpers" / "test_postgres.py",  # mirrors helpers/postgres.py
        unit / "helpers" / "test_ws.py",  # no helpers/ws.py
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    assert mirror_offenders(unit, src, helpers) == [
        "helpers/test_ws.py: no module helpers/ws.py",
        "other/test_mod.py: no module agentcron/other/mod.py",
        "pkg/test_renamed.py: no module agentcron/pkg/renamed.py",
        "test_gone.py: no module agentcron/gone.py",
        "pkg/sub/: no __init__.py",
    ]
