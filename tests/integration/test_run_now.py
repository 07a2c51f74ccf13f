"""Run now: a person's manual run of a job, through the same path as a scheduled fire (its lane,
deferral behind an open turn, trigger entry, run record, closure), over the API and the CLI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.domain.states import RunState
from agentcron.runtime.clock import SystemClock
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory, Recorder
from tests.integration.test_cli_commands import cli, home, server  # noqa: F401 (fixtures)

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "websocket:abc"
HOUR = timedelta(hours=1)
TICK = timedelta(microseconds=1)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Run now on SQLite and on PostgreSQL."""
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron()  # the recorder runner


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def a_job(api: httpx.AsyncClient, **kw: Any) -> dict[str, Any]:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {"session_key": KEY, "name": "digest", "message": "sum up", "when": "every day at 9"}
    return answer(await api.post("/api/jobs", json=body | kw), 201)  # type: ignore[no-any-return]


async def test_run_now_is_a_turn_of_the_session_and_leaves_the_schedule(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api)
    run = answer(await api.post(f"/api/jobs/{job['id']}/run"), 202)
    assert (run["job_id"], run["manual"], run["state"]) == (job["id"], True, "claimed")
    assert run["session_key"] == KEY
    await wait_settled(cron.engine)
    done = answer(await api.get(f"/api/runs/{run['id']}"))
    assert (done["state"], done["manual"], done["output"]) == ("succeeded", True, "done: digest")
    assert done["deferred_at"] is None
    assert recorder.names() == ["digest"]
    # The same trigger entry and closure as a scheduled fire, the trigger marked manual.
    messages = answer(await api.get(f"/api/sessions/{KEY}/messages"))["messages"]
    trigger, closing = messages[-2:]
    assert trigger["content"].startswith("Scheduled automation triggered: digest")
    assert (trigger["meta"]["automation_run_id"], trigger["meta"]["manual"]) == (run["id"], True)
    assert closing["content"] == "done: digest"
    # The job's schedule did not move; the run is its last one.
    after = answer(await api.get(f"/api/jobs/{job['id']}"))
    assert after["next_run_at"] == job["next_run_at"]
    assert (after["run_count"], after["last_status"]) == (job["run_count"], "succeeded")
    (listed,) = after["runs"]
    assert (listed["id"], listed["manual"]) == (run["id"], True)
    # Once it ended, another one may be asked for.
    again = answer(await api.post(f"/api/jobs/{job['id']}/run"), 202)
    await wait_settled(cron.engine)
    assert answer(await api.get(f"/api/runs/{again['id']}"))["state"] == "succeeded"
    missing = await api.post("/api/jobs/01NOSUCHJOB/run")
    assert missing.status_code == 404
    assert missing.json() == {"error": "not_found", "detail": "no job with id '01NOSUCHJOB'"}


async def test_a_second_run_now_while_one_is_pending_is_409_and_a_paused_job_runs(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder, clock: FakeClock
) -> None:
    job = await a_job(api, catchup="skip")
    answer(await api.post(f"/api/jobs/{job['id']}/pause"))
    body = {"session_key": KEY, "name": "blocker", "message": "wait", "when": "every day at 9"}
    blocker = answer(await api.post("/api/jobs", json=body), 201)
    busy, gate = asyncio.Event(), asyncio.Event()

    async def hold(trigger: Trigger) -> str:
        if trigger.job_name == "blocker":
            busy.set()
            await gate.wait()
        return f"done: {trigger.job_name}"

    recorder.result = hold
    # The session is in a turn: the manual run waits behind it, deferred, like a fire.
    answer(await api.post(f"/api/jobs/{blocker['id']}/run"), 202)
    await busy.wait()
    run = answer(await api.post(f"/api/jobs/{job['id']}/run"), 202)
    await wait_settled(cron.engine, busy_ok=True)
    waiting = answer(await api.get(f"/api/runs/{run['id']}"))
    assert waiting["state"] == "deferred"
    second = await api.post(f"/api/jobs/{job['id']}/run")
    assert second.status_code == 409
    assert second.json()["error"] == "conflict"
    assert second.json()["detail"] == (
        f"job {job['id']!r} has a manual run that has not ended yet ({run['id']}): wait for it "
        "to end, then run it again"
    )
    # A scheduled fire of a catchup=skip job deferred past the grace is missed; a person's
    # manual run is never late.
    clock.advance(cron.engine.settings.misfire_grace * 2)
    gate.set()
    await wait_settled(cron.engine)
    done = answer(await api.get(f"/api/runs/{run['id']}"))
    assert (done["state"], done["manual"]) == ("succeeded", True)
    assert done["deferred_at"] is not None
    after = answer(await api.get(f"/api/jobs/{job['id']}"))
    assert (after["enabled"], after["next_run_at"]) == (False, None)  # still paused


async def test_run_now_of_a_delivery_job_runs_isolated_and_a_failure_moves_nothing(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await cron.jobs.create(
        name="report", when="every day at 9", message="report", max_failures=1
    )
    assert job.session_key is None  # a delivery job: its fires run isolated

    async def fail(trigger: Trigger) -> str:
        raise RuntimeError("the report source is down")

    recorder.result = fail
    run = answer(await api.post(f"/api/jobs/{job.id}/run"), 202)
    await wait_settled(cron.engine)
    done = answer(await api.get(f"/api/runs/{run['id']}"))
    assert (done["state"], done["manual"]) == ("failed", True)
    assert "the report source is down" in done["error"]
    assert recorder.names() == ["report"]
    # A scheduled failure would pause it (max_failures=1) or back it off; a manual one does not.
    after = await cron.jobs.get(job.id)
    assert (after.enabled, after.consecutive_failures) == (True, 0)
    assert (after.next_fire_at, after.next_run_at) == (job.next_fire_at, job.next_run_at)
    assert after.last_status == RunState.FAILED


def test_run_now_through_the_cli_with_a_server_on_the_same_database(
    server: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    api = ("--api", server)
    token = cli("token").stdout.strip()
    assert cli("sessions", "add", "api:ops", *api).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "ping", "--message", "ping",
                "--when", "every day at 8", *api, "--json")  # fmt: skip
    job = json.loads(added.stdout)
    # Written to the database by the CLI; the server hears of it and its engine runs it.
    asked = cli("jobs", "run", job["id"], "--db", str(tmp_path / "srv.db"), "--json")
    assert asked.exit_code == 0, asked.output
    run = json.loads(asked.stdout)
    assert (run["job_id"], run["manual"]) == (job["id"], True)
    headers = {"Authorization": f"Bearer {token}"}
    done = httpx.get(f"{server}/api/runs/{run['id']}", params={"wait": 30}, headers=headers)
    assert (done.json()["state"], done.json()["manual"]) == ("succeeded", True)
    # Through the API, the same.
    again = cli("jobs", "run", job["id"], *api)
    assert again.exit_code == 0, again.output
    # 'a run of “ping” asked for; see it: agentcron runs show RUN_ID'
    assert again.stdout.startswith("a run of “ping” asked for; see it: agentcron runs show ")
    second_id = again.stdout.split()[-1]
    done = httpx.get(f"{server}/api/runs/{second_id}", params={"wait": 30}, headers=headers)
    assert done.json()["state"] == "succeeded"
    shown = json.loads(cli("jobs", "show", job["id"], *api, "--json").stdout)
    assert shown["next_run_at"] == job["next_run_at"]
    assert {r["id"] for r in shown["runs"]} == {run["id"], second_id}
    missing = cli("jobs", "run", "01NOSUCHJOB", *api)
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: no job with id '01NOSUCHJOB' (HTTP 404)"


async def test_a_manual_run_never_takes_an_instant_of_the_schedule(
    cron: AgentCron, clock: FakeClock
) -> None:
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(name="hourly", when="0 * * * *", message="tick", session_key=KEY)
    due = job.next_fire_at
    assert due == T0 + HOUR
    # Asked for at the instant of a scheduled fire: `(job_id, fire_at)` is unique, so the manual
    # run takes the tick before and the scheduled fire still happens.
    manual = await cron.store.insert_manual_run(job.id, due)
    assert (manual.fire_at, manual.manual) == (due - TICK, True)
    clock.advance(HOUR)
    await wait_settled(cron.engine)
    runs = await cron.runs.list(job.id)
    assert [(r.fire_at, r.manual, r.state) for r in runs] == [
        (due, False, RunState.SUCCEEDED),
        (due - TICK, True, RunState.SUCCEEDED),
    ]


async def test_run_now_from_another_process_is_run_by_the_servers_engine(cron_url: str) -> None:
    """A CLI-like process (store open, no engine) asks; a server's engine hears the notice
    (PostgreSQL NOTIFY, SQLite's change counter) and runs it, here within the run's wait.
    """
    ran: list[str] = []

    async def runner(trigger: Trigger) -> str:
        ran.append(trigger.job_name)
        return "ok"

    engine_side = AgentCron(url=cron_url, runner=runner, clock=SystemClock())
    await engine_side.start()
    cli_side = AgentCron(url=cron_url, runner=runner)
    await cli_side.store.open()  # as the CLI's database backend does: no engine
    try:
        if engine_side.store.dialect == "postgresql":
            await asyncio.wait_for(engine_side.store.signals.connected.wait(), 5)
        await engine_side.sessions.create(KEY)
        job = await engine_side.jobs.create(
            name="digest", when="every day at 9", message="m", session_key=KEY
        )
        run = await cli_side.runs.run_now(job.id)
        done = await engine_side.runs.wait(run.id, 10)
        assert (done.state, done.manual, done.output) == (RunState.SUCCEEDED, True, "ok")
        assert ran == ["digest"]
        assert (await engine_side.jobs.get(job.id)).next_run_at == job.next_run_at
    finally:
        await cli_side.store.close()
        await engine_side.close(grace=1)
