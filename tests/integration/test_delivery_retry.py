"""Deliveries wait out an outage (to a deadline), a failed one is re-sent without a new run,
and a reply no channel can carry is a failed delivery (issue 26, seed 004): real channels
against local fake servers, real SQLite or PostgreSQL, the fake clock.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.channels import ChannelManager, RetryPolicy
from agentcron.channels.manager import OutboundMessage
from agentcron.channels.outbox import DeliveryAttemptError, Outbox
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.events import DeliveryFailed, DeliverySucceeded, Event
from agentcron.runtime.clock import SystemClock
from agentcron.server import create_app
from agentcron.server.events_json import event_json
from agentcron.store.sql import SqlStore
from agentcron.testing import FakeClock
from tests.conftest import T0, CronFactory
from tests.integration.test_channels_telegram import FakeBotApi, api, telegram_on
from tests.integration.test_channels_webhook import (
    Echo,
    HttpStub,
    Received,
    Reply,
    say,
    settled,
    started,
    webhook_on,
)

__all__ = ["api", "started"]  # fixtures, used here by name

KEY = "websocket:abc"
TOKEN = "t"
MIN = timedelta(minutes=1)


def rest(cron: AgentCron, manager: ChannelManager | None = None) -> httpx.AsyncClient:
    app = create_app(cron, token=TOKEN, hook_token="h", channels=manager)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                             headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip


class ClockSleep:
    """The outbox's wait between attempts on the fake clock: it moves the clock on by the
    seconds asked (what the wait would take) and records them.
    """

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.clock.advance(timedelta(seconds=seconds))
        await asyncio.sleep(0)


class Receiver:
    """A webhook receiver that is down (503) until `up_at` on the fake clock, then accepts
    each request with an id of its own.
    """

    def __init__(self, clock: FakeClock, up_at: Any) -> None:
        self.clock, self.up_at = clock, up_at
        self.accepted: list[str] = []  # the X-Agentcron-Delivery of each request it took

    async def __call__(self, request: Received) -> Reply:
        if self.clock.now() < self.up_at:
            return Reply(503, {"error": "down"})
        self.accepted.append(request.headers["x-agentcron-delivery"])
        return Reply(200, {"id": f"rcv-{len(self.accepted)}"})


async def test_a_channel_down_for_ten_minutes_then_up_delivers_everything_once(
    make_cron: CronFactory, clock: FakeClock, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    events: list[Event] = []
    cron.subscribe(events.append, types=(DeliverySucceeded, DeliveryFailed))
    receiver = Receiver(clock, clock.now() + 10 * MIN)
    sleep = ClockSleep(clock)
    async with HttpStub(receiver) as stub:
        # the default policy: backoff up to 5 minutes apart, a day's deadline, no attempt cap
        manager, channel = await webhook_on(cron, stub.url, started, retry=RetryPolicy())
        channel.outbox._sleep = sleep
        sent = [await say(cron, text) for text in ("one", "two", "three")]
        await settled(manager, channel)
    assert receiver.accepted == sent  # each once, in order
    assert sum(sleep.asked) >= 10 * 60  # it waited the outage out
    assert len(sleep.asked) > 8  # past the 8 attempts it used to give up after
    for n, message_id in enumerate(sent, start=1):
        record = await cron.store.deliveries.get("webhook", message_id)
        assert record.state is DeliveryState.DELIVERED
        assert record.external_id == f"rcv-{n}"
    assert not [e for e in events if isinstance(e, DeliveryFailed) and not e.retryable]
    succeeded = [e for e in events if isinstance(e, DeliverySucceeded)]
    assert [e.message_id for e in succeeded] == sent
    first = succeeded[0]
    assert first.external_id == "rcv-1"
    assert first.delivered_at is not None
    assert first.delivered_at >= T0 + 10 * MIN
    assert event_json(first) | {"attempts": 0} == {
        "type": "delivery_succeeded", "session_key": KEY, "channel": "webhook",
        "message_id": sent[0], "attempts": 0, "external_id": "rcv-1",
        "delivered_at": first.delivered_at.isoformat(),
    }  # fmt: skip


async def test_the_deadline_passing_fails_the_delivery_with_the_reason(
    make_cron: CronFactory, clock: FakeClock, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    events: list[Event] = []
    cron.subscribe(events.append, types=(DeliveryFailed,))
    receiver = Receiver(clock, clock.now() + timedelta(days=365))  # down for good
    sleep = ClockSleep(clock)
    async with HttpStub(receiver) as stub:
        manager, channel = await webhook_on(
            cron, stub.url, started, retry=RetryPolicy(deadline=600)
        )
        channel.outbox._sleep = sleep
        message_id = await say(cron, "into the void")
        await settled(manager, channel)
    record = await cron.store.deliveries.get("webhook", message_id)
    assert record.state is DeliveryState.FAILED
    assert record.last_error == (
        "not delivered within the deadline (10m); last error: HTTP 503 Service Unavailable: "
        '{"error": "down"}'
    )
    assert record.updated_at == T0 + 10 * MIN  # the last attempt was made at the deadline
    final = events[-1]
    assert isinstance(final, DeliveryFailed)
    assert (final.retryable, final.error) == (False, record.last_error)
    assert all(e.retryable for e in events[:-1])


async def test_a_retry_re_sends_without_a_new_run(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    answers = [400]  # the receiver refuses the first request, then takes everything

    async def respond(request: Received) -> Reply:
        status = answers.pop(0) if answers else 200
        return Reply(status, {"id": "far-7"} if status == 200 else {"error": "no"})

    events: list[Event] = []
    cron.subscribe(events.append, types=(DeliverySucceeded,))
    async with HttpStub(respond) as stub:
        manager, channel = await webhook_on(cron, stub.url, started)
        message_id = await say(cron, "hello")
        await settled(manager, channel)
        failed = await cron.store.deliveries.get("webhook", message_id)
        assert failed.state is DeliveryState.FAILED
        transcript = await cron.sessions.messages(KEY)
        turns = await cron.sessions.turns(KEY)
        async with rest(cron, manager) as client:
            answer = await client.post(f"/api/deliveries/webhook:{message_id}/retry")
            assert answer.status_code == 200, answer.text
            pending = answer.json()
            assert (pending["id"], pending["state"], pending["attempts"]) == (
                f"webhook:{message_id}", "pending", 1,
            )  # fmt: skip
            assert pending["retried_at"] is not None
            assert pending["last_error"] == failed.last_error
            await stub.wait_for(lambda r: len(r) == 2)
            await settled(manager, channel)
            listed = (await client.get("/api/deliveries", params={"session_key": KEY})).json()
    first, second = stub.received

    def unstamped(request: Received) -> dict[str, Any]:
        return request.json() | {"attempt": None, "sent_at": None}

    assert unstamped(first) == unstamped(second)  # the same reply, re-sent
    assert second.json()["attempt"] == 2
    assert second.headers["x-agentcron-delivery"] == message_id
    record = await cron.store.deliveries.get("webhook", message_id)
    assert (record.state, record.attempts, record.external_id) == (
        DeliveryState.DELIVERED, 2, "far-7",
    )  # fmt: skip
    (shown,) = listed["deliveries"]
    assert (shown["state"], shown["external_id"]) == ("delivered", "far-7")
    # the agent did not run again: no new turn, no new transcript entry
    assert await cron.sessions.turns(KEY) == turns
    assert await cron.sessions.messages(KEY) == transcript
    (succeeded,) = events
    assert isinstance(succeeded, DeliverySucceeded)
    assert (succeeded.message_id, succeeded.external_id) == (message_id, "far-7")


async def test_a_retry_of_a_delivered_pending_or_unknown_delivery_is_a_clear_4xx(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())

    async def accept(request: Received) -> Reply:
        return Reply(200, {})

    async with HttpStub(accept) as stub:
        manager, channel = await webhook_on(cron, stub.url, started)
        message_id = await say(cron, "hello")
        await settled(manager, channel)
        now = cron.clock.now()
        await cron.store.deliveries.enqueue("webhook", "waiting", KEY, {}, now)
        await cron.store.deliveries.record_failed(
            "elsewhere", "m1", KEY, {}, error="no channel", now=now
        )
        async with rest(cron, manager) as client:

            async def retry(delivery_id: str) -> tuple[int, dict[str, Any]]:
                answer = await client.post(f"/api/deliveries/{delivery_id}/retry")
                return answer.status_code, answer.json()

            code, body = await retry(f"webhook:{message_id}")
            assert (code, body["error"]) == (409, "conflict")
            assert "already delivered" in body["detail"]
            code, body = await retry("webhook:waiting")
            assert (code, body["error"]) == (409, "conflict")
            assert "pending, not failed" in body["detail"]
            code, body = await retry("webhook:nope")
            assert (code, body["error"]) == (404, "not_found")
            code, body = await retry("no-colon")
            assert (code, body["error"]) == (404, "not_found")
            code, body = await retry("elsewhere:m1")  # no such channel runs here
            assert (code, body["error"]) == (409, "conflict")
            assert "'elsewhere' is not running on this server" in body["detail"]
        # nothing changed
        record = await cron.store.deliveries.get("elsewhere", "m1")
        assert record.state is DeliveryState.FAILED
        assert len(stub.received) == 1


async def test_a_reply_to_a_channel_that_is_not_configured_is_a_failed_delivery(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    events: list[Event] = []
    cron.subscribe(events.append, types=(DeliveryFailed,))
    manager = ChannelManager(cron, [])  # no channel at all
    await manager.start()
    started.append(manager)
    message_id = await say(cron, "hi", key="slack:C42")
    await say(cron, "hi", key=KEY)  # the web UI's: nothing to carry it, nothing failed
    await manager.idle()
    (record,) = await cron.deliveries.page()
    assert (record.channel, record.message_id, record.session_key) == (
        "slack", message_id, "slack:C42",
    )  # fmt: skip
    assert (record.state, record.attempts) == (DeliveryState.FAILED, 0)
    assert record.last_error == "no channel 'slack' is configured to carry it"
    assert record.payload["text"] == "echo: hi"
    (failed,) = events
    assert isinstance(failed, DeliveryFailed)
    assert (failed.channel, failed.message_id, failed.retryable) == ("slack", message_id, False)


async def test_a_reply_to_a_telegram_chat_off_the_allow_list_is_a_failed_delivery(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub]
) -> None:
    bot, server = api
    cron = await make_cron(runner=Echo())
    manager, telegram = await telegram_on(cron, server.url, [42])
    try:
        refused = await say(cron, "psst", key="telegram:99")
        allowed = await say(cron, "hello", key="telegram:42")
        await bot.wait_for(lambda: len(bot.sent) == 1)
        await manager.idle()
        await telegram.outbox.idle()
        unroutable = await cron.store.deliveries.get("telegram", refused)
        assert (unroutable.state, unroutable.attempts) == (DeliveryState.FAILED, 0)
        assert unroutable.last_error == "chat 99 is not on the telegram allow-list"
        # re-sending it is held to the allow-list all the same
        async with rest(cron, manager) as client:
            answer = await client.post(f"/api/deliveries/telegram:{refused}/retry")
            assert answer.status_code == 200, answer.text
        await telegram.outbox.idle()
    finally:
        await manager.stop(grace=1.0)
    assert bot.sent == [(42, "echo: hello")]
    failed = await cron.store.deliveries.get("telegram", refused)
    assert (failed.state, failed.attempts) == (DeliveryState.FAILED, 1)  # the re-send's
    assert failed.last_error == "chat 99 is not on the telegram allow-list"
    assert failed.retried_at is not None
    sent = await cron.store.deliveries.get("telegram", allowed)
    assert (sent.state, sent.external_id) == (DeliveryState.DELIVERED, "1000")
    assert sent.result == {"chat_id": 42, "message_ids": [1000]}


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
async def test_two_processes_never_send_one_delivery_at_the_same_time(store_url: str) -> None:
    """Process A's attempt fails and A is slow to come back from its backoff; process B
    takes the record over and its attempt is in flight when A comes back: A must not start
    an attempt beside it (it used to: it re-read the count and won the compare-and-set).
    """
    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
    sent: list[str] = []
    b_in_flight, release_b, a_back = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def a_attempt(message: OutboundMessage, attempt: int) -> None:
        sent.append(f"a{attempt}")
        raise DeliveryAttemptError("HTTP 503", retryable=True, retry_after=0.05)

    async def b_attempt(message: OutboundMessage, attempt: int) -> None:
        sent.append(f"b{attempt}")
        b_in_flight.set()
        await release_b.wait()

    async def a_sleep(_delay: float) -> None:
        await a_back.wait()  # A comes back only when the test says so

    clock = SystemClock()
    first = Outbox("webhook", a_attempt, sleep=a_sleep, deliveries=a.deliveries, clock=clock)
    second = Outbox("webhook", b_attempt, deliveries=b.deliveries, clock=clock)
    for outbox in (first, second):
        outbox.stalled_after = timedelta(seconds=1)
        outbox.sweep_every = timedelta(milliseconds=50)
    message = OutboundMessage(
        session_key="web:1", channel="web", chat_id="1", text="hi", message_id="m1",
        status="succeeded",
    )  # fmt: skip
    try:
        await first.start()
        await second.start()
        await first.submit(message)
        async with asyncio.timeout(20):
            await b_in_flight.wait()  # B took it over while A waits
            a_back.set()
            await first.idle()  # A came back, found B's attempt in flight, left it to B
            release_b.set()
            await second.idle()
        record = await b.deliveries.get("webhook", "m1")
        assert record.state is DeliveryState.DELIVERED
        assert sent == ["a1", "b2"]
    finally:
        release_b.set()
        a_back.set()
        await first.stop()
        await second.stop()
        for s in (a, b):
            await s.close()
