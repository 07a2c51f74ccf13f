"""Rules over the source as a whole: no assert guards production code, the CLI reaches the
domain through the services, only the store and the wiring name a concrete store class.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import agentcron

SRC = Path(agentcron.__file__).parent


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


def _is_store_class(obj: object) -> bool:
    """A class of `store/` that talks to the database (it has coroutine methods), not a
    Protocol of `store/interface.py`, a record, an enum or an error.
    """
    if not inspect.isclass(obj) or not obj.__module__.startswith("agentcron.store."):
        return False
    if obj.__module__ == "agentcron.store.interface":
        return False
    return any(inspect.iscoroutinefunction(getattr(obj, name, None)) for name in dir(obj))


def test_no_concrete_store_class_outside_the_store_and_the_wiring() -> None:
    """Engine, lanes, services, channels and edges are typed against `store/interface.py`:
    no module outside `store/` and `app.py` (the wiring) imports a concrete store class.
    """
    users = []
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("store/") or relative == "app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if module is None or not module.startswith("agentcron.store."):
                continue
            imported = importlib.import_module(module)
            for alias in node.names:
                if _is_store_class(getattr(imported, alias.name, None)):
                    users.append(f"{relative}: {alias.name}")
    assert users == []


def test_the_store_class_check_sees_a_store_class() -> None:
    from agentcron.domain.deliveries import Delivery
    from agentcron.store.delivery_store import DeliveryStore
    from agentcron.store.interface import Transcripts
    from agentcron.store.sql import SqlStore

    assert _is_store_class(SqlStore)
    assert _is_store_class(DeliveryStore)
    assert not _is_store_class(Delivery)
    assert not _is_store_class(Transcripts)
