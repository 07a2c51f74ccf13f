"""The runner routes of an app that is not started: the schema, and the callback's guard."""

from __future__ import annotations

from pathlib import Path

import httpx

from agentcron.app import AgentCron
from agentcron.config import Settings
from agentcron.server import create_app
from agentcron.tokens import new_runner_secret


async def test_the_schema_takes_the_api_token_and_the_callback_the_runner_secret(
    tmp_path: Path,
) -> None:
    secret = new_runner_secret()
    cron = AgentCron(
        db=tmp_path / "unused.db",
        runner_url="http://127.0.0.1:1/turn",
        runner_secret=secret,
        config=Settings(),
    )
    app = create_app(cron, token="api")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        schema = await client.get("/api/schema/runner.json")
        assert schema.status_code == 401
        schema = await client.get(
            "/api/schema/runner.json", headers={"authorization": "Bearer api"}
        )
        assert schema.status_code == 200
        assert schema.json()["answer"]["sse"]["done"]["title"] == "DoneEvent"
        body = {"turn_id": "t-1", "tool": "shell"}
        api_token = await client.post(
            "/api/runner/approvals", json=body, headers={"authorization": "Bearer api"}
        )
        assert api_token.status_code == 401
        assert "runner secret" in api_token.json()["detail"]
        bounded = await client.post(
            "/api/runner/approvals",
            json={**body, "timeout_s": 0},
            headers={"authorization": f"Bearer {secret}"},
        )
        assert bounded.status_code == 422


async def test_without_a_runner_url_the_callback_says_so(tmp_path: Path) -> None:
    app = create_app(AgentCron(db=tmp_path / "unused.db", config=Settings()), token="api")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answer = await client.post(
            "/api/runner/approvals",
            json={"turn_id": "t-1", "tool": "shell"},
            headers={"authorization": "Bearer whatever"},
        )
    assert answer.status_code == 401
    assert "no runner URL" in answer.json()["detail"]
