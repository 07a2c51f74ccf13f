"""One error root: every exception class agentcron defines is an AgentcronError; no assert
guards production code.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import agentcron
from agentcron.errors import AgentcronError, InvalidInputError

SRC = Path(agentcron.__file__).parent


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentcron."):
        if ".migrations." in info.name:
            continue
        names.append(info.name)
    return names


def test_every_error_class_of_the_package_is_an_agentcron_error() -> None:
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == name and issubclass(value, BaseException):
                found.append(value)
    assert len(found) >= 25  # the store, schedule, channel, tool, config ... errors
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, AgentcronError)
    ]
    assert strays == []


def test_input_errors_are_value_errors_too() -> None:
    assert issubclass(InvalidInputError, ValueError)  # callers catching ValueError still do


def test_no_assert_guards_production_code() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Assert):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_the_cli_reaches_the_domain_through_the_service_layer_not_the_server() -> None:
    """`cli/` imports nothing of `server/` but the module that starts it (`agentcron serve`)."""
    imported = []
    for path in (SRC / "cli").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "agentcron.server"
            ):
                imported.append(node.module)
            elif isinstance(node, ast.Import):
                imported += [a.name for a in node.names if a.name.startswith("agentcron.server")]
    assert sorted(set(imported)) == ["agentcron.server.serve"]


def test_no_concrete_store_class_outside_the_store_and_the_wiring() -> None:
    """Engine, lanes, journal, service and edges are typed against `store/interface.py`."""
    users = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        # app.py wires the store; facade.py holds the facade's parts split out of it.
        if relative.startswith("store/") or relative in ("app.py", "facade.py"):
            continue
        if "SqlStore" in path.read_text("utf-8"):
            users.append(relative)
    assert users == []
