"""agentcron as an MCP server, driven by the official `mcp` client against real processes.

Streamable HTTP at `/mcp` of a real `agentcron serve` (a session's MCP token, or the API token
naming the session), and stdio through `agentcron mcp --session KEY` started by the client's
stdio transport: list the tools, add an automation by a `when` phrase, list it, schedule a
recall, cancel it; a missing or wrong token and an unknown session are refused; a job added
over MCP fires as a turn of its session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.integration.test_serve_stop import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

KEY = "api:mcp-test"
TOOLS = {"cron", "schedule_recall", "manage_recall"}
AGENTCRON = Path(sys.executable).with_name("agentcron")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    env["AGENTCRON_HOME"] = str(home)
    return env


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path, wps="10000")
    try:
        created = server.client.post("/api/sessions", json={"key": KEY, "tz": "Europe/Berlin"})
        assert created.status_code == 201, created.text
        yield server
    finally:
        server.close()


def mcp_token(home: Path, key: str) -> str:
    """`agentcron token --mcp --session KEY`, as a person runs it."""
    done = subprocess.run(
        [str(AGENTCRON), "token", "--mcp", "--session", key],
        env=_env(home), capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@asynccontextmanager
async def http_client(serve: Serve, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{serve.base}/mcp", http_client=http)) as client,
    ):
        yield client


def text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def wait_for(check: Any, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the condition did not hold in time")


async def schedule_and_cancel(client: Client) -> str:
    """The tools' round trip every transport must pass; the new automation's id."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOLS
    cron = next(tool for tool in listed.tools if tool.name == "cron")
    assert "when" in cron.input_schema["properties"]  # the agent's own schema
    added = await client.call_tool(
        "cron",
        {"action": "add", "name": "standup", "when": "every weekday at 9", "message": "plan"},
    )
    assert not added.is_error, text(added)
    assert "Scheduled “standup”" in text(added)
    assert "(Europe/Berlin)" in text(added)  # read in the session's zone, on the server
    job_id = text(added).split("(id ", 1)[1].split(")", 1)[0]
    listing = await client.call_tool("cron", {"action": "list"})
    assert "standup" in text(listing)
    assert job_id in text(listing)
    # The guard rails are the agent's: too frequent is refused, as text marked an error.
    often = await client.call_tool(
        "cron", {"action": "add", "name": "spam", "when": "every 1m", "message": "x"}
    )
    assert often.is_error
    assert "at most every" in text(often)
    recall = await client.call_tool(
        "schedule_recall",
        {"call_type": "once", "when": "in 2 hours", "additional_context_message": "check"},
    )
    assert not recall.is_error, text(recall)
    assert "Recall scheduled" in text(recall)
    pending = await client.call_tool("manage_recall", {"action": "list"})
    assert "pending" in text(pending)
    cancelled = await client.call_tool("manage_recall", {"action": "cancel"})
    assert "Cancelled the recall" in text(cancelled), text(cancelled)
    gone = await client.call_tool("manage_recall", {"action": "cancel"})
    assert gone.is_error
    return job_id


async def test_http_session_token_schedules_in_its_session_and_the_fire_is_its_turn(
    serve: Serve, tmp_path: Path
) -> None:
    token = mcp_token(tmp_path, KEY)
    assert token != serve.token
    async with http_client(serve, {"Authorization": f"Bearer {token}"}) as client:
        job_id = await schedule_and_cancel(client)
    job = serve.client.get(f"/api/jobs/{job_id}").json()
    assert job["session_key"] == KEY
    assert job["kind"] == "agent_turn"
    # Its fire is a turn of the session (run now: through the fire path, no waiting a day).
    assert serve.client.post(f"/api/jobs/{job_id}/run").status_code == 202
    turn = wait_for(
        lambda: [
            t for t in serve.turns(KEY) if t["source"] == "automation" and t["state"] == "succeeded"
        ]
    )
    assert turn[0]["session_key"] == KEY


async def test_http_api_token_names_the_session_in_a_header(serve: Serve) -> None:
    headers = {"Authorization": f"Bearer {serve.token}", "X-Agentcron-Session": KEY}
    async with http_client(serve, headers) as client:
        await schedule_and_cancel(client)


def test_http_refuses_missing_and_wrong_tokens_and_unknown_sessions(
    serve: Serve, tmp_path: Path
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    post = serve.client.post

    def refused(headers: dict[str, str]) -> tuple[int, str]:
        answer = post("/mcp", json=body, headers={**accept, **headers})
        return answer.status_code, answer.json()["error"]

    serve.client.headers.pop("Authorization")
    assert refused({}) == (401, "unauthorized")
    assert refused({"Authorization": "Bearer nope"}) == (401, "unauthorized")
    other = mcp_token(tmp_path, "api:nobody")
    assert refused({"Authorization": f"Bearer {other}"}) == (404, "not_found")
    api = {"Authorization": f"Bearer {serve.token}"}
    assert refused(api)[0] == 400  # the API token alone names no session
    assert refused({**api, "X-Agentcron-Session": "api:nobody"}) == (404, "not_found")
    mine = {"Authorization": f"Bearer {mcp_token(tmp_path, KEY)}"}
    assert refused({**mine, "X-Agentcron-Session": "api:other"}) == (403, "forbidden")


async def test_http_client_with_a_wrong_token_cannot_connect(serve: Serve) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's own error for a 401
        async with http_client(serve, {"Authorization": "Bearer nope"}) as client:
            await client.list_tools()


def _stdio(serve: Serve, tmp_path: Path, key: str) -> Client:
    params = StdioServerParameters(
        command=str(AGENTCRON),
        args=["mcp", "--session", key, "--db", str(serve.db)],
        env=_env(tmp_path),
    )
    return Client(params)


async def test_stdio_schedules_in_its_session_and_the_running_server_fires_it(
    serve: Serve, tmp_path: Path
) -> None:
    async with _stdio(serve, tmp_path, KEY) as client:
        job_id = await schedule_and_cancel(client)
        # An immediate recall fires at once in the running server: a turn of the session.
        now = await client.call_tool(
            "schedule_recall", {"call_type": "immediate", "additional_context_message": "go"}
        )
        assert not now.is_error, text(now)
    assert serve.client.get(f"/api/jobs/{job_id}").json()["session_key"] == KEY
    wait_for(
        lambda: [
            t for t in serve.turns(KEY) if t["source"] == "recall" and t["state"] == "succeeded"
        ]
    )


async def test_stdio_refuses_an_unknown_session(serve: Serve, tmp_path: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - the process exits before it speaks
        async with _stdio(serve, tmp_path, "api:nobody") as client:
            await client.list_tools()


def test_stdio_command_says_which_session_is_unknown(serve: Serve, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(AGENTCRON), "mcp", "--session", "api:nobody", "--db", str(serve.db)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1
    assert "api:nobody" in done.stderr
