"""Safe to leave running: a job gone silent (overdue), failing, or about to end raises one alert
per episode — an event on the bus, a notice in its session's channel, a series on `/metrics` —
kept on the job row so a restart does not send it again, and cleared when the job recovers;
a job that ends can be renewed (library, REST, CLI). On SQLite and PostgreSQL.
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
from agentcron.channels import ChannelManager
from agentcron.channels.manager import OutboundMessage
from agentcron.config import EngineSettings
from agentcron.domain.events import Event, JobAlert, JobEnding, JobFailing, JobOverdue
from agentcron.domain.jobs import Job
from agentcron.server import create_app
from agentcron.store.errors import SessionNotFoundError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory, Recorder
from tests.helpers.channels import RecordingChannel
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

TOKEN = "test-token"
KEY = "websocket:alerts"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


class Watch:
    """An AgentCron with a recording channel, and the alerts its bus published."""

    def __init__(self, cron: AgentCron, manager: ChannelManager) -> None:
        self.cron = cron
        self.manager = manager
        (channel,) = manager.channels
        assert isinstance(channel, RecordingChannel)
        self.channel = channel
        self.alerts: list[JobAlert] = []
        cron.subscribe(self._heard, types=[JobAlert])

    def _heard(self, event: Event) -> None:
        assert isinstance(event, JobAlert)
        self.alerts.append(event)

    def notices(self) -> list[OutboundMessage]:
        """The alerts the channel was sent (it gets the turns' replies too)."""
        return [m for m in self.channel.got if m.kind == "alert"]

    def types(self) -> list[str]:
        return [a.type for a in self.alerts]

    async def step(self, total: timedelta, by: timedelta = timedelta(seconds=20)) -> None:
        """Move the clock `total` in steps (the engine sweeps every `reap_interval`)."""
        clock = self.cron.clock
        assert isinstance(clock, FakeClock)
        moved = timedelta(0)
        while moved < total:
            clock.advance(by)
            moved += by
            await wait_settled(self.cron.engine, busy_ok=True)
        await self.manager.idle()


@pytest.fixture
async def watch_factory(make_cron: CronFactory) -> AsyncIterator[Any]:
    managers: list[ChannelManager] = []

    async def make(*, timer: bool = True, **kw: Any) -> Watch:
        """`timer=False`: an engine that never claims on its own (a silent schedule)."""
        cron = await make_cron(start=False, **kw)
        cron.engine.set_timer(timer)
        await cron.start()
        manager = ChannelManager(cron, [RecordingChannel()])
        await manager.start()
        managers.append(manager)
        return Watch(cron, manager)

    yield make
    for manager in managers:
        await manager.stop(grace=1.0)


async def a_job(cron: AgentCron, when: str = "every 10 minutes", **kw: Any) -> Job:
    if not await _has_session(cron):
        await cron.sessions.create(KEY)
    return await cron.jobs.create(name="nightly", when=when, message="check", session_key=KEY, **kw)


async def _has_session(cron: AgentCron) -> bool:
    try:
        await cron.sessions.get(KEY)
    except SessionNotFoundError:
        return False
    return True


async def test_a_silent_schedule_is_overdue_once_survives_a_restart_and_recovers(
    watch_factory: Any, make_cron: CronFactory
) -> None:
    watch: Watch = await watch_factory(timer=False)  # nothing claims: the schedule is silent
    job = await a_job(watch.cron)  # due at T0 + 10 min; grace max(5 min, 10% of 10 min)
    await watch.step(timedelta(minutes=14))
    assert watch.alerts == []  # within its grace
    await watch.step(timedelta(minutes=3))
    assert watch.types() == ["job_overdue"]
    (overdue,) = watch.alerts
    assert isinstance(overdue, JobOverdue)
    assert (overdue.job_id, overdue.reason, overdue.due_at) == (
        job.id,
        "not_fired",
        T0 + timedelta(minutes=10),
    )
    (notice,) = watch.notices()
    assert (notice.kind, notice.session_key, notice.status) == ("alert", KEY, "job_overdue")
    assert "“nightly” is overdue" in notice.text
    stored = await watch.cron.jobs.get(job.id)
    assert stored.overdue_since is not None
    # More sweeps: still one episode.
    await watch.step(timedelta(minutes=3))
    assert watch.types() == ["job_overdue"]

    # A restart reads the episode from the job row: nothing is sent again.
    await watch.manager.stop(grace=1.0)
    await watch.cron.close()
    again: Watch = await watch_factory(timer=False)
    await again.step(timedelta(minutes=3))
    assert again.alerts == []
    assert again.notices() == []

    # Its fires run again: the next sweep after it caught up ends the episode.
    again.cron.engine.set_timer(True)
    await again.step(timedelta(minutes=2))
    assert again.types() == ["job_recovered"]
    assert again.alerts[0].job_id == job.id
    assert [m.status for m in again.notices()] == ["job_recovered"]
    assert (await again.cron.jobs.get(job.id)).overdue_since is None


async def test_a_fire_that_never_ends_makes_its_job_overdue_until_it_ends(
    watch_factory: Any, recorder: Recorder
) -> None:
    release = asyncio.Event()

    async def hang(trigger: Trigger) -> str:
        await release.wait()
        return "finally"

    recorder.result = hang
    # turn_timeout is real time (never reached here); the open-run limit is it + the grace.
    watch: Watch = await watch_factory(settings=EngineSettings(turn_timeout=60.0))
    job = await a_job(watch.cron)
    await watch.step(timedelta(minutes=10))  # the fire starts and hangs
    assert len(recorder.triggers) == 1
    await watch.step(timedelta(minutes=5))
    assert watch.alerts == []  # open for 5 min: within 1 min + 5 min
    await watch.step(timedelta(minutes=2))
    assert watch.types() == ["job_overdue"]
    overdue = watch.alerts[0]
    assert isinstance(overdue, JobOverdue)
    assert (overdue.job_id, overdue.reason) == (job.id, "run_open")
    assert overdue.run_id is not None
    assert [m.status for m in watch.notices()] == ["job_overdue"]
    release.set()
    await watch.step(timedelta(minutes=2))
    assert watch.types() == ["job_overdue", "job_recovered"]
    assert [m.status for m in watch.notices()] == ["job_overdue", "job_recovered"]


async def test_three_failures_in_a_row_raise_one_failing_alert(
    watch_factory: Any, recorder: Recorder
) -> None:
    outcomes = ["boom"] * 4 + ["ok"]

    async def scripted(trigger: Trigger) -> str:
        if outcomes.pop(0) == "boom":
            raise RuntimeError("the build server is down")
        return "fine again"

    recorder.result = scripted
    watch: Watch = await watch_factory()
    job = await a_job(watch.cron)
    await watch.step(timedelta(minutes=31), by=timedelta(minutes=1))  # three failed fires
    assert (await watch.cron.jobs.get(job.id)).consecutive_failures == 3
    assert watch.types() == ["job_failing"]
    failing = watch.alerts[0]
    assert isinstance(failing, JobFailing)
    assert failing.failures == 3
    await watch.step(timedelta(minutes=10), by=timedelta(minutes=1))  # a fourth: same episode
    assert (await watch.cron.jobs.get(job.id)).consecutive_failures == 4
    assert watch.types() == ["job_failing"]
    await watch.step(timedelta(minutes=22), by=timedelta(minutes=1))  # after its backoff: a success
    assert watch.types() == ["job_failing", "job_recovered"]
    assert [m.status for m in watch.notices()] == ["job_failing", "job_recovered"]
    assert (await watch.cron.jobs.get(job.id)).failing_since is None


@pytest.fixture
async def api(watch_factory: Any) -> AsyncIterator[tuple[Watch, httpx.AsyncClient]]:
    watch: Watch = await watch_factory()
    app = create_app(watch.cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield watch, c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def test_metrics_list_the_overdue_job_only_and_the_view_badges_it(
    api: tuple[Watch, httpx.AsyncClient],
) -> None:
    watch, client = api
    watch.cron.engine.set_timer(False)
    late = await a_job(watch.cron)
    calm = await a_job(watch.cron, when="every day at 9")  # next fire tomorrow
    await watch.step(timedelta(minutes=17))
    text = (await client.get("/metrics")).text
    assert f'agentcron_job_overdue{{job_id="{late.id}",job_name="nightly"}} 1.0' in text
    assert calm.id not in text
    assert "agentcron_jobs_overdue 1.0" in text
    shown = answer(await client.get(f"/api/jobs/{late.id}"))
    assert shown["alerts"] == ["overdue"]
    assert shown["overdue_since"] is not None
    assert answer(await client.get(f"/api/jobs/{calm.id}"))["alerts"] == []


async def test_an_ending_job_says_so_once_and_is_renewed_through_rest(
    api: tuple[Watch, httpx.AsyncClient],
) -> None:
    watch, client = api
    job = await a_job(watch.cron, max_runs=2)
    await watch.step(timedelta(minutes=12), by=timedelta(minutes=1))  # one run: one left
    assert watch.types() == ["job_ending"]
    ending = watch.alerts[0]
    assert isinstance(ending, JobEnding)
    assert ending.remaining_runs == 1
    assert [m.text for m in watch.notices()] == [
        "Automation “nightly” has 1 run left; renew it to keep it running"
    ]
    assert answer(await client.get(f"/api/jobs/{job.id}"))["alerts"] == ["ending"]
    renewed = answer(await client.post(f"/api/jobs/{job.id}/renew", json={"runs": 5}))
    assert (renewed["policy"]["max_runs"], renewed["remaining_runs"]) == (7, 6)
    assert renewed["alerts"] == []
    assert renewed["ending_warned_at"] is None
    # Its end nears again much later: announced again, once.
    await watch.step(timedelta(minutes=60), by=timedelta(minutes=1))
    assert watch.types() == ["job_ending", "job_ending"]

    # A done job (its runs spent) comes back with a new end.
    await watch.step(timedelta(minutes=10), by=timedelta(minutes=1))
    done = answer(await client.get(f"/api/jobs/{job.id}"))
    assert done["state"] == "done"
    end = (T0 + timedelta(days=3)).isoformat()
    back = answer(await client.post(f"/api/jobs/{job.id}/renew", json={"runs": 2, "end_at": end}))
    assert back["state"] == "active"
    assert back["next_run_at"] is not None
    assert back["policy"]["end_at"] == end.replace("+00:00", "Z")

    # Bounded and clear: nothing to renew, a past end, an unknown job, a stray field.
    assert (await client.post(f"/api/jobs/{job.id}/renew", json={})).status_code == 422
    past = {"end_at": T0.isoformat()}
    assert (await client.post(f"/api/jobs/{job.id}/renew", json=past)).status_code == 422
    assert (await client.post("/api/jobs/nope/renew", json={"runs": 1})).status_code == 404
    stray = await client.post(f"/api/jobs/{job.id}/renew", json={"runs": 1, "days": 2})
    assert stray.status_code == 422
    endless = await a_job(watch.cron, when="every day at 9")
    no_limit = await client.post(f"/api/jobs/{endless.id}/renew", json={"runs": 1})
    assert no_limit.status_code == 422
    assert "no run limit" in no_limit.text


def test_cli_renews_a_job_through_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "build", "--message", "check",
                "--when", "every day at 9", "--max-runs", "3", "--db", db, "--json")  # fmt: skip
    job = json.loads(added.stdout)
    renewed = cli("jobs", "renew", job["id"], "--runs", "2", "--until",
                  "2099-01-31T18:00:00+01:00", "--db", db)  # fmt: skip
    assert renewed.exit_code == 0, renewed.output
    assert renewed.stdout.startswith("“build” renewed: ends ")
    assert "5 runs left" in renewed.stdout
    shown = json.loads(cli("jobs", "show", job["id"], "--db", db, "--json").stdout)
    assert shown["policy"]["max_runs"] == 5
    nothing = cli("jobs", "renew", job["id"], "--db", db)
    assert nothing.exit_code == 1
    assert "end_at, runs, or both" in nothing.output
