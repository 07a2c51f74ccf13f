"""Managed wake in one process: reconcile against an in-memory wake service, the fire webhook
through the real app (ASGI), and the engine's timer off. Real keys, a fake clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.config.wake import WakeSettings
from agentcron.domain.states import RunState
from agentcron.relay.signing_keys import SigningKeys
from agentcron.server.asgi import create_app
from agentcron.testing import FakeClock, wait_settled
from agentcron.wake.arms import Arm, wire_text, wire_time
from agentcron.wake.provider import LocalWake, ManagedWake, resolve
from agentcron.wake.verify import JwksCache, RelayFireVerifier
from tests.conftest import CronFactory, Recorder

AUD, ISS, CALLBACK = "agent:test", "http://relay.test", "http://agent.test"
KEY = "api:chat"


class FakeArms:
    """An in-memory wake service: what reconcile armed."""

    def __init__(self) -> None:
        self.arms: dict[str, Arm] = {}
        self.up = True
        self.calls: list[str] = []

    def _check(self, call: str) -> None:
        self.calls.append(call)
        if not self.up:
            from agentcron.wake.arms import ArmError

            raise ArmError("the service is down")

    async def provision(self, job_id: str, fire_at: datetime, callback_url: str) -> str:
        self._check("provision")
        self.arms[job_id] = Arm(job_id, wire_time(fire_at), callback_url, f"s-{job_id}")
        return f"s-{job_id}"

    async def cancel(self, job_id: str) -> None:
        self._check("cancel")
        self.arms.pop(job_id, None)

    async def list(self) -> list[Arm]:
        self._check("list")
        return list(self.arms.values())

    async def aclose(self) -> None:
        return None


@dataclass
class World:
    cron: AgentCron
    wake: ManagedWake
    arms: FakeArms
    keys: SigningKeys
    http: httpx.AsyncClient
    clock: FakeClock

    def token(self, job_id: str, fire_at: datetime, **kw: object) -> str:
        return self.keys.mint(
            audience=AUD, issuer=ISS, job_id=job_id, fire_at=wire_text(fire_at), **kw
        )

    async def fire(
        self, job_id: str, fire_at: datetime, token: str | None = None
    ) -> httpx.Response:
        token = token or self.token(job_id, fire_at)
        return await self.http.post(
            "/api/cron/fire",
            json={"job_id": job_id, "fire_at": wire_text(fire_at)},
            headers={"Authorization": f"Bearer {token}"},
        )

    async def settle(self) -> None:
        """Reconcile and the engine both quiet."""
        for _ in range(200):
            await wait_settled(self.cron.engine)
            if not self.wake._dirty.is_set() and not any(
                t for t in self.wake._tasks if t.get_name() != "reconciler" and not t.done()
            ):
                break
        await wait_settled(self.cron.engine)


@pytest.fixture
async def world(
    make_cron: CronFactory, clock: FakeClock, tmp_path: Path, recorder: Recorder
) -> AsyncIterator[World]:
    keys = SigningKeys(tmp_path / "keys")
    keys.load_or_create()

    def jwks(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=keys.jwks())

    cron = await make_cron(start=False)
    cache = JwksCache(
        f"{ISS}/jwks.json", client=httpx.AsyncClient(transport=httpx.MockTransport(jwks))
    )
    arms = FakeArms()
    wake = ManagedWake(
        engine=cron.engine,
        catalog=cron.store,
        runs=cron.store,
        subscribe=cron.subscribe,
        clock=clock,
        arms=arms,
        verifier=RelayFireVerifier(cache, audience=AUD, issuer=ISS),
        callback_url=CALLBACK,
    )
    app = create_app(cron, token="api-token", wake=wake)
    wake.prepare()
    await cron.start()
    await wake.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=CALLBACK) as http:
        yield World(cron, wake, arms, keys, http, clock)
    await wake.stop()


async def wait_for(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def job(world: World, when: str = "every 10 seconds", **kw: object):  # type: ignore[no-untyped-def]
    if not await world.cron.sessions.list():
        await world.cron.sessions.create(KEY)
    return await world.cron.jobs.create(name="j", when=when, session_key=KEY, message="tick", **kw)  # type: ignore[arg-type]


async def test_reconcile_arms_changes_and_cancels(world: World) -> None:
    world.arms.arms["orphan"] = Arm("orphan", wire_time(world.clock.now()), CALLBACK)
    j = await job(world)
    await wait_for(lambda: j.id in world.arms.arms and "orphan" not in world.arms.arms, "arm")
    assert world.arms.arms[j.id].fire_at == wire_time(j.next_run_at)  # type: ignore[arg-type]
    assert world.arms.arms[j.id].callback_url == CALLBACK
    await world.cron.jobs.pause(j.id)
    await wait_for(lambda: j.id not in world.arms.arms, "cancel on pause")
    await world.cron.jobs.resume(j.id)
    await wait_for(lambda: j.id in world.arms.arms, "re-arm on resume")
    await world.cron.jobs.delete(j.id)
    await wait_for(lambda: j.id not in world.arms.arms, "cancel on delete")
    assert world.wake.status()["provider"] == "managed"


async def test_no_timer_a_delivered_fire_runs_once_and_re_arms(
    world: World, recorder: Recorder
) -> None:
    j = await job(world)
    due = wire_time(j.next_run_at)  # type: ignore[arg-type]
    await wait_for(lambda: j.id in world.arms.arms, "arm")
    world.clock.set(due + timedelta(seconds=5))
    await world.settle()
    assert recorder.triggers == []  # no timer: nothing fires on its own
    token = world.token(j.id, due)
    answer = await world.fire(j.id, due, token)
    assert answer.status_code == 202
    assert answer.json() == {"status": "accepted", "job_id": j.id}
    await wait_for(lambda: len(recorder.triggers) == 1, "the fire's turn")
    await world.settle()
    # re-armed for the next fire
    after = await world.cron.jobs.get(j.id)
    await wait_for(lambda: world.arms.arms[j.id].fire_at == wire_time(after.next_run_at), "re-arm")  # type: ignore[arg-type]
    # the same delivery again (a retry or a replay): accepted, runs no second time
    assert (await world.fire(j.id, due, token)).status_code == 202
    assert (await world.fire(j.id, due)).status_code == 202
    await wait_for(lambda: world.wake.fires["duplicate"] == 2, "duplicates recorded")
    await world.settle()
    runs = await world.cron.runs.list(j.id)
    assert [r.state for r in runs] == [RunState.SUCCEEDED]
    assert len(recorder.triggers) == 1
    # a fire for an instant the job never had: stale, dropped
    assert (await world.fire(j.id, due - timedelta(seconds=3))).status_code == 202
    await wait_for(lambda: world.wake.fires["stale"] == 1, "stale recorded")
    metrics = (await world.http.get("/metrics")).text
    assert 'agentcron_managed_fires_total{outcome="claimed"} 1.0' in metrics
    assert 'agentcron_managed_fires_total{outcome="duplicate"} 2.0' in metrics
    assert 'agentcron_wake_provider{configured="managed",provider="managed"} 1.0' in metrics


async def test_one_shot_fires_once_and_is_not_re_armed(world: World, recorder: Recorder) -> None:
    j = await job(world, when="in 30 seconds")
    due = wire_time(j.next_run_at)  # type: ignore[arg-type]
    await wait_for(lambda: j.id in world.arms.arms, "arm")
    world.clock.set(due)
    assert (await world.fire(j.id, due)).status_code == 202
    await wait_for(lambda: len(recorder.triggers) == 1, "the fire's turn")
    await world.settle()
    await wait_for(lambda: j.id not in world.arms.arms, "no arm left")
    assert (await world.fire(j.id, due)).status_code == 202
    await wait_for(lambda: world.wake.fires["duplicate"] == 1, "replay of a finished one-shot")
    assert len(recorder.triggers) == 1


async def test_a_job_at_its_run_limit_is_not_re_armed(world: World, recorder: Recorder) -> None:
    j = await job(world, max_runs=1)
    due = wire_time(j.next_run_at)  # type: ignore[arg-type]
    await wait_for(lambda: j.id in world.arms.arms, "arm")
    world.clock.set(due)
    assert (await world.fire(j.id, due)).status_code == 202
    await wait_for(lambda: len(recorder.triggers) == 1, "the fire's turn")
    await world.settle()
    await wait_for(lambda: j.id not in world.arms.arms, "no arm after the last run")
    world.clock.set(due + timedelta(seconds=10))
    assert (await world.fire(j.id, due + timedelta(seconds=10))).status_code == 202
    await wait_for(lambda: world.wake.fires["inactive"] == 1, "a fire past the limit dropped")
    assert len(recorder.triggers) == 1


async def test_bad_tokens_are_401_and_nothing_runs(world: World, recorder: Recorder) -> None:
    j = await job(world)
    due = wire_time(j.next_run_at)  # type: ignore[arg-type]
    world.clock.set(due)
    body = {"job_id": j.id, "fire_at": wire_text(due)}
    assert (await world.http.post("/api/cron/fire", json=body)).status_code == 401
    bad = {"Authorization": "Bearer not.a.token"}
    assert (await world.http.post("/api/cron/fire", json=body, headers=bad)).status_code == 401
    # the API token is no fire token
    api = {"Authorization": "Bearer api-token"}
    assert (await world.http.post("/api/cron/fire", json=body, headers=api)).status_code == 401
    other_job = await world.fire("01OTHER", due, world.token(j.id, due))  # body/claims mismatch
    assert other_job.status_code == 401
    token = {"Authorization": f"Bearer {world.token(j.id, due)}"}
    missing = await world.http.post(
        "/api/cron/fire", json={"fire_at": wire_text(due)}, headers=token
    )
    assert missing.status_code == 400
    await world.settle()
    assert recorder.triggers == []
    metrics = (await world.http.get("/metrics")).text
    assert 'agentcron_fire_webhook_requests_total{result="unauthorized:missing"} 1.0' in metrics
    assert 'agentcron_fire_webhook_requests_total{result="bad_request"} 1.0' in metrics
    ready = (await world.http.get("/readyz")).json()
    assert ready["wake"]["provider"] == "managed"


async def test_a_failed_reconcile_heals(world: World) -> None:
    world.arms.up = False
    j = await job(world)
    await wait_for(lambda: world.wake.reconciles["failed"] >= 1, "a failed reconcile")
    world.arms.up = True
    await wait_for(lambda: j.id in world.arms.arms, "healed by a retry")


def test_managed_without_its_settings_runs_local_and_says_why(make_cron: CronFactory) -> None:
    settings = WakeSettings(provider="managed", relay_url="http://relay.test")
    from agentcron.runtime.clock import SystemClock

    cron = AgentCron(db=":memory:")
    found = resolve(
        settings, engine=cron.engine, catalog=cron.store, runs=cron.store,
        subscribe=cron.subscribe, clock=SystemClock(),
    )  # fmt: skip
    assert isinstance(found, LocalWake)
    status = found.status()
    assert status["provider"] == "local"
    assert status["configured"] == "managed"
    assert "wake.relay_token" in status["reason"]
    assert "wake.audience" in status["reason"]
