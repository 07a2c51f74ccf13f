"""The total job limit (seed 004: 500, `EngineSettings.max_jobs`) on every surface that creates jobs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agentcron.agent.tools import ToolDeps, cron, schedule_recall
from agentcron.app import AgentCron
from agentcron.cli import app as cli_app
from agentcron.config import EngineSettings, max_jobs_from_env
from agentcron.domain.jobs import JobKind, NewJob
from agentcron.schedule import EverySpec
from agentcron.server import create_app
from agentcron.store import JobLimitError
from agentcron.testing import FakeClock
from tests.conftest import T0, CronFactory

LIMIT = 3
KEY = "websocket:abc"
TOKEN = "t"


@pytest.fixture
async def app(make_cron: CronFactory) -> AgentCron:
    cron_ = await make_cron(settings=EngineSettings(max_jobs=LIMIT))
    await cron_.sessions.create(KEY)
    return cron_


async def fill(app: AgentCron, n: int = LIMIT) -> None:
    for i in range(n):
        await app.jobs.create(name=f"j{i}", when="every 1h", message="m", session_key=KEY)


async def test_the_library_refuses_past_the_limit_and_stores_nothing(app: AgentCron) -> None:
    await fill(app, LIMIT - 1)
    with pytest.raises(JobLimitError, match="limit of 3"):
        await app.jobs.create_many(
            [
                NewJob(name=f"x{i}", spec=EverySpec(seconds=3600, anchor=T0), session_key=KEY)
                for i in range(2)
            ]
        )
    assert len(await app.jobs.list()) == LIMIT - 1  # all or none
    await fill(app, 1)  # exactly at the limit is fine
    with pytest.raises(JobLimitError):
        await fill(app, 1)
    # deleting one makes room again
    await app.jobs.delete((await app.jobs.list())[0].id)
    await fill(app, 1)


async def test_system_jobs_do_not_count_and_duplicates_add_nothing(app: AgentCron) -> None:
    await app.jobs.create(name="heartbeat", when="every 1h", kind=JobKind.SYSTEM_EVENT)
    await fill(app, LIMIT - 1)
    first = await app.jobs.create(
        name="last", when="every 1h", session_key=KEY, idempotency_key="k"
    )
    again = await app.jobs.create(
        name="last", when="every 1h", session_key=KEY, idempotency_key="k"
    )
    assert again.id == first.id  # an idempotent retry at the limit still answers


async def test_the_api_answers_409_job_limit(app: AgentCron) -> None:
    await fill(app)
    asgi = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=asgi, base_url="http://t", headers=headers) as api:
        body = {"name": "one more", "when": "every 1h", "message": "m", "session_key": KEY}
        response = await api.post("/api/jobs", json=body)
    assert response.status_code == 409, response.text
    assert response.json()["error"] == "job_limit"
    assert "limit of 3" in response.json()["detail"]


async def test_the_agent_tools_say_the_limit_is_reached(app: AgentCron, clock: FakeClock) -> None:
    await fill(app)
    ctx: Any = SimpleNamespace(deps=ToolDeps(jobs=app.jobs, session_key=KEY, now=clock.now()))
    added = await cron(ctx, "add", name="stretch", when="in 10 minutes", message="stand up")
    assert added.startswith("Error: the job limit is reached")
    recall = await schedule_recall(ctx, "once", "look at the build", when="in 2 hours")
    assert recall.startswith("Error: the job limit is reached")
    assert len(await app.jobs.list()) == LIMIT


def test_the_cli_says_the_limit_is_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    monkeypatch.setenv("AGENTCRON_MAX_JOBS", "1")

    def cli(*args: str) -> Any:
        return runner.invoke(cli_app, list(args), catch_exceptions=False)

    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m", "--when", "1h")
    assert cli(*add, "--db", db).exit_code == 0
    refused = cli(*add, "--db", db)
    assert refused.exit_code == 1
    assert "the job limit is reached: 1 jobs stored" in refused.stderr
    assert len(json.loads(cli("jobs", "list", "--db", db, "--json").stdout)) == 1
    monkeypatch.setenv("AGENTCRON_MAX_JOBS", "none")
    assert cli(*add, "--db", db).exit_code == 0
    monkeypatch.setenv("AGENTCRON_MAX_JOBS", "-4")
    bad = cli("jobs", "list", "--db", db)
    assert bad.exit_code == 1
    assert "AGENTCRON_MAX_JOBS must be a number of jobs" in bad.stderr


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", 500), ("none", None), ("Unlimited", None), ("20", 20), (" 7 ", 7)],
)
def test_max_jobs_from_env(raw: str, expected: int | None) -> None:
    assert max_jobs_from_env({"AGENTCRON_MAX_JOBS": raw}) == expected


@pytest.mark.parametrize("raw", ["0", "-1", "ten", "1e3", "99999999999"])
def test_max_jobs_from_env_refuses_what_is_not_a_count(raw: str) -> None:
    with pytest.raises(ValueError, match="AGENTCRON_MAX_JOBS"):
        max_jobs_from_env({"AGENTCRON_MAX_JOBS": raw})
