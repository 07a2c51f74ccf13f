"""Event-fired jobs: a job's trigger (a per-job Standard Webhooks secret) runs it once per event
id through the same path as a manual run, with the event in the prompt; forgeries, replays,
old and new timestamps, oversized bodies, unknown jobs, disabled triggers and rotated secrets
fire nothing. Over REST and the library, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.domain.states import RunState
from agentcron.domain.triggers import (
    EventRequestError,
    TriggerNotFoundError,
    TriggerSignatureError,
)
from agentcron.limits import MAX_EVENT_BYTES
from agentcron.runtime.clock import SystemClock
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "websocket:abc"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    # The system clock: the signature library checks the timestamp against it too.
    return await make_cron(clock=SystemClock())


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


@pytest.fixture
async def sender(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    """The event's sender: no API token."""
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def signed(
    secret: str, event_id: str, body: str | bytes, at: datetime | None = None
) -> dict[str, str]:
    """The Standard Webhooks headers, signed with the library a sender would use."""
    at = at or datetime.now(UTC)
    data = body.decode() if isinstance(body, bytes) else body
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, at, data),
        "content-type": "application/json",
    }


async def a_job(api: httpx.AsyncClient) -> dict[str, Any]:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {
        "session_key": KEY,
        "name": "deploys",
        "message": "sum up the deploy",
        "when": "in 2 days",
    }
    return answer(await api.post("/api/jobs", json=body), 201)  # type: ignore[no-any-return]


async def test_an_event_runs_the_job_once_with_its_payload_in_the_prompt(
    api: httpx.AsyncClient, sender: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api)
    assert job["trigger"] is False
    key = answer(await api.post(f"/api/jobs/{job['id']}/trigger"), 201)
    assert key["secret"].startswith("whsec_")
    assert (key["path"], key["url"]) == (
        f"/hooks/jobs/{job['id']}",
        f"http://t/hooks/jobs/{job['id']}",
    )
    # On in the views, the secret in none of them.
    shown = answer(await api.get(f"/api/jobs/{job['id']}"))
    listed = answer(await api.get("/api/jobs"))
    assert shown["trigger"] is True
    assert listed["jobs"][0]["trigger"] is True
    assert key["secret"] not in json.dumps(shown) + json.dumps(listed)
    assert key["secret"] not in repr(await cron.jobs.get(job["id"]))

    body = json.dumps({"type": "deploy.finished", "data": {"service": "api", "sha": "abc123"}})
    posted = await sender.post(
        key["path"], content=body, headers=signed(key["secret"], "msg_1", body)
    )
    accepted = answer(posted, 202)
    assert (accepted["job_id"], accepted["event_id"], accepted["duplicate"]) == (
        job["id"],
        "msg_1",
        False,
    )
    await wait_settled(cron.engine)
    run = answer(await api.get(f"/api/runs/{accepted['run_id']}"))
    assert (run["state"], run["trigger"], run["event_id"], run["manual"]) == (
        "succeeded",
        "event",
        "msg_1",
        False,
    )
    assert run["event"] == body
    assert body in run["prompt"]
    assert "msg_1" in run["prompt"]
    assert run["prompt_ref"]["id"] == "cron.agent_turn.event"
    assert "event" not in run["prompt_vars"]  # kept once, on the run
    (fired,) = recorder.triggers
    assert (fired.event_id, fired.event) == ("msg_1", body)
    # The trigger entry says an event fired it.
    messages = answer(await api.get(f"/api/sessions/{KEY}/messages"))["messages"]
    assert messages[-2]["meta"]["event_id"] == "msg_1"

    # The same id again (a sender's retry signs anew): the first run, nothing fired.
    again = await sender.post(
        key["path"], content=body, headers=signed(key["secret"], "msg_1", body)
    )
    repeated = answer(again, 200)
    assert (repeated["run_id"], repeated["duplicate"], repeated["state"]) == (
        accepted["run_id"],
        True,
        "succeeded",
    )
    await wait_settled(cron.engine)
    assert len(recorder.triggers) == 1
    assert [r.id for r in await cron.runs.list(job["id"])] == [accepted["run_id"]]
    # The schedule did not move.
    after = answer(await api.get(f"/api/jobs/{job['id']}"))
    assert after["next_run_at"] == job["next_run_at"]
    assert after["run_count"] == job["run_count"]


async def test_forgeries_and_bad_requests_are_refused_and_fire_nothing(
    api: httpx.AsyncClient, sender: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api)
    path = f"/hooks/jobs/{job['id']}"
    body = '{"n": 1}'
    # Off: 404, the same answer as for no job at all.
    off = answer(
        await sender.post(path, content=body, headers=signed("whsec_" + "A" * 44, "e", body)), 404
    )
    missing = await sender.post("/hooks/jobs/01NOSUCHJOB", content=body)
    assert missing.status_code == 404
    assert off["detail"].replace(job["id"], "X") == missing.json()["detail"].replace(
        "01NOSUCHJOB", "X"
    )
    secret = answer(await api.post(f"/api/jobs/{job['id']}/trigger"), 201)["secret"]
    now = datetime.now(UTC)

    cases: list[tuple[str, int, str | bytes, dict[str, str]]] = [
        ("no headers", 400, body, {}),
        ("wrong secret", 401, body, signed("whsec_" + "B" * 44, "e1", body)),
        (
            "forged signature",
            401,
            body,
            signed(secret, "e2", body) | {"webhook-signature": "v1,Zm9yZ2VkIHNpZ25hdHVyZQ=="},
        ),
        (
            "garbage signature",
            401,
            body,
            signed(secret, "e3", body) | {"webhook-signature": "garbage"},
        ),
        ("body changed after signing", 401, '{"n": 2}', signed(secret, "e4", body)),
        ("old timestamp", 400, body, signed(secret, "e5", body, now - timedelta(minutes=6))),
        ("new timestamp", 400, body, signed(secret, "e6", body, now + timedelta(minutes=6))),
        ("bad timestamp", 400, body, signed(secret, "e7", body) | {"webhook-timestamp": "soon"}),
        ("id too long", 400, body, signed(secret, "x" * 201, body)),
        ("not JSON", 400, "not json", signed(secret, "e8", "not json")),
        ("NaN", 400, '{"n": NaN}', signed(secret, "e9", '{"n": NaN}')),
    ]
    big = json.dumps({"pad": "x" * MAX_EVENT_BYTES})
    cases.append(("too big", 413, big, signed(secret, "e10", big)))
    for name, status, content, headers in cases:
        response = await sender.post(path, content=content, headers=headers)
        assert response.status_code == status, (name, response.text)
        assert response.json()["error"] in {"invalid_request", "unauthorized", "too_large"}, name
    # Rotation: the old secret is refused from now on, the new one fires.
    rotated = answer(await api.post(f"/api/jobs/{job['id']}/trigger/rotate"))["secret"]
    assert rotated != secret
    old = await sender.post(path, content=body, headers=signed(secret, "r1", body))
    assert old.status_code == 401
    ok = answer(await sender.post(path, content=body, headers=signed(rotated, "r1", body)), 202)
    # A paused job's events run nothing (409), and enabling twice is a conflict.
    answer(await api.post(f"/api/jobs/{job['id']}/pause"))
    paused = await sender.post(path, content=body, headers=signed(rotated, "r2", body))
    assert paused.status_code == 409
    assert answer(await api.post(f"/api/jobs/{job['id']}/trigger"), 409)["error"] == "conflict"
    # Disabled: 404 again, even with the secret that worked.
    assert answer(await api.delete(f"/api/jobs/{job['id']}/trigger"))["enabled"] is False
    gone = await sender.post(path, content=body, headers=signed(rotated, "r3", body))
    assert gone.status_code == 404
    assert answer(await api.post(f"/api/jobs/{job['id']}/trigger/rotate"), 409)
    await wait_settled(cron.engine)
    # One run only: the rotated secret's event.
    assert [r.id for r in await cron.runs.list(job["id"])] == [ok["run_id"]]
    assert [t.event_id for t in recorder.triggers] == ["r1"]


async def test_an_event_waits_behind_an_open_turn_and_a_delivery_job_gets_it(
    cron: AgentCron, recorder: Recorder
) -> None:
    await cron.sessions.create(KEY)
    bound = await cron.jobs.create(name="bound", when="in 2 days", message="b", session_key=KEY)
    blocker = await cron.jobs.create(name="blocker", when="in 2 days", message="w", session_key=KEY)
    delivery = await cron.jobs.create(name="report", when="in 2 days", message="report")
    keys = {j.id: await cron.triggers.enable(j.id) for j in (bound, delivery)}
    busy, gate = asyncio.Event(), asyncio.Event()

    async def hold(trigger: Trigger) -> str:
        if trigger.job_name == "blocker":
            busy.set()
            await gate.wait()
        return f"done: {trigger.job_name}"

    recorder.result = hold
    await cron.runs.run_now(blocker.id)
    await busy.wait()
    body = b'{"ticket": 7}'
    event = await cron.triggers.deliver(bound.id, signed(keys[bound.id].secret, "t1", body), body)
    await wait_settled(cron.engine, busy_ok=True)
    assert (await cron.runs.get(event.run_id)).state is RunState.DEFERRED
    gate.set()
    report = await cron.triggers.deliver(
        delivery.id, signed(keys[delivery.id].secret, "t1", body), body
    )  # the same id on another job is another event
    assert not report.duplicate
    await wait_settled(cron.engine)
    done = await cron.runs.get(event.run_id)
    assert (done.state, done.event) == (RunState.SUCCEEDED, body.decode())
    assert done.deferred_at is not None
    isolated = await cron.runs.get(report.run_id)
    assert isolated.state is RunState.SUCCEEDED
    by_job = {t.job_name: t for t in recorder.triggers}
    assert (by_job["report"].event_id, by_job["report"].event) == ("t1", body.decode())


async def test_two_processes_given_the_same_event_id_fire_it_once(
    make_cron: CronFactory, recorder: Recorder
) -> None:
    """Two replicas receive one event at the same moment: the seen-id insert decides."""
    first = await make_cron(clock=SystemClock())
    second = await make_cron(clock=SystemClock())
    await first.sessions.create(KEY)
    job = await first.jobs.create(name="j", when="in 2 days", message="m", session_key=KEY)
    secret = (await first.triggers.enable(job.id)).secret
    for n in range(5):
        body = json.dumps({"n": n}).encode()
        headers = signed(secret, f"dup-{n}", body)
        a, b = await asyncio.gather(
            first.triggers.deliver(job.id, headers, body),
            second.triggers.deliver(job.id, headers, body),
        )
        assert a.run_id == b.run_id
        assert sorted([a.duplicate, b.duplicate]) == [False, True]
    runs = await first.runs.list(job.id)
    assert sorted(r.event_id or "" for r in runs) == [f"dup-{n}" for n in range(5)]


async def test_seen_ids_are_pruned_after_they_are_kept(cron: AgentCron) -> None:
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(name="j", when="in 2 days", message="m", session_key=KEY)
    secret = (await cron.triggers.enable(job.id)).secret
    body = b"[1, 2]"
    first = await cron.triggers.deliver(job.id, signed(secret, "p1", body), body)
    assert (await cron.triggers.deliver(job.id, signed(secret, "p1", body), body)).duplicate
    # Pruned with the runs once past their keeping time: the id is new again.
    later = datetime.now(UTC) + timedelta(days=4)
    await cron.store.prune_runs(later, keep_per_job=100, max_age=timedelta(days=30))
    again = await cron.triggers.deliver(job.id, signed(secret, "p1", body), body)
    assert not again.duplicate
    assert again.run_id != first.run_id
    with pytest.raises(TriggerNotFoundError):
        await cron.triggers.deliver("01NOSUCHJOB", signed(secret, "p2", body), body)
    with pytest.raises(EventRequestError):
        await cron.triggers.deliver(job.id, {}, body)


async def test_the_timestamp_is_held_against_the_injected_clock(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    """A fake clock's events verify at its time (the library does not read the system clock
    again); the system clock's time is as far off as it is from the fake one.
    """
    cron = await make_cron()  # the fake clock
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(name="j", when="in 2 days", message="m", session_key=KEY)
    secret = (await cron.triggers.enable(job.id)).secret
    body = b"{}"
    taken = await cron.triggers.deliver(job.id, signed(secret, "c1", body, clock.now()), body)
    assert not taken.duplicate
    assert abs(datetime.now(UTC) - clock.now()) > timedelta(minutes=10)
    with pytest.raises(EventRequestError, match="too"):
        await cron.triggers.deliver(job.id, signed(secret, "c2", body), body)
    with pytest.raises(TriggerSignatureError):  # the signature still counts
        await cron.triggers.deliver(
            job.id, signed("whsec_" + "C" * 44, "c3", body, clock.now()), body
        )
    await wait_settled(cron.engine)
    assert (await cron.runs.get(taken.run_id)).state is RunState.SUCCEEDED
