"""The lists of the HTTP API in pages (issue 28): the run history across jobs, cursors on the
sessions, jobs, runs, messages and approvals, the usage per day; on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.server import create_app
from agentcron.store import new_id
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory

AUTH = {"Authorization": "Bearer t"}
MIN = timedelta(minutes=1)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron(runner=None, model=OfflineModel(0))


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(cron, token="t"))
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def walk(
    api: httpx.AsyncClient, path: str, name: str, **params: Any
) -> list[list[dict[str, Any]]]:
    """Every page of a list, following next_cursor to the end."""
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        ask = params if cursor is None else {**params, "cursor": cursor}
        page = await ok(await api.get(path, params=ask))
        pages.append(page[name])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert page[name], "a page with a next cursor is never empty"


async def add_job(api: httpx.AsyncClient, key: str, name: str) -> dict[str, Any]:
    body = {"session_key": key, "name": name, "message": f"do {name}", "when": "every day at 9"}
    return await ok(await api.post("/api/jobs", json=body), 201)


async def test_run_history_across_jobs_with_names_filters_and_cursor(
    api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock
) -> None:
    await ok(await api.post("/api/sessions", json={"key": "api:a"}), 201)
    await ok(await api.post("/api/sessions", json={"key": "api:b"}), 201)
    ping = await add_job(api, "api:a", "ping")
    pong = await add_job(api, "api:b", "pong")
    fired: list[str] = []
    for job in (ping, pong, ping, pong, ping):  # manual runs, one at a time, a minute apart
        fired.append((await ok(await api.post(f"/api/jobs/{job['id']}/run"), 202))["id"])
        await wait_settled(cron.engine)
        clock.advance(MIN)
    pages = await walk(api, "/api/runs", "runs", limit=2)
    assert [len(p) for p in pages] == [2, 2, 1]
    runs = [r for p in pages for r in p]
    assert [r["id"] for r in runs] == fired[::-1]  # newest first, each once
    assert [r["job_name"] for r in runs] == ["ping", "pong", "ping", "pong", "ping"]
    assert {r["state"] for r in runs} == {"succeeded"}
    of_b = await ok(await api.get("/api/runs", params={"session_key": "api:b"}))
    assert [r["id"] for r in of_b["runs"]] == [fired[3], fired[1]]
    assert of_b["next_cursor"] is None
    of_ping = await ok(await api.get("/api/runs", params={"job_id": ping["id"], "limit": 50}))
    assert [r["id"] for r in of_ping["runs"]] == [fired[4], fired[2], fired[0]]
    since = (T0 + 2 * MIN).isoformat()
    recent = await ok(await api.get("/api/runs", params={"since": since}))
    assert [r["id"] for r in recent["runs"]] == fired[:1:-1]
    naive = await api.get("/api/runs", params={"since": "2026-11-22T12:02:00"})
    assert naive.status_code == 422
    assert "since needs a zone" in naive.json()["detail"]
    none = await ok(await api.get("/api/runs", params={"state": ["failed", "missed"]}))
    assert none == {"runs": [], "next_cursor": None}
    # the job's and the session's own run lists page the same way
    job_pages = await walk(api, f"/api/jobs/{ping['id']}/runs", "runs", limit=1)
    assert [p[0]["id"] for p in job_pages] == [fired[4], fired[2], fired[0]]
    session_pages = await walk(api, "/api/sessions/api:a/runs", "runs", limit=2)
    assert [r["id"] for p in session_pages for r in p] == [fired[4], fired[2], fired[0]]
    # a deleted job's runs keep its name, and its id still filters
    assert await ok(await api.delete(f"/api/jobs/{pong['id']}")) == {"deleted": pong["id"]}
    kept = await ok(await api.get("/api/runs", params={"job_id": pong["id"]}))
    assert [(r["id"], r["job_name"]) for r in kept["runs"]] == [
        (fired[3], "pong"),
        (fired[1], "pong"),
    ]
    assert len((await ok(await api.get(f"/api/jobs/{pong['id']}/runs")))["runs"]) == 2


async def test_unknown_job_or_session_is_404_not_an_empty_list(api: httpx.AsyncClient) -> None:
    for path, params in [
        ("/api/runs", {"job_id": "01NOSUCHJOB"}),
        ("/api/runs", {"session_key": "api:nobody"}),
        ("/api/jobs/01NOSUCHJOB/runs", {}),
        ("/api/sessions/api:nobody/runs", {}),
        ("/api/usage", {"job_id": "01NOSUCHJOB"}),
        ("/api/usage", {"session_key": "api:nobody"}),
    ]:
        answer = await api.get(path, params=params)
        assert answer.status_code == 404, (path, params, answer.text)
        assert answer.json()["error"] == "not_found"


async def test_a_bad_cursor_is_422_on_every_list(api: httpx.AsyncClient) -> None:
    await ok(await api.post("/api/sessions", json={"key": "api:a"}), 201)
    await ok(await api.post("/api/sessions", json={"key": "api:b"}), 201)
    first = await ok(await api.get("/api/sessions", params={"limit": 1}))
    sessions_cursor = first["next_cursor"]
    assert isinstance(sessions_cursor, str)
    lists = [
        "/api/runs",
        "/api/sessions",
        "/api/jobs",
        "/api/approvals",
        "/api/sessions/api:a/messages",
        "/api/sessions/api:a/runs",
    ]
    for path in lists:
        for cursor in ("not-ours", "e30", "x" * 3000):
            answer = await api.get(path, params={"cursor": cursor})
            assert answer.status_code == 422, (path, cursor, answer.text)
        if path != "/api/sessions":  # another list's cursor is not this one's
            answer = await api.get(path, params={"cursor": sessions_cursor})
            assert answer.status_code == 422, (path, answer.text)
            assert "pass next_cursor as it is" in answer.text
        for limit in (0, 201):
            assert (await api.get(path, params={"limit": limit})).status_code == 422


async def test_sessions_with_one_update_time_are_each_listed_once(
    api: httpx.AsyncClient,
) -> None:
    keys = [f"api:s{i}" for i in range(7)]
    for key in keys:  # the fake clock stands still: every session has the same updated_at
        await ok(await api.post("/api/sessions", json={"key": key, "title": f"Chat {key}"}), 201)
    pages = await walk(api, "/api/sessions", "sessions", limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [s["key"] for p in pages for s in p] == sorted(keys, reverse=True)
    found = await ok(await api.get("/api/sessions", params={"q": "CHAT API:S3"}))
    assert [s["key"] for s in found["sessions"]] == ["api:s3"]
    by_key = await ok(await api.get("/api/sessions", params={"q": "s5"}))
    assert [s["key"] for s in by_key["sessions"]] == ["api:s5"]
    literal = await ok(await api.get("/api/sessions", params={"q": "%"}))  # not a wildcard
    assert literal["sessions"] == []
    default = await ok(await api.get("/api/sessions"))
    assert len(default["sessions"]) == 7
    assert default["next_cursor"] is None


async def test_jobs_page_oldest_first_and_per_session(api: httpx.AsyncClient) -> None:
    await ok(await api.post("/api/sessions", json={"key": "api:a"}), 201)
    ids = [(await add_job(api, "api:a", f"j{i}"))["id"] for i in range(5)]
    pages = await walk(api, "/api/jobs", "jobs", limit=2)
    assert [j["id"] for p in pages for j in p] == ids
    mine = await walk(api, "/api/jobs", "jobs", limit=4, session_key="api:a")
    assert [len(p) for p in mine] == [4, 1]
    assert [j["name"] for p in mine for j in p] == [f"j{i}" for i in range(5)]


async def test_messages_read_on_and_back(api: httpx.AsyncClient, cron: AgentCron) -> None:
    await ok(await api.post("/api/sessions", json={"key": "api:a"}), 201)
    for i in range(7):
        await cron.sessions.note("api:a", f"note {i}")
    path = "/api/sessions/api:a/messages"
    on = await walk(api, path, "messages", limit=3)
    assert [[m["seq"] for m in p] for p in on] == [[1, 2, 3], [4, 5, 6], [7]]
    after = await ok(await api.get(path, params={"after": 5}))
    assert ([m["seq"] for m in after["messages"]], after["next_after"]) == ([6, 7], 7)
    back = await walk(api, path, "messages", limit=3, before=2**53)
    assert [[m["seq"] for m in p] for p in back] == [[5, 6, 7], [2, 3, 4], [1]]
    older = await ok(await api.get(path, params={"before": 3}))
    assert [m["seq"] for m in older["messages"]] == [1, 2]
    both = await api.get(path, params={"after": 1, "before": 3})
    assert both.status_code == 422


async def test_approvals_page_pending_oldest_first_all_newest_first(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    records = cron.store.approvals
    made = []
    for i, minutes in enumerate([0, 0, 1, 2, 3]):  # two at T0: the id breaks the tie
        at = T0 + minutes * MIN
        approval = Approval(new_id(), "api:a", None, "tool", {"i": i}, at, at + 60 * MIN)
        made.append(await records.insert(approval))
    decided = await records.update_if_pending(
        replace(made[1], state=ApprovalState.EXPIRED, decided_by="timeout", decided_at=T0)
    )
    assert decided is not None
    order = sorted(made, key=lambda a: (a.requested_at, a.id))
    pending = await walk(api, "/api/approvals", "approvals", limit=2)
    assert [a["id"] for p in pending for a in p] == [a.id for a in order if a.id != made[1].id]
    every = await walk(api, "/api/approvals", "approvals", limit=2, all="true")
    assert [a["id"] for p in every for a in p] == [a.id for a in reversed(order)]


async def test_usage_per_day_sums_turns_and_runs(
    api: httpx.AsyncClient, cron: AgentCron, clock: FakeClock
) -> None:
    await ok(await api.post("/api/sessions", json={"key": "api:a"}), 201)
    ping = await add_job(api, "api:a", "ping")
    sent = await ok(await api.post("/api/sessions/api:a/messages", json={"content": "hi"}), 202)
    await wait_settled(cron.engine)
    clock.advance(timedelta(hours=13))  # the next day (UTC), before the job's own 9:00
    await ok(await api.post(f"/api/jobs/{ping['id']}/run"), 202)
    await wait_settled(cron.engine)
    turns = [await ok(await api.get(f"/api/turns/{t['id']}")) for t in await turns_of(api)]
    assert sent["turn_id"] in {t["id"] for t in turns}
    tokens_in = sum(t["usage"]["input_tokens"] for t in turns)
    tokens_out = sum(t["usage"]["output_tokens"] for t in turns)
    assert tokens_in > 0
    usage = await ok(await api.get("/api/usage", params={"session_key": "api:a"}))
    day0, day1 = T0.date().isoformat(), (T0 + timedelta(days=1)).date().isoformat()
    rows = [(d["day"], d["job_name"], d["runs"], d["turns"]) for d in usage["days"]]
    assert rows == [(day0, None, 0, 1), (day1, "ping", 1, 1)]
    total = usage["total"]
    assert (total["runs"], total["turns"]) == (1, 2)
    assert (total["input_tokens"], total["output_tokens"]) == (tokens_in, tokens_out)
    assert sum(d["input_tokens"] for d in usage["days"]) == tokens_in
    of_job = await ok(await api.get("/api/usage", params={"job_id": ping["id"]}))
    assert [(d["day"], d["runs"], d["turns"]) for d in of_job["days"]] == [(day1, 1, 1)]
    # days in another zone, a window of dates; bad windows are 422
    tokyo = await ok(await api.get("/api/usage", params={"tz": "Asia/Tokyo", "since": day0}))
    assert [d["day"] for d in tokyo["days"]] == ["2026-11-22", "2026-11-23"]  # 21:00 JST
    only = await ok(await api.get("/api/usage", params={"since": day1, "until": day1}))
    assert [d["day"] for d in only["days"]] == [day1]
    for bad in ({"since": "yesterday"}, {"since": day1, "until": day0},
                {"since": "2020-01-01"}, {"since": "2026-11-22T09:00:00"}, {"tz": "Mars/Base"}):  # fmt: skip
        assert (await api.get("/api/usage", params=bad)).status_code == 422, bad


async def turns_of(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await ok(await api.get("/api/sessions/api:a/turns")))["turns"]
    return listed
