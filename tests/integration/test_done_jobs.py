"""Finished one-shots (issue 26): done, not enabled; kept `retention_age` then removed; never
counted toward a limit nor blocking a session's deletion; `delete_after_run` on every surface.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from agentcron.agent.tools import ToolDeps, ToolLimits, cron
from agentcron.app import AgentCron
from agentcron.cli import app as cli_app
from agentcron.config import DEFAULT_MAX_JOBS, EngineSettings
from agentcron.domain.events import Event, JobAction, JobEvent
from agentcron.domain.jobs import JobStatus
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.store import JobLimitError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory

TOKEN = "t"
KEY = "websocket:abc"
MIN = timedelta(minutes=1)
RETENTION = timedelta(days=30)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def app(make_cron: CronFactory) -> AgentCron:
    cron_ = await make_cron(settings=EngineSettings(retention_age=RETENTION))
    await cron_.sessions.create(KEY)
    return cron_


@pytest.fixture
async def api(app: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


async def one_shot(api: httpx.AsyncClient, name: str, **kw: Any) -> dict[str, Any]:
    body = {"session_key": KEY, "name": name, "message": "m", "when": "in 1m", **kw}
    response = await api.post("/api/jobs", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def fire(app: AgentCron, clock: FakeClock) -> None:
    clock.advance(MIN)
    await wait_settled(app.engine)


# The cap is the same query on both backends (the job limit test below runs on both): once is
# enough for 600 fires.
@pytest.mark.parametrize("cron_backend", ["sqlite"], indirect=True)
async def test_600_api_one_shots_fire_and_the_cap_is_not_hit(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    assert app.settings.max_jobs == DEFAULT_MAX_JOBS == 500
    for wave in range(6):  # 100 at a time: at most 100 not done at once, 600 stored at the end
        await asyncio.gather(*(one_shot(api, f"reminder {wave}-{i}") for i in range(100)))
        await fire(app, clock)
    jobs: list[dict[str, object]] = []
    params: dict[str, object] = {"limit": 200}
    while True:  # the list comes in pages
        page = (await api.get("/api/jobs", params=params)).json()
        jobs += page["jobs"]
        if page["next_cursor"] is None:
            break
        params = {"limit": 200, "cursor": page["next_cursor"]}
    assert len(jobs) == 600
    assert {(j["state"], j["enabled"], j["last_status"]) for j in jobs} == {
        ("done", False, "succeeded")
    }


async def test_done_jobs_do_not_count_toward_the_job_limit(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron(settings=EngineSettings(max_jobs=3))
    await app.sessions.create(KEY)
    for i in range(3):
        await app.jobs.create(name=f"once {i}", when="in 1m", session_key=KEY)
    with pytest.raises(JobLimitError):
        await app.jobs.create(name="refused", when="in 1m", session_key=KEY)
    await fire(app, clock)
    for i in range(3):  # the three done ones leave room for three more
        await app.jobs.create(name=f"again {i}", when="in 1m", session_key=KEY)
    with pytest.raises(JobLimitError):
        await app.jobs.create(name="refused", when="in 1m", session_key=KEY)
    assert len(await app.jobs.list()) == 6


async def test_a_finished_one_shot_is_done_then_removed_after_retention_age(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    kept = await one_shot(api, "kept")
    gone = await one_shot(api, "gone", delete_after_run=True)
    assert (kept["state"], kept["finished_at"], kept["policy"]["delete_after_run"]) == (
        "active",
        None,
        False,
    )
    assert gone["policy"]["delete_after_run"] is True
    await fire(app, clock)
    assert (await api.get(f"/api/jobs/{gone['id']}")).status_code == 404
    done = (await api.get(f"/api/jobs/{kept['id']}")).json()
    assert done["state"] == "done"
    assert done["finished_at"] == (T0 + MIN).isoformat().replace("+00:00", "Z")
    assert (done["enabled"], done["next_run_at"], done["paused_reason"]) == (False, None, None)
    # resuming a done one-shot whose time has passed leaves it done (nothing to arm)
    resumed = (await api.post(f"/api/jobs/{kept['id']}/resume")).json()
    assert (resumed["state"], resumed["enabled"]) == ("done", False)
    # kept until retention_age has passed since it finished
    clock.advance(RETENTION - 2 * MIN)
    assert await app.jobs.sweep_finished() == []
    assert (await app.jobs.get(kept["id"])).status is JobStatus.DONE
    # then the engine's periodic sweep removes it, and live views are told
    swept = asyncio.Event()

    def heard(event: Event) -> None:
        if isinstance(event, JobEvent) and event.action is JobAction.DELETED:
            swept.set()

    app.events.subscribe(heard, [JobEvent])
    clock.advance(3 * MIN)
    await asyncio.wait_for(swept.wait(), 5)
    assert (await api.get(f"/api/jobs/{kept['id']}")).status_code == 404
    # its run history outlives it like that of a deleted job
    assert [r.state.value for r in await app.runs.list(kept["id"])] == ["succeeded"]


async def test_a_failed_one_shot_is_done_too(make_cron: CronFactory, clock: FakeClock) -> None:
    async def failing(trigger: object) -> str:
        raise RuntimeError("model endpoint down")

    app = await make_cron(runner=failing)
    await app.sessions.create(KEY)
    job = await app.jobs.create(name="once", when="in 1m", session_key=KEY)
    await fire(app, clock)
    failed = await app.jobs.get(job.id)  # through the finisher (a failure), not the stamp
    assert (failed.status, failed.last_status, failed.finished_at) == (
        JobStatus.DONE,
        RunState.FAILED,
        T0 + MIN,
    )
    assert (failed.enabled, failed.consecutive_failures, failed.paused_reason) == (False, 1, None)


async def test_a_done_one_shot_given_a_new_time_and_resumed_is_active_again(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    job = await one_shot(api, "again")
    await fire(app, clock)
    patched = await api.patch(f"/api/jobs/{job['id']}", json={"when": "in 1h", "enabled": True})
    body = patched.json()
    assert (body["state"], body["enabled"], body["finished_at"]) == ("active", True, None)
    assert body["next_fire_at"] is not None


async def test_a_session_with_only_finished_one_shots_can_be_deleted(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    first = await one_shot(api, "a")
    second = await one_shot(api, "b")
    await fire(app, clock)
    deleted = (await api.delete(f"/api/sessions/{KEY}")).json()
    assert deleted == {"deleted": True, "deleted_automations": [first["id"], second["id"]]}
    assert await app.jobs.list() == []


async def test_a_session_with_a_pending_one_shot_still_asks_first(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    await one_shot(api, "done one")
    await fire(app, clock)
    pending = await one_shot(api, "pending")
    blocked = (await api.delete(f"/api/sessions/{KEY}")).json()
    assert blocked["deleted"] is False
    assert [j["id"] for j in blocked["automations"]] == [pending["id"]]  # the done one is not


async def test_the_agent_tools_per_session_limit_ignores_finished_ones(
    api: httpx.AsyncClient, app: AgentCron, clock: FakeClock
) -> None:
    limits = ToolLimits()
    for i in range(limits.max_jobs_per_session):
        await one_shot(api, f"r{i}")
    await fire(app, clock)
    ctx: Any = SimpleNamespace(deps=ToolDeps(jobs=app.jobs, session_key=KEY, now=clock.now()))
    added = await cron(ctx, "add", name="stretch", when="in 10 minutes", message="stand up")
    assert added.startswith("Scheduled “stretch”"), added
    listed = await cron(ctx, "list")
    assert listed.count("; done (finished Sun 2026-11-22 12:01:00 (UTC))") == 20, listed
    # pending ones still count
    for i in range(limits.max_jobs_per_session - 1):
        await one_shot(api, f"p{i}")
    refused = await cron(ctx, "add", name="one more", when="in 20 minutes", message="sit")
    assert "already has 20 automations" in refused, refused


def test_the_cli_takes_delete_after_run_or_keep(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    runner = CliRunner()

    def cli(*args: str) -> Any:
        result = runner.invoke(cli_app, [*args, "--db", db], catch_exceptions=False)
        assert result.exit_code == 0, result.output + result.stderr
        return result

    cli("sessions", "add", "api:ops")
    add = ("jobs", "add", "--session", "api:ops", "--message", "m", "--when", "in 1h", "--json")
    removed = json.loads(cli(*add, "--name", "removed", "--delete-after-run").stdout)
    kept = json.loads(cli(*add, "--name", "kept", "--keep").stdout)
    default = json.loads(cli(*add, "--name", "default").stdout)
    assert removed["policy"]["delete_after_run"] is True
    assert kept["policy"]["delete_after_run"] is False
    assert default["policy"]["delete_after_run"] is False
    assert {j["state"] for j in json.loads(cli("jobs", "list", "--json").stdout)} == {"active"}
