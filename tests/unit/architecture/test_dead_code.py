"""No dead code in src/agentcron: vulture finds every function, method, class, attribute and
variable nothing in the package uses. What frameworks call by themselves (routes, CLI
commands, validators, SQLAlchemy hooks) is known by its decorator; the rest that is used
from outside the package is named below with its reason. Code used only by tests belongs in
tests/ (tests/helpers), not here.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import vulture
from pydantic import BaseModel
from typing_extensions import is_typeddict

import agentcron

SRC = Path(agentcron.__file__).parent

# Called by the frameworks, never by our code.
FRAMEWORK_DECORATORS = [
    "@*.get",  # FastAPI routes
    "@*.post",
    "@*.put",
    "@*.patch",
    "@*.delete",
    "@*.api_route",
    "@*.websocket",
    "@*.command",  # typer commands and the root callback
    "@*.callback",
    "@field_validator",  # pydantic
    "@model_validator",
    "@event.listens_for",  # SQLAlchemy connection and transaction hooks
]

# Used from outside the package, or by a protocol or a framework by name.
USED_FROM_OUTSIDE = {
    "main": "the `agentcron` console script (pyproject [project.scripts])",
    "impl": "SQLAlchemy TypeDecorator (store/schema.py)",
    "cache_ok": "SQLAlchemy TypeDecorator",
    "process_bind_param": "SQLAlchemy TypeDecorator",
    "isolation_level": "set on the sqlite3 connection (store/database.py)",
    "log_file": "set on FastMCP's StdioTransport, which reads it (agent/tool_sources.py)",
    "connect_unix_socket": "httpcore's AsyncNetworkBackend interface (relay/callbacks.py)",
    "_pool": "httpx.AsyncHTTPTransport's pool, replaced by a guarded one (relay/callbacks.py)",
    "exc_type": "AgentCron.__aexit__'s arguments",
    "tb": "AgentCron.__aexit__'s arguments",
    "ALL": "Catchup.ALL: a value the API and the job model accept",
    "scheduled_by": "Trigger.scheduled_by: a field the user's runner reads",
    "advance": "FakeClock.advance: agentcron.testing's API for the user's tests",
    "counter_reads": "SignalHub.counter_reads: what an idle process costs, read by "
    "tests/integration/test_signals.py",
    "ensure": "cron.system.ensure: the library's API for system jobs (README)",
    "__getattr__": "agentcron's module hook (PEP 562): public names loaded on first use",
    "__dir__": "agentcron's module hook (PEP 562): dir() lists the lazily loaded names",
    "resolve_wake": "agentcron.interfaces re-exports wake.provider.resolve under this name",
    "__call__": "channels.manager.Inbound: the protocol of the callable a channel is given",
    "_Webhook__verify_timestamp": "standardwebhooks' Webhook.verify calls it by its mangled "
    "name (service/triggers.py answers the timestamp checked against the injected clock)",
    "timestamp_header": "the argument of that method, as the library passes it",
}


def _is_model_field(item: vulture.core.Item, root: Path) -> bool:
    """A field of a pydantic model: pydantic reads it (validation, the JSON and the schema)."""
    if item.typ != "variable":
        return False
    path = Path(item.filename)
    tree = ast.parse(path.read_text("utf-8"))
    owner = next(
        (
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef)
            and node.lineno <= item.first_lineno <= (node.end_lineno or node.lineno)
        ),
        None,
    )
    if owner is None:
        return False
    name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
    found = getattr(importlib.import_module(name), owner, None)
    return isinstance(found, type) and (issubclass(found, BaseModel) or is_typeddict(found))


def _shown_by_a_view(item: vulture.core.Item, root: Path) -> bool:
    """A field of a domain record that a view of the API shows: `View.of` reads the record's
    attribute of the field's name (agentcron/views.py), which vulture cannot see.
    """
    if item.typ != "variable" or root != SRC:
        return False
    if Path(item.filename).relative_to(root).parts[0] != "domain":
        return False
    from agentcron import views

    return any(
        item.name in view.model_fields
        for view in vars(views).values()
        if isinstance(view, type) and issubclass(view, views.View)
    )


def unused_code(package: Path) -> list[str]:
    """What vulture finds unused in `package` (importable from its parent folder)."""
    finder = vulture.Vulture(
        ignore_names=sorted(USED_FROM_OUTSIDE), ignore_decorators=FRAMEWORK_DECORATORS
    )
    finder.scavenge([str(package)], exclude=["*/migrations/*"])
    return [
        f"{Path(item.filename).relative_to(package.parent)}:{item.first_lineno}: {item.message}"
        for item in finder.get_unused_code(min_confidence=60)
        if not _is_model_field(item, package) and not _shown_by_a_view(item, package)
    ]


def test_nothing_in_the_package_is_unused() -> None:
    found = unused_code(SRC)
    assert found == [], "remove it, or say above who uses it:\n" + "\n".join(found)


def test_the_dead_code_check_sees_dead_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "sample_dead_code"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(
        "from fastapi import APIRouter\n"
        "from pydantic import BaseModel\n"
        "router = APIRouter()\n"
        "\n"
        "def used() -> int:\n"
        "    return 1\n"
        "\n"
        "def dead() -> int:\n"
        "    return used()\n"
        "\n"
        "@router.get('/x')\n"
        "def route() -> int:\n"
        "    return 2\n"
        "\n"
        "class Clock:\n"
        "    def advance(self) -> None: ...\n"
        "    def never_called(self) -> None: ...\n"
        "\n"
        "class Answer(BaseModel):\n"
        "    unread: int\n"
        "\n"
        "class Plain:\n"
        "    unread: int\n"
        "\n"
        "if __name__ == '__main__':\n"
        "    print(Clock(), Answer, Plain)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert unused_code(package) == [
        "sample_dead_code/mod.py:8: unused function 'dead'",
        "sample_dead_code/mod.py:17: unused method 'never_called'",
        "sample_dead_code/mod.py:23: unused variable 'unread'",  # not a model's field
    ]
