"""Bad input through the API (issue 13): every input bounded and validated with a clear 4xx,
never a 500; the session key grammar; what creates a session. On both store backends.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.errors import InvalidInputError
from agentcron.limits import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS,
    MAX_BODY_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_RUNS,
)
from agentcron.server import create_app
from agentcron.session_keys import check_session_key
from agentcron.store.errors import ConflictError
from tests.conftest import BACKENDS, T0, CronFactory

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "api:ops"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron(runner=None, model=OfflineModel(0))


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


async def answer(response: httpx.Response, status: int) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def session(api: httpx.AsyncClient, key: str = KEY, **kw: Any) -> dict[str, Any]:
    return await answer(await api.post("/api/sessions", json={"key": key, **kw}), 201)


def job(**kw: Any) -> dict[str, Any]:
    return {"session_key": KEY, "name": "n", "message": "m", "when": "every 1h", **kw}


async def test_huge_intervals_delays_and_run_limits_are_422_not_500(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    await session(api)
    for when in (
        "every 1000000000000 seconds",
        "every " + "9" * 150 + " seconds",
        f"every {3654 * 24} hours",
        "in 1000000000000 seconds",
        "9999-12-31T23:59:59-01:00",
        "2200-01-01T00:00",
    ):
        bad = await answer(await api.post("/api/jobs", json=job(when=when)), 422)
        assert bad["error"] == "invalid_schedule", when
    for max_runs in (10**30, MAX_RUNS + 1, 0):
        bad = await answer(await api.post("/api/jobs", json=job(max_runs=max_runs)), 422)
        assert "max_runs" in bad["detail"][0]
    made = await answer(await api.post("/api/jobs", json=job(max_runs=MAX_RUNS)), 201)
    await answer(await api.patch(f"/api/jobs/{made['id']}", json={"max_runs": 10**30}), 422)
    with pytest.raises(InvalidInputError, match="max_runs"):
        await cron.jobs.create(name="n", when="every 1h", session_key=KEY, max_runs=10**30)
    assert (await api.get("/readyz")).status_code == 200  # the server is fine


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("api:a/b", True),
        ("telegram:-100123:7", True),
        ("websocket:chat with spaces", True),
        ("api:ünïcode", True),
        ("api:" + "x" * 200, True),
        ("api:" + "x" * 201, False),
        ("api:a\x00b", False),
        ("api:a\nb", False),
        ("   ", False),
        ("api: ", False),
        ("api: padded", False),
        ("nochannel", False),
        (":id", False),
        ("9api:x", False),
        ("api:", False),
        ("api:\ud800", False),
    ],
)
def test_the_session_key_grammar(key: str, ok: bool) -> None:
    if ok:
        assert check_session_key(key) == key
    else:
        with pytest.raises(InvalidInputError):
            check_session_key(key)


async def test_bad_session_keys_are_refused_on_every_surface(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    for key in ("   ", "api:a\x00b", "x" * (20 * 1024), "nochannel", "api:\t"):
        bad = await answer(await api.post("/api/sessions", json={"key": key}), 422)
        assert bad["error"] == "invalid_request"
        hooked = await api.post(
            "/hooks/agent",
            json={"session_key": key, "content": "hi"},
            headers={"Authorization": "Bearer hook"},
        )
        await answer(hooked, 422)
    with pytest.raises(InvalidInputError):
        await cron.sessions.create("   ")
    with pytest.raises(InvalidInputError):
        await cron.sessions.send("api:a\x00", "hi")
    assert await cron.sessions.list() == []
    # a NUL in any path or query is a 422, not a database error
    await answer(await api.get("/api/jobs/a%00b"), 422)
    await answer(await api.get("/api/jobs", params={"session_key": "a\x00"}), 422)
    await answer(await api.get("/api/sessions/api:a%00b"), 422)


async def test_every_valid_key_is_reachable_slash_included(api: httpx.AsyncClient) -> None:
    for key, path in (
        ("api:a/b", "api:a%2Fb"),
        ("api:x/messages", "api%3Ax%2Fmessages"),
        ("api:100%", "api:100%25"),
        ("api:a b?#", "api:a%20b%3F%23"),
    ):
        created = await session(api, key)
        assert created["key"] == key
        assert (await answer(await api.get(f"/api/sessions/{path}"), 200))["key"] == key
        sent = await api.post(f"/api/sessions/{path}/messages", json={"content": "hi"})
        assert (await answer(sent, 202))["session_key"] == key
        page = await answer(await api.get(f"/api/sessions/{path}/messages"), 200)
        assert page["session_key"] == key
        for sub in ("turns", "runs", "usage", "recalls", "recall"):
            await answer(await api.get(f"/api/sessions/{path}/{sub}"), 200)
        await answer(await api.post(f"/api/sessions/{path}/stop"), 200)
        made = await answer(await api.post("/api/jobs", json=job(session_key=key)), 201)
        assert made["session_key"] == key
        deleted = await answer(await api.delete(f"/api/sessions/{path}?confirm=true"), 200)
        assert deleted["deleted"] is True
    # an unencoded "/" is a path separator: not the key "api:a/b"
    await answer(await api.get("/api/sessions/api:a/b"), 404)


async def test_bodies_messages_and_names_are_bounded(api: httpx.AsyncClient) -> None:
    await session(api)
    big = await api.post(f"/api/sessions/{KEY}/messages", json={"content": "x" * (10 << 20)})
    assert big.status_code == 413
    assert big.json()["error"] == "too_large"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        for _ in range(3):
            yield b"x" * (MAX_BODY_BYTES // 2)

    streamed = await api.post(f"/api/sessions/{KEY}/messages", content=chunks())
    assert streamed.status_code == 413
    long = {"content": "x" * (MAX_MESSAGE_CHARS + 1)}
    await answer(await api.post(f"/api/sessions/{KEY}/messages", json=long), 422)
    await answer(await api.post("/api/jobs", json=job(name="n" * 201)), 422)
    await answer(await api.post("/api/jobs", json=job(message="m" * (MAX_MESSAGE_CHARS + 1))), 422)
    await answer(await api.post("/api/sessions", json={"key": "api:t", "title": "t" * 201}), 422)
    for text in ("a\x00b", "\ud800"):
        bad = await api.post(
            f"/api/sessions/{KEY}/messages",
            content=f'{{"content": "{text.encode("unicode_escape").decode()}"}}'.replace(
                "\\x00", "\\u0000"
            ),
            headers={"Content-Type": "application/json"},
        )
        assert bad.status_code == 422, bad.text
    page = await answer(await api.get(f"/api/sessions/{KEY}/messages"), 200)
    assert page["messages"] == []  # nothing was queued


async def test_a_message_to_an_unknown_session_is_404_and_creates_nothing(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    for path, body in (
        ("messages", {"content": "hi"}),
        ("messages", {"content": "hi", "trigger": False}),
        ("send", {"content": "hi"}),
    ):
        missing = await answer(await api.post(f"/api/sessions/api:nobody/{path}", json=body), 404)
        assert missing["error"] == "not_found"
    assert await cron.sessions.list() == []
    # the inbound hook and the library's send do create it (documented)
    hook = await api.post("/hooks/agent", json={"session_key": "hook:ci", "content": "hi"},
                          headers={"Authorization": "Bearer hook"})  # fmt: skip
    assert hook.status_code == 202
    assert [s.key for s in await cron.sessions.list()] == ["hook:ci"]


async def test_a_non_json_body_says_which_header_to_send(api: httpx.AsyncClient) -> None:
    form = await api.post("/api/sessions", content=b'{"key":"api:ops"}',
                          headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    detail = (await answer(form, 422))["detail"]
    assert "Content-Type: application/json" in detail[0]
    assert "application/x-www-form-urlencoded" in detail[0]
    broken = await api.post("/api/sessions", content=b'{"key": "api:ops",}',
                            headers={"Content-Type": "application/json"})  # fmt: skip
    (line,) = (await answer(broken, 422))["detail"]
    assert line.startswith("body: not valid JSON at character ")
    assert "Content-Type: application/json" in line
    # what the README's curl example sends works
    good = await api.post("/api/sessions", content=b'{"key":"api:ops"}',
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert good.status_code == 201


async def test_unknown_fields_are_refused_by_name(api: httpx.AsyncClient, cron: AgentCron) -> None:
    await session(api)
    bad = await answer(await api.post("/api/jobs", json=job(timezone="Asia/Tokyo")), 422)
    assert bad["detail"] == ["timezone: unknown field (misspelt? the accepted fields are in /docs)"]
    assert await cron.jobs.list() == []
    for path, body in (
        ("/api/sessions", {"key": "api:z", "zone": "UTC"}),
        (f"/api/sessions/{KEY}/messages", {"content": "hi", "triger": False}),
        (f"/api/sessions/{KEY}/send", {"content": "hi", "to": "x"}),
    ):
        await answer(await api.post(path, json=body), 422)
    made = await answer(await api.post("/api/jobs", json=job()), 201)
    await answer(await api.patch(f"/api/jobs/{made['id']}", json={"enabld": False}), 422)


async def test_an_end_at_in_the_past_is_422(api: httpx.AsyncClient, cron: AgentCron) -> None:
    await session(api)
    past = (T0 - timedelta(minutes=1)).isoformat()
    bad = await answer(await api.post("/api/jobs", json=job(end_at=past)), 422)
    assert "not in the future" in bad["detail"]
    made = await answer(await api.post("/api/jobs", json=job(end_at="2027-01-01T00:00:00Z")), 201)
    await answer(await api.patch(f"/api/jobs/{made['id']}", json={"end_at": past}), 422)
    with pytest.raises(InvalidInputError, match="not in the future"):
        await cron.jobs.create(name="n", when="every 1h", session_key=KEY, end_at=T0)


async def test_creating_an_existing_session_in_another_zone_is_409(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    first = await session(api, tz="Europe/Berlin")
    again = await session(api, tz="Europe/Berlin")  # the same values: idempotent, 201 as before
    assert again == first
    assert (await session(api))["tz"] == "Europe/Berlin"  # no tz: the session as it is
    clash = await answer(await api.post("/api/sessions", json={"key": KEY, "tz": "UTC"}), 409)
    assert clash["error"] == "conflict"
    assert "Europe/Berlin" in clash["detail"]
    with pytest.raises(ConflictError):
        await cron.sessions.create(KEY, tz="Asia/Tokyo")
    assert (await cron.sessions.get(KEY)).tz == "Europe/Berlin"


async def test_a_null_patch_field_is_422_not_500(api: httpx.AsyncClient) -> None:
    """Found by the fuzz: `PATCH /api/jobs/{id}` with `"catchup": null` stored None -> 500."""
    await session(api)
    made = await answer(await api.post("/api/jobs", json=job()), 201)
    for field in ("catchup", "overlap", "name", "when", "enabled", "tz"):
        bad = await answer(await api.patch(f"/api/jobs/{made['id']}", json={field: None}), 422)
        assert "cannot be null" in bad["detail"][0], field
    unlimited = {"max_runs": None, "end_at": None, "model": None}
    await answer(await api.patch(f"/api/jobs/{made['id']}", json=unlimited), 200)


async def test_unknown_api_paths_long_ids_and_the_documented_errors(
    api: httpx.AsyncClient,
) -> None:
    # an /api path no route has: a JSON 404 whatever the method (not the web UI's 405)
    for method in ("GET", "POST", "DELETE", "PATCH"):
        missing = await answer(await api.request(method, "/api/sessions/api:a/b/c"), 404)
        assert "%2F" in missing["detail"]
    await answer(await api.get("/api/jobs/" + "x" * 101), 422)
    await answer(await api.get("/api/turns/" + "x" * 101), 422)
    doc = (await api.get("/openapi.json")).json()
    assert "text/plain" in doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    errors = doc["paths"]["/api/jobs"]["post"]["responses"]
    assert {"401", "409", "413", "422"} <= set(errors)
    assert errors["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorOut"
    }


async def test_a_channel_message_with_a_bad_chat_id_creates_no_session(cron: AgentCron) -> None:
    from agentcron.channels import ChannelManager

    manager = ChannelManager(cron, [])
    for chat_id in ("a\x00b", " ", "x" * 201):
        with pytest.raises(InvalidInputError):
            await manager.inbound("telegram", chat_id, "hi", {})
    assert await cron.sessions.list() == []


async def test_channel_meta_is_small_clean_json(api: httpx.AsyncClient, cron: AgentCron) -> None:
    """A lone surrogate in channel_meta was stored, then failed to serialize: a 500."""
    surrogate = b'{"key": "api:m", "channel_meta": {"a": "\\ud800"}}'
    bad = await api.post("/api/sessions", content=surrogate,
                         headers={"Content-Type": "application/json"})  # fmt: skip
    assert bad.status_code == 422, bad.text
    deep: Any = 1
    for _ in range(20):
        deep = [deep]
    for meta in ({"a": "b\x00"}, {"a": "x" * 20_000}, {"a": deep}):
        body = {"key": "api:m", "channel_meta": meta}
        await answer(await api.post("/api/sessions", json=body), 422)
    with pytest.raises(InvalidInputError, match="channel_meta"):
        await cron.sessions.create("api:m", channel_meta={"a": "\ud800"})
    ok = await session(api, "api:m", channel_meta={"chat": {"title": "ops", "ids": [1, 2]}})
    assert ok["channel_meta"] == {"chat": {"title": "ops", "ids": [1, 2]}}


async def test_a_body_too_deep_to_parse_says_so(api: httpx.AsyncClient) -> None:
    await session(api)
    deep = b'{"content": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    answered = await api.post(f"/api/sessions/{KEY}/messages", content=deep,
                              headers={"Content-Type": "application/json"})  # fmt: skip
    assert answered.status_code == 400
    assert answered.json()["error"] == "bad_request"
    assert "nested too deeply" in answered.json()["detail"]


async def test_bad_hook_attachments_are_422_and_start_no_turn(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    url = {"url": "https://files.example/a.png"}
    too_big = base64.b64encode(b"x" * (MAX_ATTACHMENT_BYTES + 1)).decode()
    for attachments in (
        [{"kind": "photo"}],  # neither a url nor data
        [{"kind": "photo", "url": "https://files.example/a.png", "data": "eA=="}],  # both
        [{"kind": "sticker", **url}],  # not a kind
        [{"url": "ftp://files.example/a.png"}],  # not http(s)
        [{"url": "https://" + "a" * 3000}],  # too long
        [{"data": "not base64!"}],
        [{"data": too_big}],  # over MAX_ATTACHMENT_BYTES (or the body's bound)
        [{"name": "a\x00b", **url}],
        [url] * (MAX_ATTACHMENTS + 1),
        [{"extra": 1, **url}],
    ):
        body = {"session_key": "hook:ci", "content": "hi", "attachments": attachments}
        hooked = await api.post("/hooks/agent", json=body, headers={"Authorization": "Bearer hook"})
        assert hooked.status_code in (413, 422), (attachments, hooked.text)
        assert set(hooked.json()) == {"error", "detail"}
    assert await cron.sessions.list() == []
    # at the bounds it is accepted
    fits = base64.b64encode(b"x" * MAX_ATTACHMENT_BYTES).decode()
    body = {"session_key": "hook:ci", "content": "hi",
            "attachments": [{"data": fits}, *[url] * (MAX_ATTACHMENTS - 1)]}  # fmt: skip
    hooked = await api.post("/hooks/agent", json=body, headers={"Authorization": "Bearer hook"})
    assert hooked.status_code == 202, hooked.text
