"""`/mcp` on the app: who may call it and for which session (the HTTP refusals), and a call
that passes goes to the tools of the bound session. A real app on SQLite, through its lifespan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentcron.app import AgentCron
from agentcron.server import create_app
from agentcron.server.mcp import SESSION_HEADER
from agentcron.tokens import mcp_token

TOKEN = "api-token"
KEY = "api:mine"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    cron = AgentCron(db=tmp_path / "cron.db")

    async def start() -> None:
        await cron.start()
        await cron.sessions.create(KEY)

    app = create_app(cron, token=TOKEN, on_start=[start], on_stop=[cron.close])
    with TestClient(app) as test_client:
        yield test_client


def answer(client: TestClient, headers: dict[str, str], body: Any = LIST) -> tuple[int, Any]:
    response = client.post("/mcp", json=body, headers={**ACCEPT, **headers})
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line for line in text.splitlines() if line.startswith("data:"))[5:]
    return response.status_code, json.loads(text)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_without_a_token_or_with_a_wrong_one_it_is_401(client: TestClient) -> None:
    status, body = answer(client, {})
    assert (status, body["error"]) == (401, "unauthorized")
    status, body = answer(client, bearer("nope"))
    assert (status, body["error"]) == (401, "unauthorized")
    status, body = answer(client, bearer(mcp_token("another-api-token", KEY)))
    assert (status, body["error"]) == (401, "unauthorized")


def test_an_unknown_session_is_404_and_another_sessions_name_403(client: TestClient) -> None:
    status, body = answer(client, bearer(mcp_token(TOKEN, "api:nobody")))
    assert (status, body["error"]) == (404, "not_found")
    status, body = answer(client, {**bearer(TOKEN), SESSION_HEADER: "api:nobody"})
    assert (status, body["error"]) == (404, "not_found")
    status, body = answer(client, {**bearer(TOKEN), SESSION_HEADER: "not a key"})
    assert (status, body["error"]) == (404, "not_found")
    status, body = answer(client, {**bearer(mcp_token(TOKEN, KEY)), SESSION_HEADER: "api:x"})
    assert (status, body["error"]) == (403, "forbidden")
    status, body = answer(client, bearer(TOKEN))  # the API token names no session
    assert (status, body["error"]) == (400, "bad_request")


def test_a_bound_call_reaches_the_tools_of_its_session(client: TestClient) -> None:
    for headers in (bearer(mcp_token(TOKEN, KEY)), {**bearer(TOKEN), SESSION_HEADER: KEY}):
        status, body = answer(client, headers)
        assert status == 200, body
        assert {t["name"] for t in body["result"]["tools"]} == {
            "cron", "schedule_recall", "manage_recall",
        }  # fmt: skip
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "cron", "arguments": {"action": "list"}},
    }
    status, body = answer(client, bearer(mcp_token(TOKEN, KEY)), call)
    assert status == 200, body
    assert body["result"]["content"][0]["text"] == "No automations in this session."


def test_without_the_lifespan_it_is_503_not_a_crash(tmp_path: Path) -> None:
    cron = AgentCron(db=tmp_path / "cron.db")
    client = TestClient(create_app(cron, token=TOKEN))  # not entered: no lifespan
    status, body = answer(client, bearer(mcp_token(TOKEN, KEY)))
    assert (status, body["error"]) == (503, "unavailable")
