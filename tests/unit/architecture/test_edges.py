"""The edges (the HTTP server, the channels, the CLI, the relay's server, the demo) call the
services and the bus only: none reaches the store (`cron.store...`, or an import of
`agentcron.store` beyond its errors), except the wiring listed here, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentcron

SRC = Path(agentcron.__file__).parent

# Not edges: the relay's use cases (its own service layer: an arm is a job it keeps through
# the `RelayArmLedger`).
NOT_EDGES = {"relay/service.py"}

# Every edge may import the store's typed errors (the edges map them to answers).
ERRORS = "agentcron.store.errors"

# (edge module, or a folder ending in "/") -> store modules it may import, and why.
ALLOWED_IMPORTS: dict[tuple[str, str], str] = {
    ("channels/", "agentcron.store.interface"): "the outbox is typed against `DeliveryLedger`",
    ("server/relay_events.py", "agentcron.store.signals"): "the hub's relay publishes on the "
    "signal seam (`Topic.EVENTS`)",
    ("server/serve.py", "agentcron.store.signals"): "wiring: a job changed in another process "
    "moves its arm (`Topic.JOBS`)",
    ("server/serve.py", "agentcron.store.ids"): "`new_id` names a demo session (no database)",
    ("demo.py", "agentcron.store.ids"): "`new_id` names the demo's session (no database)",
    ("cli/db_cmds.py", "agentcron.store.sql"): "`agentcron db upgrade` migrates the database "
    "itself, no AgentCron involved",
}

# (edge module, the whole attribute chain through `.store`) -> why it is wiring, not logic.
ALLOWED_STORE_USES: dict[tuple[str, str], str] = {
    ("server/asgi.py", "cron.store.signals.dialect"): "create_app relays the WebSocket hub "
    "across replicas on PostgreSQL only",
    ("server/asgi.py", "cron.store.signals"): "create_app hands the hub's relay the signal seam",
    ("server/serve.py", "cron.store"): "serve wires the wake provider to the job catalog and "
    "the run records",
    ("server/serve.py", "cron.store.signals.subscribe"): "serve moves a job's arm when another "
    "process changed the job",
    ("channels/manager.py", "self.cron.store.deliveries"): "start binds each channel's outbox "
    "to the delivery ledger",
    ("demo.py", "cron.store.url"): "the demo prints where its database is (a value, no call)",
    ("cli/backends.py", "cron.store.open"): "the database backend opens the store without "
    "starting the engine (no fires, no turns)",
    ("cli/backends.py", "cron.store.close"): "... and closes it",
    ("cli/backends.py", "self._opened.store.close"): "... and closes it",
}


def _allowed(table: dict[tuple[str, str], str], module: str, what: str) -> bool:
    return any(
        thing == what and (module == place or (place.endswith("/") and module.startswith(place)))
        for place, thing in table
    )


def store_reaches(module: str, source: str) -> list[str]:
    """Where `module` (a path under src/agentcron) reaches the store outside the lists above:
    an import of a store module other than its errors, or an attribute chain through a
    `.store` (only the AgentCron object has one at the edges).
    """
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        imported: list[str] = []
        if isinstance(node, ast.Import):
            imported = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "agentcron":
            imported = [f"agentcron.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported = [node.module]
        for name in imported:
            if name != "agentcron.store" and not name.startswith("agentcron.store."):
                continue
            if name != ERRORS and not _allowed(ALLOWED_IMPORTS, module, name):
                found.append((node.lineno, f"imports {name}"))
        if isinstance(node, ast.Attribute) and node.attr == "store":
            top: ast.expr = node
            while isinstance(up := parents.get(top), ast.Attribute) and up.value is top:
                top = up
            chain = ast.unparse(top)
            if not _allowed(ALLOWED_STORE_USES, module, chain):
                found.append((node.lineno, chain))
    return [f"{module}:{line}: {what}" for line, what in sorted(found)]


def _edges() -> dict[str, str]:
    paths = [SRC / "demo.py"]
    for folder in ("server", "channels", "cli", "relay"):
        paths += sorted((SRC / folder).rglob("*.py"))
    modules = {p.relative_to(SRC).as_posix(): p.read_text("utf-8") for p in paths}
    return {m: text for m, text in modules.items() if m not in NOT_EDGES}


def test_the_edges_reach_the_store_only_through_the_listed_wiring() -> None:
    edges = _edges()
    assert len(edges) >= 30  # the folders are where this test thinks they are
    found = [line for module, text in edges.items() for line in store_reaches(module, text)]
    assert found == [], "route these through a service (agentcron/service/):\n" + "\n".join(found)


def test_the_edge_check_sees_a_store_reached() -> None:
    sample = """
from agentcron import store
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.sql import SqlStore
import agentcron.store.session_store


async def inbound(cron, now):
    await cron.store.sessions.ensure_session("web:1", now)
    signals = cron.store.signals
    return await cron.sessions.send("web:1", "hi")
"""
    assert store_reaches("channels/manager.py", sample) == [
        "channels/manager.py:2: imports agentcron.store",
        "channels/manager.py:4: imports agentcron.store.sql",
        "channels/manager.py:5: imports agentcron.store.session_store",
        "channels/manager.py:9: cron.store.sessions.ensure_session",
        "channels/manager.py:10: cron.store.signals",  # allowed in server/asgi.py, not here
    ]
    # the wiring listed for a module passes there, and only there
    assert store_reaches("server/asgi.py", "hub.relay_through(cron.store.signals)\n") == []
    assert store_reaches("server/routes/health.py", "import agentcron.store.interface\n") == [
        "server/routes/health.py:1: imports agentcron.store.interface"
    ]
