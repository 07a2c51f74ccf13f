"""The HTTP API over a real AgentCron (fake clock, offline model): contract paths, auth, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.domain.jobs import JobKind, NewJob
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory

TOKEN = "test-token"
HOOK = "hook-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "websocket:abc"
MIN = timedelta(minutes=1)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron(runner=None, model=OfflineModel(0))


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token=HOOK)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def new_session(api: httpx.AsyncClient, key: str = KEY, **kw: Any) -> dict[str, Any]:
    return await ok(await api.post("/api/sessions", json={"key": key, **kw}), 201)


async def test_auth_is_required_and_errors_say_what_to_do(api: httpx.AsyncClient) -> None:
    bare = await api.get("/api/sessions", headers={"Authorization": ""})
    assert bare.status_code == 401
    assert bare.json()["error"] == "unauthorized"
    assert "Authorization: Bearer <token>" in bare.json()["detail"]
    wrong = await api.get("/api/sessions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["detail"].startswith("wrong token")
    # health, readiness and metrics need no token
    assert (await api.get("/healthz", headers={"Authorization": ""})).json() == {"status": "ok"}
    ready = await ok(await api.get("/readyz"))
    wake = {"provider": "local", "configured": "local", "reason": None}  # which wake is active
    assert ready == {"status": "ready", "problems": [], "wake": wake}
    metrics = await api.get("/metrics", headers={"Authorization": ""})
    assert "agentcron_fires_total" in metrics.text
    assert "agentcron_fire_lateness_seconds_bucket" in metrics.text
    assert (await api.get("/docs")).status_code == 200
    assert "/api/jobs" in (await ok(await api.get("/openapi.json")))["paths"]


async def test_a_chat_turn_through_the_api_and_the_transcript_page(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    created = await new_session(api, tz="Europe/Berlin")
    assert (created["key"], created["channel"], created["chat_id"]) == (KEY, "websocket", "abc")
    sent = await ok(
        await api.post(f"/api/sessions/{KEY}/messages", json={"content": "hello there"}), 202
    )
    turn = await ok(await api.get(f"/api/turns/{sent['turn_id']}", params={"wait": 10}))
    assert turn["state"] == "succeeded"
    assert turn["reply"].startswith("(offline model) You said")
    page = await ok(await api.get(f"/api/sessions/{KEY}/messages", params={"limit": 1}))
    assert [m["role"] for m in page["messages"]] == ["user"]
    rest = await ok(
        await api.get(f"/api/sessions/{KEY}/messages", params={"after": page["next_after"]})
    )
    assert [m["role"] for m in rest["messages"]] == ["assistant"]
    assert rest["messages"][0]["meta"]["turn_id"] == sent["turn_id"]
    listed = await ok(await api.get("/api/sessions"))
    (session,) = listed["sessions"]
    assert session["title"] == "hello there"  # named after its first message
    assert (session["automations"], session["has_recall"]) == (0, False)


async def test_jobs_contract_create_list_show_patch_pause_resume_delete(
    api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock
) -> None:
    await new_session(api, tz="Europe/Berlin")
    body = {
        "session_key": KEY,
        "name": "build",
        "message": "check it",
        "when": "every weekday at 9",
    }
    job = await ok(await api.post("/api/jobs", json=body), 201)
    assert job["schedule"] == "every weekday at 09:00 (Europe/Berlin)"  # the session's zone
    assert job["next_run_at"] == "2026-11-23T08:00:00Z"
    assert job["spec"] == {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Berlin"}
    shown = await ok(await api.get(f"/api/jobs/{job['id']}"))
    assert shown["upcoming"] == [
        "2026-11-23T08:00:00Z",
        "2026-11-24T08:00:00Z",
        "2026-11-25T08:00:00Z",
        "2026-11-26T08:00:00Z",
        "2026-11-27T08:00:00Z",
    ]
    assert shown["runs"] == []
    assert shown["usage"]["counted"] == 0
    listed = await ok(await api.get("/api/jobs", params={"session_key": KEY}))
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    assert (await ok(await api.get("/api/jobs", params={"kind": "recall"})))["jobs"] == []
    patched = await ok(
        await api.patch(f"/api/jobs/{job['id']}", json={"when": "every 2h", "overlap": "skip"})
    )
    assert patched["schedule"] == "every 2 hours"
    assert patched["policy"]["overlap"] == "skip"
    paused = await ok(await api.post(f"/api/jobs/{job['id']}/pause"))
    assert (paused["enabled"], paused["next_run_at"]) == (False, None)
    resumed = await ok(await api.patch(f"/api/jobs/{job['id']}", json={"enabled": True}))
    assert resumed["enabled"] is True
    assert resumed["next_run_at"] is not None
    assert await ok(await api.delete(f"/api/jobs/{job['id']}")) == {"deleted": job["id"]}
    gone = await api.get(f"/api/jobs/{job['id']}")
    assert (gone.status_code, gone.json()["error"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"when": "whenever"}, 422, "cannot read 'whenever' as a time; accepted forms"),
        ({"when": "2020-01-01T09:00"}, 422, "a one-shot time must be in the future"),
        ({"when": "in 1h", "tz": "Mars/Olympus"}, 422, "unknown time zone 'Mars/Olympus'"),
        ({"when": ""}, 422, "when: String should have at least 1 character"),
        ({"overlap": "sometimes"}, 422, "overlap: Input should be 'defer', 'skip' or"),
        ({"session_key": "websocket:nope"}, 404, "create it first with POST /api/sessions"),
        ({"end_at": "2027-01-01T00:00:00"}, 422, "end_at needs a UTC offset"),
    ],
)
async def test_bad_job_requests_say_what_is_accepted_and_create_nothing(
    api: httpx.AsyncClient, cron: AgentCron, body: dict[str, Any], status: int, detail: str
) -> None:
    await new_session(api)
    full = {"session_key": KEY, "name": "n", "message": "m", "when": "in 1h", **body}
    response = await api.post("/api/jobs", json=full)
    assert response.status_code == status, response.text
    shown = response.json()["detail"]
    text = " | ".join(shown) if isinstance(shown, list) else shown
    assert detail in text
    assert await cron.jobs.list() == []


async def test_a_fire_shows_in_runs_and_the_full_run_record(
    api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock
) -> None:
    await new_session(api)
    body = {"session_key": KEY, "name": "digest", "message": "sum up", "when": "in 1m"}
    job = await ok(await api.post("/api/jobs", json=body), 201)
    clock.advance(MIN)
    await wait_settled(cron.engine)
    (run,) = (await ok(await api.get(f"/api/jobs/{job['id']}/runs")))["runs"]
    assert run["state"] == "succeeded"
    assert "prompt" not in run  # the list is light; the full record has it
    full = await ok(await api.get(f"/api/runs/{run['id']}", params={"wait": 1}))
    assert "[scheduled]" in full["prompt"]
    assert full["prompt_vars"]["job_name"] == "digest"
    assert full["usage"]["model"] == "offline"
    assert [r["id"] for r in (await ok(await api.get(f"/api/sessions/{KEY}/runs")))["runs"]] == [
        run["id"]
    ]
    # the fire counted, its lateness observed (it started on time on the fake clock)
    metrics = (await api.get("/metrics")).text
    assert "agentcron_fires_total 1.0" in metrics
    assert 'agentcron_runs_finished_total{state="succeeded"} 1.0' in metrics
    assert 'agentcron_fire_lateness_seconds_bucket{le="0.001"} 1.0' in metrics
    assert 'agentcron_queue_depth{queue="turns_waiting"} 0.0' in metrics
    assert 'agentcron_queue_depth{queue="awaiting_slot"} 0.0' in metrics
    assert "agentcron_signals_heard_total 0.0" in metrics  # no other process on its database
    assert "agentcron_turns_in_runner 0.0" in metrics
    bad = await api.get(f"/api/runs/{run['id']}", params={"wait": 1000})
    assert bad.status_code == 422
    assert "wait: Input should be less than or equal to 120" in bad.json()["detail"][0]


async def test_recall_endpoints(api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock) -> None:
    await new_session(api)
    none = await ok(await api.get(f"/api/sessions/{KEY}/recall"))
    assert none == {"recall": None}
    missing = await api.delete(f"/api/sessions/{KEY}/recall")
    assert (missing.status_code, missing.json()["detail"]) == (
        404,
        "session 'websocket:abc' has no pending recall",
    )
    sent = await ok(
        await api.post(
            f"/api/sessions/{KEY}/messages",
            json={"content": "follow up every 10 minutes and check the logs"},
        ),
        202,
    )
    await ok(await api.get(f"/api/turns/{sent['turn_id']}", params={"wait": 10}))
    recall = (await ok(await api.get(f"/api/sessions/{KEY}/recall")))["recall"]
    assert recall["kind"] == "recall"
    assert recall["next_run_at"] == "2026-11-22T12:10:00Z"
    skipped = (await ok(await api.post(f"/api/sessions/{KEY}/recall/skip")))["recall"]
    assert skipped["next_run_at"] == "2026-11-22T12:20:00Z"
    sessions = (await ok(await api.get("/api/sessions")))["sessions"]
    assert sessions[0]["has_recall"] is True
    assert await ok(await api.delete(f"/api/sessions/{KEY}/recall")) == {"cancelled": recall["id"]}
    assert await cron.jobs.list() == []


async def test_session_delete_is_two_step(api: httpx.AsyncClient, cron: AgentCron) -> None:
    await new_session(api)
    body = {"session_key": KEY, "name": "monitor", "message": "m", "when": "every 1h"}
    job = await ok(await api.post("/api/jobs", json=body), 201)
    blocked = await ok(await api.delete(f"/api/sessions/{KEY}"))
    assert blocked == {
        "deleted": False,
        "blocked_by_automations": True,
        "automations": [{"id": job["id"], "name": "monitor", "enabled": True}],
    }
    assert (await api.get(f"/api/sessions/{KEY}")).status_code == 200  # nothing lost
    done = await ok(await api.delete(f"/api/sessions/{KEY}", params={"confirm": "true"}))
    assert done == {"deleted": True, "deleted_automations": [job["id"]]}
    assert (await api.get(f"/api/sessions/{KEY}")).status_code == 404


async def test_system_jobs_are_protected_and_legacy_jobs_are_listed(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    system = await cron.system.ensure("heartbeat", "every 30m")
    refused = await api.delete(f"/api/jobs/{system.id}")
    assert (refused.status_code, refused.json()["error"]) == (403, "protected")
    (legacy,) = await cron.jobs.create_many(
        [NewJob(name="old", spec=system.spec, deliver=True, channel="telegram", to="1")]
    )
    listed = (await ok(await api.get("/api/jobs", params={"kind": "agent_turn"})))["jobs"]
    assert [(j["id"], j["legacy"]) for j in listed] == [(legacy.id, True)]
    assert JobKind.SYSTEM_EVENT.value in {
        j["kind"] for j in (await ok(await api.get("/api/jobs")))["jobs"]
    }


async def test_stop_and_the_inbound_hook(
    api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock
) -> None:
    unknown = await api.post(f"/api/sessions/{KEY}/stop")
    assert unknown.status_code == 404
    await new_session(api)
    idle = await ok(await api.post(f"/api/sessions/{KEY}/stop"))
    assert idle == {"stopped": False, "turn_id": None}
    no_hook = await api.post("/hooks/agent", json={"session_key": KEY, "content": "x"})
    assert no_hook.status_code == 401  # the API token is not the hook token
    hooked = await api.post(
        "/hooks/agent",
        json={"session_key": "hook:ci", "content": "every day at 7 check the nightly build"},
        headers={"Authorization": f"Bearer {HOOK}"},
    )
    assert hooked.status_code == 202, hooked.text
    turn = await ok(await api.get(f"/api/turns/{hooked.json()['turn_id']}", params={"wait": 10}))
    assert (turn["source"], turn["state"]) == ("hook", "succeeded")
    (job,) = await cron.jobs.list()
    assert job.session_key == "hook:ci"  # the hook's message was a normal turn of its session


async def test_unified_mode_binds_form_jobs_to_the_unified_session(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(runner=None, model=OfflineModel(0), unified_session=True)
    app = create_app(cron, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=AUTH
    ) as api:
        await new_session(api, "websocket:a")
        await new_session(api, "websocket:b")
        body = {"session_key": "websocket:a", "name": "news", "message": "m", "when": "every 1h"}
        job = await ok(await api.post("/api/jobs", json=body), 201)
        assert job["session_key"] == "unified:default"
        from_b = await ok(await api.get("/api/jobs", params={"session_key": "websocket:b"}))
        assert [j["id"] for j in from_b["jobs"]] == [job["id"]]
        sessions = {s["key"]: s for s in (await ok(await api.get("/api/sessions")))["sessions"]}
        assert sessions["websocket:b"]["automations"] == 1
        deleted = await ok(await api.delete("/api/sessions/websocket:a"))
        assert deleted == {"deleted": True, "deleted_automations": []}
        assert await cron.jobs.get(job["id"])


async def test_the_ui_is_served_without_the_token(api: httpx.AsyncClient) -> None:
    page = await api.get("/", headers={"Authorization": ""})
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
    assert TOKEN not in page.text  # the UI gets the token through a login step


async def test_created_at_is_reported_in_utc(api: httpx.AsyncClient) -> None:
    created = await new_session(api)
    assert created["created_at"] == T0.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize("when", ["every 1 second", "every 10 seconds", "* * * * *", "every 4m"])
async def test_the_api_holds_schedules_to_the_minimum_interval(
    api: httpx.AsyncClient, when: str
) -> None:
    await new_session(api)
    body = {"session_key": KEY, "name": "often", "message": "m", "when": when}
    refused = await api.post("/api/jobs", json=body)
    assert refused.status_code == 422, refused.text
    assert "may run at most every 5 minutes (engine.min_interval)" in refused.text
    job = await ok(await api.post("/api/jobs", json={**body, "when": "every 5m"}), 201)
    changed = await api.patch(f"/api/jobs/{job['id']}", json={"when": when})
    assert changed.status_code == 422, changed.text
    assert "may run at most every 5 minutes" in changed.text
    kept = await ok(await api.get(f"/api/jobs/{job['id']}"))
    assert kept["schedule"].startswith("every 5 minutes")  # unchanged


async def test_an_operator_may_lower_the_minimum_interval(make_cron: CronFactory) -> None:
    from dataclasses import replace

    from agentcron.config.engine import EngineSettings

    lowered = replace(EngineSettings(), min_interval=timedelta(seconds=1))
    cron = await make_cron(runner=None, model=OfflineModel(0), settings=lowered)
    app = create_app(cron, token=TOKEN, hook_token=HOOK)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as api:
        await new_session(api)
        body = {"session_key": KEY, "name": "often", "message": "m", "when": "every 1 second"}
        await ok(await api.post("/api/jobs", json=body), 201)
        cron_minutely = await ok(
            await api.post("/api/jobs", json={**body, "when": "* * * * *"}), 201
        )
        assert cron_minutely["schedule"].startswith("every minute")
