"""Managed wake against a seed-002 managed-cron service: a local fake of the contract
(tests/helpers/seed002.py) and the agent's app, both served on loopback, wired by the settings
alone (`wake.service = "seed002"`: the seed-002 arm client and fire verifier). On SQLite and
PostgreSQL; a fake clock for the jobs, real time for the tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.config import Settings
from agentcron.config.wake import WakeSettings
from agentcron.domain.jobs import Job
from agentcron.domain.states import RunState
from agentcron.server.asgi import create_app
from agentcron.server.serve import ServeOptions, build
from agentcron.testing import FakeClock, wait_settled
from agentcron.wake.arms import wire_text, wire_time
from agentcron.wake.provider import ManagedWake, resolve
from agentcron.wake.seed002 import Seed002Arms, Seed002FireVerifier
from agentcron.wake.verify import FireClaims, FireTokenError, FireVerifier, parse_fire_at
from tests.conftest import BACKENDS, CronFactory, Recorder
from tests.helpers.seed002 import AGENT_TOKEN, AUDIENCE, Armed, FakeSeed002, rsa_key, running
from tests.helpers.ws import free_port, listening

KEY = "api:chat"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@dataclass
class World:
    cron: AgentCron
    wake: ManagedWake
    service: FakeSeed002
    clock: FakeClock
    callback: str
    started: list[str] = field(default_factory=list)

    async def start_cron(self) -> None:
        self.wake.prepare()  # no timer: fires come from the service
        await self.cron.start()
        self.started.append("cron")

    async def start(self) -> None:
        if "cron" not in self.started:
            await self.start_cron()
        await self.wake.start()
        self.started.append("wake")

    async def job(self, when: str = "every 10 seconds") -> Job:
        if not await self.cron.sessions.list():
            await self.cron.sessions.create(KEY)
        return await self.cron.jobs.create(name="j", when=when, session_key=KEY, message="tick")

    def armed_at(self, job_id: str) -> datetime:
        return parse_fire_at(self.service.arms[job_id].fire_at)

    async def settle(self) -> None:
        await wait_for(lambda: not self.wake._dirty.is_set(), "reconcile quiet")
        await wait_settled(self.cron.engine)


async def wait_for(predicate: Callable[[], object], what: str, limit: float = 15.0) -> None:
    try:
        async with asyncio.timeout(limit):
            while not predicate():  # noqa: ASYNC110 (the fake's state has no event to wait on)
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


@asynccontextmanager
async def agent(
    make_cron: CronFactory,
    clock: FakeClock,
    service: FakeSeed002,
    *,
    verifier: FireVerifier | None = None,
) -> AsyncIterator[World]:
    """The agent's managed wake, from settings (or with `verifier`), its app on loopback."""
    port = free_port()
    callback = f"http://127.0.0.1:{port}"
    cron = await make_cron(start=False)
    settings = WakeSettings(
        provider="managed",
        service="seed002",
        relay_url=service.base,
        relay_token=AGENT_TOKEN,
        callback_url=callback,
        audience=AUDIENCE,
        jwks_url=service.jwks_url,
    )
    wake = resolve(
        settings, engine=cron.engine, catalog=cron.store, runs=cron.store,
        subscribe=cron.subscribe, clock=clock, verifier=verifier,
    )  # fmt: skip
    assert isinstance(wake, ManagedWake)
    assert isinstance(wake.arms, Seed002Arms)
    app = create_app(cron, token="api-token", wake=wake)
    async with listening(app, port=port):
        world = World(cron, wake, service, clock, callback)
        try:
            yield world
        finally:
            if "wake" in world.started:
                await wake.stop()


@pytest.fixture
async def world(make_cron: CronFactory, clock: FakeClock) -> AsyncIterator[World]:
    async with running() as service, agent(make_cron, clock, service) as found:
        yield found


async def test_reconcile_at_start_arms_the_jobs_and_cancels_orphans(world: World) -> None:
    await world.start_cron()
    j1, j2 = await world.job(), await world.job("every 1 minute")
    service = world.service
    service.arms["gone"] = Armed("gone", "2026-11-22T12:00:30+00:00", world.callback, "sch-0")
    service.arms[j2.id] = Armed(j2.id, "2020-01-01T00:00:00+00:00", world.callback, "sch-1")
    assert service.calls == []  # nothing armed before the wake starts
    await world.start()
    want = {j1.id: wire_text(j1.next_run_at), j2.id: wire_text(j2.next_run_at)}  # type: ignore[arg-type]
    await wait_for(
        lambda: {k: a.fire_at for k, a in service.arms.items()} == want, "the arms equal the jobs"
    )
    assert service.calls[0] == ("list", {})
    assert ("cancel", {"job_id": "gone"}) in service.calls
    assert {a.agent_callback_url for a in service.arms.values()} == {world.callback}
    assert set(service.auth) == {f"Bearer {AGENT_TOKEN}"}
    assert world.wake.status()["provider"] == "managed"
    assert world.wake.status()["issuer"] == service.base


async def test_a_fire_runs_once_re_arms_and_repeated_callbacks_do_not_run_again(
    world: World, recorder: Recorder
) -> None:
    await world.start()
    j = await world.job()
    await wait_for(lambda: j.id in world.service.arms, "armed")
    due = world.armed_at(j.id)
    assert due == wire_time(j.next_run_at)  # type: ignore[arg-type]
    world.clock.set(due)
    answer = await world.service.fire(j.id)
    assert answer.status_code == 202
    assert answer.json() == {"status": "accepted", "job_id": j.id}
    await wait_for(lambda: len(recorder.triggers) == 1, "the fire's turn")
    await world.settle()
    after = await world.cron.jobs.get(j.id)
    assert after.next_run_at is not None
    assert wire_time(after.next_run_at) > due
    await wait_for(lambda: world.armed_at(j.id) == wire_time(after.next_run_at), "re-armed")  # type: ignore[arg-type]
    # the portal retries the delivered fire (a fresh token), and replays one token: 202, no run
    token = world.service.mint()
    for again in (None, token, token):
        answer = await world.service.fire(j.id, token=again, fire_at=wire_text(due))
        assert answer.status_code == 202
    await wait_for(lambda: world.wake.fires["duplicate"] == 3, "duplicates dropped")
    # the next fire delivered three times at once (a retry racing the first): one run
    nxt = world.armed_at(j.id)
    world.clock.set(nxt)
    answers = await asyncio.gather(*(world.service.fire(j.id) for _ in range(3)))
    assert [a.status_code for a in answers] == [202, 202, 202]
    await wait_for(lambda: len(recorder.triggers) == 2, "the second fire's turn")
    await world.settle()
    runs = await world.cron.runs.list(j.id)
    assert sorted(r.fire_at for r in runs) == [due, nxt]
    assert [r.state for r in runs] == [RunState.SUCCEEDED] * 2
    assert len(recorder.triggers) == 2
    await wait_for(lambda: world.armed_at(j.id) > nxt, "re-armed again")


async def test_pause_and_delete_cancel_the_arm(world: World) -> None:
    await world.start()
    j = await world.job()
    await wait_for(lambda: j.id in world.service.arms, "armed")
    await world.cron.jobs.pause(j.id)
    await wait_for(lambda: j.id not in world.service.arms, "cancelled on pause")
    await world.cron.jobs.resume(j.id)
    await wait_for(lambda: j.id in world.service.arms, "re-armed on resume")
    await world.cron.jobs.delete(j.id)
    await wait_for(lambda: j.id not in world.service.arms, "cancelled on delete")
    assert world.service.count("cancel") == 2


async def test_forged_expired_and_foreign_tokens_are_401_and_nothing_runs(
    world: World, recorder: Recorder
) -> None:
    await world.start()
    j = await world.job()
    await wait_for(lambda: j.id in world.service.arms, "armed")
    world.clock.set(world.armed_at(j.id))
    service = world.service
    now = int(time.time())
    bad = {
        "signature": service.mint(key=rsa_key()),  # forged: another key under the portal's kid
        "expired": service.mint(iat=now - 200, exp=now - 100),
        "audience": service.mint(aud="agent:someone-else"),
        "issuer": service.mint(iss="https://evil.example"),
        "purpose": service.mint(purpose=None),  # a general agent JWT
    }
    for reason, token in bad.items():
        answer = await service.fire(j.id, token=token)
        assert answer.status_code == 401, reason
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["www-authenticate"].startswith("Bearer")
    async with httpx.AsyncClient(base_url=world.callback) as http:
        auth = {"Authorization": f"Bearer {service.mint()}"}
        no_job = await http.post("/api/cron/fire", json={"fire_at": "x"}, headers=auth)
        assert no_job.status_code == 400
        assert (await http.post("/api/cron/fire", json={"job_id": j.id})).status_code == 401
        metrics = (await http.get("/metrics")).text
    await world.settle()
    assert recorder.triggers == []
    assert await world.cron.runs.list(j.id) == []
    for reason in bad:
        line = f'agentcron_fire_webhook_requests_total{{result="unauthorized:{reason}"}} 1.0'
        assert line in metrics
    assert 'agentcron_fire_webhook_requests_total{result="bad_request"} 1.0' in metrics


async def test_a_refusing_service_is_retried_and_healed(world: World) -> None:
    world.service.mode = "down"
    await world.start()
    j = await world.job()
    await wait_for(lambda: world.wake.reconciles["failed"] >= 1, "a failed reconcile")
    assert "HTTP 503" in (world.wake.last_error or "")
    world.service.mode = "ok"
    await wait_for(lambda: j.id in world.service.arms, "healed by a retry")


class OwnVerifier:
    """A user's verifier: a shared secret in the bearer (what a test may plug in)."""

    issuer = "own"

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    async def ready(self) -> None:
        return None

    async def verify(self, token: str | None, body: Mapping[str, Any]) -> FireClaims:
        if self.broken:
            raise RuntimeError("the verifier's own bug")
        if token != "let-me-in":
            raise FireTokenError("own", "not our secret")
        return FireClaims(str(body["job_id"]), parse_fire_at(body["fire_at"]), None)


async def test_an_own_verifier_replaces_the_settings_one(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    async with running() as service, agent(make_cron, clock, service, verifier=OwnVerifier()) as w:
        assert isinstance(w.wake.verifier, OwnVerifier)
        await w.start()
        j = await w.job()
        await wait_for(lambda: j.id in service.arms, "armed")
        w.clock.set(w.armed_at(j.id))
        assert (await service.fire(j.id)).status_code == 401  # the portal's JWT: not ours now
        assert (await service.fire(j.id, token="let-me-in")).status_code == 202
        await wait_for(lambda: len(recorder.triggers) == 1, "the fire's turn")
        w.wake.verifier = OwnVerifier(broken=True)  # a verifier that raises: refused, not a 500
        answer = await service.fire(j.id, token="let-me-in")
        assert answer.status_code == 401
        assert "verifier failed" in answer.json()["detail"]


def test_serve_takes_an_own_verifier_and_the_settings_pick_seed002(tmp_path: Path) -> None:
    env = {
        "AGENTCRON_WAKE_SERVICE": "seed002",
        "AGENTCRON_WAKE_RELAY_URL": "https://portal.example",
        "AGENTCRON_WAKE_RELAY_TOKEN": AGENT_TOKEN,
        "AGENTCRON_WAKE_CALLBACK_URL": "https://agent.example",
        "AGENTCRON_WAKE_AUDIENCE": AUDIENCE,
        "AGENTCRON_WAKE_JWKS_URL": "https://portal.example/.well-known/jwks.json",
    }
    settings = Settings.load(env=env)
    server = build(ServeOptions(db=tmp_path / "a.db", home=tmp_path, wake="managed",
                                settings=settings))  # fmt: skip
    wake = server.app.state.wake
    assert isinstance(wake.arms, Seed002Arms)
    assert isinstance(wake.verifier, Seed002FireVerifier)
    own = OwnVerifier()
    server = build(ServeOptions(db=tmp_path / "b.db", home=tmp_path, wake="managed",
                                settings=settings, fire_verifier=own))  # fmt: skip
    assert server.app.state.wake.verifier is own
    # only the arm client's settings and the callback are needed with one's own verifier
    bare = Settings.load(env={k: v for k, v in env.items() if "AUDIENCE" not in k})
    server = build(ServeOptions(db=tmp_path / "c.db", home=tmp_path, wake="managed",
                                settings=bare, fire_verifier=own))  # fmt: skip
    assert server.app.state.wake.verifier is own
