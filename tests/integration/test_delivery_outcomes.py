"""Delivery outcomes and channels visible (seed 004): events, records, channel state, extra
headers, notes without a turn, sending without the agent, system events to subscribers.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.channels import (
    ChannelConfigError,
    ChannelManager,
    WebhookChannel,
    channels_from_env,
)
from agentcron.domain.events import DeliveryFailed, DeliverySucceeded, Event, SystemEventFired
from agentcron.domain.jobs import JobKind
from agentcron.server import create_app
from agentcron.server.events_json import event_json
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.integration.test_channels_webhook import (
    SECRET,
    Echo,
    HttpStub,
    say,
    scripted,
    settled,
    started,
    webhook_on,
)

__all__ = ["started"]  # the fixture, used here by name

KEY = "websocket:abc"
TOKEN = "t"


def api(cron: AgentCron, manager: ChannelManager | None = None) -> httpx.AsyncClient:
    app = create_app(cron, token=TOKEN, hook_token="h", channels=manager)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                             headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip


async def test_each_attempt_is_an_event_and_the_channel_state_follows(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    events: list[Event] = []
    cron.subscribe(events.append, types=(DeliverySucceeded, DeliveryFailed))
    async with HttpStub(scripted(503)) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started)
        (status,) = manager.status()
        assert (status.running, status.connected, status.healthy) == (True, True, True)
        retried = await say(cron, "first")
        await receiver.wait_for(lambda r: len(r) == 2)
        await settled(manager, channel)
    failed, succeeded = events
    assert isinstance(failed, DeliveryFailed)
    assert (failed.session_key, failed.channel, failed.message_id) == (KEY, "webhook", retried)
    assert (failed.attempts, failed.retryable) == (1, True)
    assert failed.error.startswith("HTTP 503")
    assert isinstance(succeeded, DeliverySucceeded)
    assert (succeeded.message_id, succeeded.attempts) == (retried, 2)
    assert event_json(failed) == {
        "type": "delivery_failed", "session_key": KEY, "channel": "webhook",
        "message_id": retried, "attempts": 1, "error": failed.error, "retryable": True,
    }  # fmt: skip
    (status,) = manager.status()
    assert status.healthy  # a success after the error
    assert status.last_success_at == cron.clock.now()

    # A permanent error: the delivery gives up, the event says so, the channel is failing.
    async with HttpStub(scripted(then=400)) as receiver:
        channel.url = receiver.url
        lost = await say(cron, "second")
        await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)
    final = events[-1]
    assert isinstance(final, DeliveryFailed)
    assert (final.message_id, final.retryable) == (lost, False)
    (status,) = manager.status()
    assert (status.healthy, status.failed) == (False, 1)
    assert status.last_error is not None
    assert status.last_error.startswith("HTTP 400")

    async with api(cron, manager) as client:
        channels = (await client.get("/api/channels")).json()["channels"]
        failed_records = (await client.get(
            "/api/deliveries", params={"session_key": KEY, "state": "failed"}
        )).json()  # fmt: skip
    (shown,) = channels
    assert shown | {"last_error_at": None, "last_success_at": None} == {
        "name": "webhook", "kind": "webhook", "running": True, "connected": True,
        "healthy": False, "last_error": status.last_error, "last_error_at": None,
        "last_success_at": None, "failed": 1,
    }  # fmt: skip
    (record,) = failed_records["deliveries"]
    assert (record["message_id"], record["state"], record["attempts"]) == (lost, "failed", 1)
    assert record["last_error"].startswith("HTTP 400")
    assert failed_records["next_cursor"] is None


async def test_without_channels_the_list_is_empty(make_cron: CronFactory) -> None:
    cron = await make_cron(runner=Echo())
    async with api(cron) as client:
        assert (await client.get("/api/channels")).json() == {"channels": []}


async def test_delivery_records_page_newest_first_with_a_cursor(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron(runner=Echo())
    store = cron.store.deliveries
    for i in range(7):
        clock.advance(timedelta(seconds=1))
        await store.enqueue("webhook", f"m{i}", KEY if i % 2 else "api:other", {}, clock.now())
    await store.enqueue("telegram", "m6", KEY, {}, clock.now())  # same instant, other channel
    async with api(cron) as client:
        pages: list[list[str]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
            body = (await client.get("/api/deliveries", params=params)).json()
            pages.append([f"{d['channel']}/{d['message_id']}" for d in body["deliveries"]])
            cursor = body["next_cursor"]
            if cursor is None:
                break
        assert pages == [
            ["webhook/m6", "telegram/m6", "webhook/m5"],
            ["webhook/m4", "webhook/m3", "webhook/m2"],
            ["webhook/m1", "webhook/m0"],
        ]
        mine = (await client.get("/api/deliveries", params={"session_key": KEY})).json()
        assert [d["message_id"] for d in mine["deliveries"]] == ["m6", "m5", "m3", "m1"]
        for bad in ({"limit": 0}, {"limit": 201}, {"state": "lost"}, {"cursor": "not-ours"}):
            response = await client.get("/api/deliveries", params=bad)
            assert response.status_code == 422, (bad, response.text)


async def test_the_webhook_sends_configured_extra_headers_beside_its_signature(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(
            cron, receiver.url, started, headers={"Authorization": "Bearer gw", "X-Team": "ops"}
        )
        await say(cron, "hi")
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)
    assert request.headers["authorization"] == "Bearer gw"
    assert request.headers["x-team"] == "ops"
    assert request.headers["x-agentcron-signature"].startswith("sha256=")


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ('{"X-Agentcron-Signature": "forged"}', "sets X-Agentcron-Signature itself"),
        ('{"content-type": "text/plain"}', "sets content-type itself"),
        ('{"Bad Name": "x"}', "not a valid HTTP header name"),
        ('{"X-A": "one\\ntwo"}', "text on one line"),
        ('["x"]', "must be a JSON object"),
    ],
)
def test_extra_headers_are_checked(headers: str, message: str) -> None:
    env = {"AGENTCRON_WEBHOOK_URL": "http://127.0.0.1:9/", "AGENTCRON_WEBHOOK_SECRET": SECRET,
           "AGENTCRON_WEBHOOK_HEADERS": headers}  # fmt: skip
    with pytest.raises(ChannelConfigError, match=message):
        channels_from_env(env)


def test_extra_headers_from_the_environment() -> None:
    env = {"AGENTCRON_WEBHOOK_URL": "http://127.0.0.1:9/", "AGENTCRON_WEBHOOK_SECRET": SECRET,
           "AGENTCRON_WEBHOOK_HEADERS": '{"Authorization": "Bearer gw"}'}  # fmt: skip
    (channel,) = channels_from_env(env)
    assert isinstance(channel, WebhookChannel)
    assert channel.headers == {"Authorization": "Bearer gw"}


async def test_a_note_starts_no_turn_and_the_agent_sees_it_next_time(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(runner=Echo())
    await cron.sessions.create(KEY)
    async with api(cron) as client:
        noted = await client.post(f"/api/sessions/{KEY}/messages",
                                  json={"content": "the door code is 4711", "trigger": False})  # fmt: skip
        assert noted.status_code == 201, noted.text
        body = noted.json()
        assert body["turn_id"] is None
        assert body["message"]["role"] == "user"
        assert body["message"]["meta"] == {"source": "note"}
        missing = await client.post("/api/sessions/api:nobody/messages",
                                    json={"content": "x", "trigger": False})  # fmt: skip
        assert missing.status_code == 404
    assert await cron.sessions.turns(KEY) == []  # no turn
    (note,) = await cron.sessions.messages(KEY)
    assert note.content == "the door code is 4711"


async def test_send_goes_out_through_the_sessions_channel_without_the_agent(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    await cron.sessions.create(KEY)
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started)
        async with api(cron, manager) as client:
            sent = await client.post(f"/api/sessions/{KEY}/send", json={"content": "server down"})
            assert sent.status_code == 201, sent.text
            empty = await client.post(f"/api/sessions/{KEY}/send", json={"content": "  "})
            assert empty.status_code == 422
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)
    message = sent.json()["message"]
    assert message["role"] == "assistant"
    assert message["meta"] == {"source": "operator", "sent_by": "operator"}
    assert request.json()["text"] == "server down"
    assert request.json()["event"] == "message"
    assert await cron.sessions.turns(KEY) == []  # the agent was not involved


async def test_a_system_events_text_goes_to_every_live_view(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron()
    await cron.sessions.create(KEY)
    seen: list[SystemEventFired] = []
    cron.subscribe(seen.append, types=(SystemEventFired,))
    cron.system.register("digest", lambda trigger: _done())
    job = await cron.jobs.create(name="digest", when="in 1m", message="Daily digest is ready",
                                 kind=JobKind.SYSTEM_EVENT, session_key=KEY)  # fmt: skip
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    (event,) = seen
    assert (event.session_key, event.job_id, event.text) == (KEY, job.id, "Daily digest is ready")
    assert event_json(event) == {"type": "system_event", "session_key": KEY, "job_id": job.id,
                                 "run_id": event.run_id, "name": "digest",
                                 "text": "Daily digest is ready", "source": "cron"}  # fmt: skip


async def _done() -> str:
    return "ok"
