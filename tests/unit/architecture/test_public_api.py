"""The public surface: `agentcron.__all__` and `agentcron.interfaces.__all__` resolve, the seams
are the package root's names, `import agentcron` stays light, and every subpackage says whether
it is internal and where its public names are.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentcron
import agentcron.interfaces

SRC = Path(agentcron.__file__).resolve().parent
PUBLIC_MODULES = ("agentcron", "agentcron.interfaces", "agentcron.schedule", "agentcron.testing")
PUBLIC_PACKAGES = frozenset({"schedule"})  # subpackages public as a whole
# What `import agentcron` must not load: the names that need them are imported on first use.
OPTIONAL = ("httpx", "jwt", "fastapi", "pydantic_ai", "agentcron.interfaces")


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_name_of_a_public_module_resolves(name: str) -> None:
    module = importlib.import_module(name)
    names = list(module.__all__)
    assert len(names) == len(set(names)), "a name is listed twice"
    assert [n for n in names if not hasattr(module, n)] == []


def test_every_seam_is_a_name_of_the_package_root() -> None:
    root, seams = agentcron, agentcron.interfaces
    assert sorted(set(seams.__all__) - set(root.__all__)) == []
    assert [n for n in seams.__all__ if getattr(root, n) is not getattr(seams, n)] == []


def _root_tree() -> ast.Module:
    return ast.parse((SRC / "__init__.py").read_text("utf-8"))


def _type_checking_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return {
                alias.asname or alias.name
                for stmt in node.body
                if isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names
            }
    return set()


def _bound_at_import(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def test_every_root_name_is_imported_or_lazy_and_typed_either_way() -> None:
    tree = _root_tree()
    lazy = set(agentcron._LAZY)
    assert _type_checking_names(tree) == lazy  # type checkers see every lazy name
    assert sorted(set(agentcron.__all__) - _bound_at_import(tree) - lazy) == []
    assert sorted(lazy - set(agentcron.__all__)) == []
    for name, module in agentcron._LAZY.items():
        assert getattr(agentcron, name) is getattr(importlib.import_module(module), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = agentcron.NoSuchThing  # type: ignore[attr-defined]


def test_import_agentcron_loads_no_optional_library_until_a_name_needs_it() -> None:
    probe = (
        "import sys, agentcron\n"
        f"print(sorted(m for m in {OPTIONAL!r} if m in sys.modules))\n"
        "from agentcron import Channel\n"
        "print('httpx' in sys.modules, 'agentcron.interfaces' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=50,
        env={"PYTHONPATH": str(SRC.parent)},
    ).stdout.splitlines()
    assert out == ["[]", "True True"]


# -- the marking of internal subpackages -----------------------------------------------------


def _resolves(dotted: str) -> bool:
    try:
        importlib.import_module(dotted)
        return True
    except ModuleNotFoundError:
        pass
    module, _, attr = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), attr)
    except ModuleNotFoundError:
        return False


def marking_problems(package: str, doc: str | None) -> list[str]:
    """What is wrong with a subpackage's docstring as its marking: it starts with "Internal:"
    (or, for a package public as a whole, "Public:") and has a "Public names:" paragraph whose
    `agentcron...` references all resolve.
    """
    expected = "Public:" if package in PUBLIC_PACKAGES else "Internal:"
    if not doc or not doc.startswith(expected):
        return [f"{package}: the docstring does not start with {expected!r}"]
    _, found, names = doc.partition("Public names:")
    if not found:
        return [f"{package}: no 'Public names:' paragraph"]
    paragraph = names.split("\n\n")[0]
    refs = re.findall(r"`(agentcron(?:\.\w+)*)`", paragraph)
    return [f"{package}: `{ref}` does not resolve" for ref in refs if not _resolves(ref)]


def _subpackages() -> dict[str, str | None]:
    found = {}
    for init in sorted(SRC.rglob("__init__.py")):
        if init.parent == SRC:
            continue
        package = init.parent.relative_to(SRC).as_posix()
        found[package] = ast.get_docstring(ast.parse(init.read_text("utf-8")), clean=False)
    return found


def test_every_subpackage_says_it_is_internal_and_where_its_public_names_are() -> None:
    packages = _subpackages()
    assert {"agent", "channels", "store", "wake", "schedule"} <= set(packages)
    assert [p for package, doc in packages.items() for p in marking_problems(package, doc)] == []


@pytest.mark.parametrize(
    ("package", "doc", "problem"),
    [
        ("engine", None, "does not start with 'Internal:'"),
        ("engine", "The scheduling engine.", "does not start with 'Internal:'"),
        ("schedule", "Internal: pure math.\n\nPublic names: none.", "start with 'Public:'"),
        ("engine", "Internal: the engine.", "no 'Public names:'"),
        ("engine", "Internal: x.\n\nPublic names: `agentcron.NoSuchName`.", "does not resolve"),
    ],
)
def test_the_marking_check_finds_an_unmarked_or_wrong_package(
    package: str, doc: str | None, problem: str
) -> None:
    (found,) = marking_problems(package, doc)
    assert problem in found


def test_a_marking_that_points_at_real_names_passes() -> None:
    doc = "Internal: the engine.\n\nPublic names: `agentcron.Clock`, `agentcron.interfaces`.\n"
    assert marking_problems("engine", doc) == []
