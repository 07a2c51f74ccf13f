"""Nothing in src/ writes the process environment, and only `config/env.py` reads it.

A configuration file's values reach the code through `agentcron.config.Settings`, never through
`os.environ`. Read from the source (AST), so an import alias or a call in any function counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "agentcron"
READER = Path("config") / "env.py"  # the one module that reads os.environ
_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def _is_environ(node: ast.AST, aliases: set[str]) -> bool:
    """`os.environ` (or `environ` imported from os under any alias)."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return isinstance(node.value, ast.Name) and node.value.id == "os"
    return isinstance(node, ast.Name) and node.id in aliases


def problems(source: str, where: str, *, may_read: bool = False) -> list[str]:
    """Every write of the environment in `source` (a module's text), and every read unless
    `may_read`: assignment, `del`, augmented assignment, a mutating method, `os.putenv` /
    `os.unsetenv`.
    """
    tree = ast.parse(source)
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for alias in node.names
        if alias.name == "environ"
    }
    found: list[tuple[int, str]] = []

    def say(node: ast.AST, what: str) -> None:
        found.append((getattr(node, "lineno", 0), f"{where}:{getattr(node, 'lineno', 0)}: {what}"))

    written: set[int] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            if isinstance(target, ast.Subscript) and _is_environ(target.value, aliases):
                say(node, "writes os.environ[...]")
                written.add(id(target.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if func.attr in _WRITES and _is_environ(func.value, aliases):
                say(node, f"calls os.environ.{func.attr}")
                written.add(id(func.value))
            is_os = isinstance(func.value, ast.Name) and func.value.id == "os"
            if func.attr in {"putenv", "unsetenv"} and is_os:
                say(node, f"calls os.{func.attr}")
    if not may_read:
        for node in ast.walk(tree):
            if _is_environ(node, aliases) and id(node) not in written:
                say(node, "reads os.environ outside config/env.py")
    return [text for _, text in sorted(found)]


def test_nothing_in_src_writes_the_environment_and_only_the_reader_reads_it() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        found += problems(path.read_text("utf-8"), str(relative), may_read=relative == READER)
    assert found == []


def test_the_check_finds_each_kind_of_write_and_a_stray_read() -> None:
    source = """
import os
from os import environ as env

os.environ["A"] = "1"
os.environ["B"] += "2"
del os.environ["C"]
os.environ.update({"D": "4"})
os.environ.setdefault("E", "5")
os.environ.pop("F", None)
env["G"] = "7"
os.putenv("H", "8")
value = os.environ.get("I")
"""
    assert problems(source, "m.py") == [
        "m.py:5: writes os.environ[...]",
        "m.py:6: writes os.environ[...]",
        "m.py:7: writes os.environ[...]",
        "m.py:8: calls os.environ.update",
        "m.py:9: calls os.environ.setdefault",
        "m.py:10: calls os.environ.pop",
        "m.py:11: writes os.environ[...]",
        "m.py:12: calls os.putenv",
        "m.py:13: reads os.environ outside config/env.py",
    ]
    reader = 'import os\nvalue = os.environ.get("I")\n'
    assert problems(reader, "config/env.py", may_read=True) == []
    assert problems('import os\nos.environ["A"] = "1"\n', "config/env.py", may_read=True) == [
        "config/env.py:2: writes os.environ[...]"
    ]
