"""agentcron as an MCP server, driven by the official `mcp` client against real processes.

Streamable HTTP at `/mcp` of a real `agentcron serve` (a session's MCP token, or the API token
naming the session), and stdio through `agentcron mcp --session KEY` started by the client's
stdio transport: list the tools, add an automation by a `when` phrase, list it, schedule a
recall, cancel it; a missing or wrong token and an unknown session are refused; a job added
over MCP fires as a turn of its session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.integration.test_serve_stop import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

TOOLS = {"cron", "schedule_recall", "manage_recall"}
AGENTCRON = Path(sys.executable).with_name("agentcron")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    env["AGENTCRON_HOME"] = str(home)
    return env


@dataclass(frozen=True)
class Served:
    """The module's server, and this test's own session on it."""

    serve: Serve
    home: Path  # the server's data dir: its API token, which MCP tokens are made from
    key: str

    @property
    def api(self) -> httpx.Client:
        return self.serve.client

    def token_for(self, key: str) -> str:
        """`agentcron token --mcp --session KEY`, as a person runs it."""
        done = subprocess.run(
            [str(AGENTCRON), "token", "--mcp", "--session", key],
            env=_env(self.home), capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    def stdio(self, key: str) -> Client:
        """The client's stdio transport starting `agentcron mcp --session KEY`."""
        args = ["mcp", "--session", key, "--db", str(self.serve.db)]
        return Client(StdioServerParameters(command=str(AGENTCRON), args=args, env=_env(self.home)))

    def turns_of(self, source: str) -> list[dict[str, Any]]:
        return [
            t
            for t in self.serve.turns(self.key)
            if t["source"] == source and t["state"] == "succeeded"
        ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    """One server for the module (its start is the slow part)."""
    home = tmp_path_factory.mktemp("mcp")
    serve = Serve(home, wps="10000")
    try:
        yield serve, home
    finally:
        serve.close()


@pytest.fixture
def served(server: tuple[Serve, Path], request: pytest.FixtureRequest) -> Served:
    serve, home = server
    key = f"api:{request.node.name[:60]}"
    created = serve.client.post("/api/sessions", json={"key": key, "tz": "Europe/Berlin"})
    assert created.status_code == 201, created.text
    return Served(serve, home, key)


@asynccontextmanager
async def http_client(served: Served, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{served.serve.base}/mcp", http_client=http)) as client,
    ):
        yield client


def text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def wait_for(check: Callable[[], list[dict[str, Any]]], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
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
    assert "(id " not in text(added)  # the name, not the id, for a person
    listing = await client.call_tool("cron", {"action": "list"})
    assert "“standup”" in text(listing)
    job_id = text(listing).split("; id ", 1)[1].split()[0]  # the id the list ends each line with
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
    served: Served,
) -> None:
    token = served.token_for(served.key)
    assert token != served.serve.token
    async with http_client(served, {"Authorization": f"Bearer {token}"}) as client:
        job_id = await schedule_and_cancel(client)
    job = served.api.get(f"/api/jobs/{job_id}").json()
    assert job["session_key"] == served.key
    assert job["kind"] == "agent_turn"
    # Its fire is a turn of the session (run now: through the fire path, no waiting a day).
    assert served.api.post(f"/api/jobs/{job_id}/run").status_code == 202
    wait_for(lambda: served.turns_of("automation"))


async def test_http_api_token_names_the_session_in_a_header(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.serve.token}", "X-Agentcron-Session": served.key}
    async with http_client(served, headers) as client:
        await schedule_and_cancel(client)


def test_http_refuses_missing_and_wrong_tokens_and_unknown_sessions(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}

    def refused(headers: dict[str, str]) -> tuple[int, str]:
        answer = httpx.post(f"{served.serve.base}/mcp", json=body, headers={**accept, **headers})
        return answer.status_code, answer.json()["error"]

    assert refused({}) == (401, "unauthorized")
    assert refused({"Authorization": "Bearer nope"}) == (401, "unauthorized")
    other = served.token_for("api:nobody")
    assert refused({"Authorization": f"Bearer {other}"}) == (404, "not_found")
    api = {"Authorization": f"Bearer {served.serve.token}"}
    assert refused(api)[0] == 400  # the API token alone names no session
    assert refused({**api, "X-Agentcron-Session": "api:nobody"}) == (404, "not_found")
    mine = {"Authorization": f"Bearer {served.token_for(served.key)}"}
    assert refused({**mine, "X-Agentcron-Session": "api:other"}) == (403, "forbidden")


async def test_http_client_with_a_wrong_token_cannot_connect(served: Served) -> None:
    right = {"Authorization": f"Bearer {served.token_for(served.key)}"}
    async with http_client(served, right) as client:
        assert len((await client.list_tools()).tools) == 3
    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's own error for a 401
        async with http_client(served, {"Authorization": "Bearer nope"}) as client:
            await client.list_tools()


async def test_stdio_schedules_in_its_session_and_the_running_server_fires_it(
    served: Served,
) -> None:
    async with served.stdio(served.key) as client:
        job_id = await schedule_and_cancel(client)
        # An immediate recall fires at once in the running server: a turn of the session.
        now = await client.call_tool(
            "schedule_recall", {"call_type": "immediate", "additional_context_message": "go"}
        )
        assert not now.is_error, text(now)
    assert served.api.get(f"/api/jobs/{job_id}").json()["session_key"] == served.key
    wait_for(lambda: served.turns_of("recall"))


def test_stdio_command_says_which_session_is_unknown(served: Served) -> None:
    """An unknown session: `agentcron mcp` exits 1 before it speaks MCP, and says which."""
    done = subprocess.run(
        [str(AGENTCRON), "mcp", "--session", "api:nobody", "--db", str(served.serve.db)],
        env=_env(served.home), capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1
    assert "api:nobody" in done.stderr


def documented_config() -> dict[str, Any]:
    """The client configuration of docs/integrations.md, its `//` comments dropped."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text("utf-8")
    block = page.split("<!-- mcp-config -->\n```jsonc\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if not line.strip().startswith("//")]
    return dict(json.loads("\n".join(lines))["mcpServers"])


async def test_the_documented_client_configuration_connects_over_both_transports(
    served: Served,
) -> None:
    config = documented_config()
    stdio, http = config["agentcron"], config["agentcron-http"]
    # stdio, as written: the command and its arguments, the session ours (and our database)
    assert stdio["command"] == "agentcron"
    args = [served.key if a == "api:me" else a for a in stdio["args"]]
    params = StdioServerParameters(
        command=str(AGENTCRON), args=[*args, "--db", str(served.serve.db)], env=_env(served.home)
    )
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
    # HTTP, as written: the URL's path on this server, the header with the printed token
    assert http["type"] == "http"
    assert http["url"].endswith("/mcp")
    header = http["headers"]["Authorization"]
    assert header == "Bearer <the output of: agentcron token --mcp --session api:me>"
    headers = {"Authorization": f"Bearer {served.token_for(served.key)}"}
    async with http_client(served, headers) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
