"""The webhook channel against a real local HTTP receiver: signed JSON, retries, durable records."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import http
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.channels import (
    ChannelManager,
    ChannelStartError,
    Inbound,
    OutboundMessage,
    RetryPolicy,
    WebhookChannel,
    verify_signature,
)
from agentcron.domain.attachments import Attachment
from agentcron.domain.deliveries import DeliveryState
from agentcron.server import create_app
from agentcron.testing import wait_settled
from tests.conftest import CronFactory

SECRET = "s3cret-for-tests"
# the documented Standard Webhooks form of a plain secret, made independently of the channel
STANDARD_SECRET = "whsec_" + base64.b64encode(SECRET.encode()).decode()
KEY = "websocket:abc"

# --- a real HTTP/1.1 server on 127.0.0.1 (also the fake Telegram Bot API) -------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[Received], Awaitable[Reply]]


class HttpStub:
    """Answers each request with `respond(request)`; records every request it got."""

    def __init__(self, respond: Responder) -> None:
        self.respond = respond
        self.received: list[Received] = []
        self.url = ""
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> HttpStub:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def wait_for(
        self, predicate: Callable[[list[Received]], bool], seconds: float = 10.0
    ) -> list[Received]:
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(lambda: predicate(self.received))
        return self.received

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while line := await reader.readline():
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, value = header.decode().split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                request = Received(method, path, headers, body)
                async with self._changed:
                    self.received.append(request)
                    self._changed.notify_all()
                reply = await self.respond(request)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body)
                data = data if isinstance(data, bytes) else data.encode()
                head = [f"HTTP/1.1 {reply.status} {http.HTTPStatus(reply.status).phrase}",
                        "Content-Type: application/json", f"Content-Length: {len(data)}",
                        *(f"{k}: {v}" for k, v in reply.headers.items())]  # fmt: skip
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def scripted(*statuses: int, then: int = 200, retry_after: str | None = None) -> Responder:
    """Answer with `statuses` in order, then `then` for ever; a 429 says `Retry-After`."""
    queue = list(statuses)

    async def respond(request: Received) -> Reply:
        status = queue.pop(0) if queue else then
        headers = {"Retry-After": retry_after} if status == 429 and retry_after else {}
        return Reply(status, {"status": status}, headers)

    return respond


# --- helpers --------------------------------------------------------------------------------


class Echo:
    """A runner that answers every turn with `echo: <prompt>`."""

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        return Outcome.succeeded(f"echo: {turn.prompt}")


class Sleeps:
    """An injected retry wait: records the seconds asked for and only yields (or blocks)."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.block = False
        self.called = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.called.set()
        if self.block:
            await asyncio.Event().wait()
        await asyncio.sleep(0)


FAST = RetryPolicy(max_attempts=4, initial_delay=0.01, factor=2.0, max_delay=5.0)


def expected_signature(timestamp: str, body: bytes) -> str:
    """The documented scheme, computed independently of the channel's code."""
    mac = hmac.new(SECRET.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


@pytest.fixture
async def started() -> AsyncIterator[list[ChannelManager]]:
    """Managers a test starts; stopped at the end (before make_cron closes AgentCron)."""
    managers: list[ChannelManager] = []
    yield managers
    for manager in reversed(managers):
        await manager.stop(grace=1.0)


async def webhook_on(
    cron: AgentCron,
    url: str,
    started: list[ChannelManager],
    sleeps: Sleeps | None = None,
    secret: str = SECRET,
    **kw: Any,
) -> tuple[ChannelManager, WebhookChannel]:
    kw.setdefault("retry", FAST)
    channel = WebhookChannel(url, secret, sleep=sleeps or Sleeps(), **kw)
    manager = ChannelManager(cron, [channel])
    await manager.start()
    started.append(manager)
    return manager, channel


async def say(cron: AgentCron, text: str, key: str = KEY) -> str:
    """Send a message, let its turn finish; the reply's message id."""
    turn = await cron.sessions.send(key, text)
    await wait_settled(cron.engine)
    done = await cron.sessions.turn(turn.id)
    assert done.reply_message_id is not None
    return done.reply_message_id


async def settled(manager: ChannelManager, channel: WebhookChannel) -> None:
    await manager.idle()
    await channel.outbox.idle()


# --- tests ----------------------------------------------------------------------------------


async def test_a_turn_result_is_posted_as_signed_json(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(cron, receiver.url + "/hooks/agentcron", started)
        await cron.sessions.create(KEY, channel_meta={"user": "ada"})
        message_id = await say(cron, "hello")
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)

    assert (request.method, request.path) == ("POST", "/hooks/agentcron")
    timestamp = request.headers["x-agentcron-timestamp"]
    assert abs(int(timestamp) - time.time()) < 60
    assert request.headers["x-agentcron-signature"] == expected_signature(timestamp, request.body)
    assert request.headers["x-agentcron-delivery"] == message_id
    assert request.headers["x-agentcron-event"] == "turn.result"
    assert request.headers["content-type"] == "application/json"
    body = request.json()
    turn = (await cron.sessions.turns(KEY))[-1]
    assert body | {"sent_at": None, "created_at": None} == {
        "event": "turn.result", "session_key": KEY, "channel": "websocket", "chat_id": "abc",
        "channel_meta": {"user": "ada"}, "text": "echo: hello", "status": "succeeded",
        "kind": "turn", "source": "user", "message_id": message_id, "turn_id": turn.id,
        "run_id": None, "meta": {"source": "user", "status": "succeeded", "turn_id": turn.id},
        "attempt": 1, "sent_at": None, "created_at": None,
    }  # fmt: skip
    assert body["sent_at"].endswith("+00:00")

    # Standard Webhooks: the stock verifier accepts it, keyed by the delivery's stable id
    assert request.headers["webhook-id"] == message_id
    assert request.headers["webhook-timestamp"] == timestamp
    assert request.headers["webhook-signature"].startswith("v1,")
    assert Webhook(STANDARD_SECRET).verify(request.body, request.headers) == body
    forged = {**request.headers, "webhook-id": "msg_other"}
    for secret, headers, data in [("whsec_" + base64.b64encode(b"other").decode(),
                                   request.headers, request.body),
                                  (STANDARD_SECRET, request.headers, request.body + b" "),
                                  (STANDARD_SECRET, forged, request.body)]:  # fmt: skip
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(data, headers)

    # the receiver's helper accepts it, and rejects a changed body or a stale timestamp
    signature = request.headers["x-agentcron-signature"]
    assert verify_signature(SECRET, request.body, timestamp, signature)
    assert not verify_signature(SECRET, request.body + b" ", timestamp, signature)
    assert not verify_signature("other", request.body, timestamp, signature)
    assert not verify_signature(
        SECRET, request.body, timestamp, signature, now=int(timestamp) + 301
    )

    record = await cron.store.deliveries.get("webhook", message_id)
    assert (record.state, record.attempts, record.session_key) == (DeliveryState.DELIVERED, 1, KEY)
    assert record.delivered_at == cron.clock.now()


async def test_5xx_and_429_are_retried_with_backoff_until_delivered(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    sleeps = Sleeps()
    async with HttpStub(scripted(503, 429, retry_after="3")) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started, sleeps)
        message_id = await say(cron, "retry me")
        requests = await receiver.wait_for(lambda r: len(r) == 3)
        await settled(manager, channel)

    assert sleeps.asked == [0.01, 3.0]  # exponential, and a server's Retry-After wins
    assert [r.json()["attempt"] for r in requests] == [1, 2, 3]
    assert {r.headers["x-agentcron-delivery"] for r in requests} == {message_id}
    assert [r.headers["webhook-id"] for r in requests] == [message_id] * 3  # dedupe on it
    for r in requests:  # each attempt is signed afresh
        assert Webhook(STANDARD_SECRET).verify(r.body, r.headers)["attempt"] >= 1
        assert r.headers["x-agentcron-signature"] == expected_signature(
            r.headers["x-agentcron-timestamp"], r.body
        )
    record = await cron.store.deliveries.get("webhook", message_id)
    assert (record.state, record.attempts, record.last_error) == (DeliveryState.DELIVERED, 3, None)


async def test_a_whsec_secret_signs_with_its_bytes_and_the_old_header_with_the_whole_string(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    whsec = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    cron = await make_cron(runner=Echo())
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started, secret=whsec)
        message_id = await say(cron, "hello")
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)

    assert request.headers["webhook-id"] == message_id
    assert Webhook(whsec).verify(request.body, request.headers)["text"] == "echo: hello"
    timestamp = request.headers["x-agentcron-timestamp"]
    legacy = hmac.new(whsec.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256)
    assert request.headers["x-agentcron-signature"] == "sha256=" + legacy.hexdigest()


async def test_a_400_is_not_retried(
    make_cron: CronFactory, started: list[ChannelManager], caplog: pytest.LogCaptureFixture
) -> None:
    cron = await make_cron(runner=Echo())
    sleeps = Sleeps()
    async with HttpStub(scripted(then=400)) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started, sleeps)
        with caplog.at_level(logging.ERROR, logger="agentcron.channels"):
            message_id = await say(cron, "bad")
            await receiver.wait_for(lambda r: len(r) == 1)
            await settled(manager, channel)
        assert len(receiver.received) == 1

    assert sleeps.asked == []
    record = await cron.store.deliveries.get("webhook", message_id)
    assert (record.state, record.attempts) == (DeliveryState.FAILED, 1)
    assert record.last_error is not None
    assert record.last_error.startswith("HTTP 400 Bad Request")
    (failure,) = [r for r in caplog.records if "delivery failed" in r.getMessage()]
    assert "permanent error" in failure.getMessage()
    assert (failure.channel, failure.session_key, failure.message_id) == (  # type: ignore[attr-defined]
        "webhook", KEY, message_id,
    )  # fmt: skip


async def test_connection_errors_are_retried_then_the_delivery_fails(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cron = await make_cron(runner=Echo())
    sleeps = Sleeps()
    retry = RetryPolicy(max_attempts=3, initial_delay=0.5, factor=3.0)
    manager, channel = await webhook_on(cron, f"http://127.0.0.1:{port}/", started, sleeps,
                                        retry=retry)  # fmt: skip
    message_id = await say(cron, "nobody home")
    await settled(manager, channel)
    assert sleeps.asked == [0.5, 1.5]
    record = await cron.store.deliveries.get("webhook", message_id)
    assert (record.state, record.attempts) == (DeliveryState.FAILED, 3)
    assert record.last_error is not None
    assert record.last_error.startswith("connection failed: ConnectError")


async def test_a_restart_resumes_pending_deliveries_and_never_resends_delivered_ones(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    statuses: list[int] = []

    async def respond(request: Received) -> Reply:
        return Reply(statuses[0] if statuses else 200)

    async with HttpStub(respond) as receiver:
        sleeps = Sleeps()
        sleeps.block = True  # the first retry waits until the process stops
        manager, channel = await webhook_on(cron, receiver.url, started, sleeps)
        delivered = await say(cron, "first")
        await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)
        statuses.append(503)
        pending = await say(cron, "second")
        await receiver.wait_for(lambda r: len(r) == 2)
        await sleeps.called.wait()  # the failed attempt is recorded before the retry wait
        await manager.stop()
        await cron.close()

        statuses.clear()
        cron2 = await make_cron(runner=Echo(), start=False)
        await cron2.store.open()
        waiting = await cron2.store.deliveries.get("webhook", pending)
        assert (waiting.state, waiting.attempts) == (DeliveryState.PENDING, 1)
        assert waiting.last_error is not None
        assert waiting.last_error.startswith("HTTP 503")
        await cron2.engine.start()
        manager2, channel2 = await webhook_on(cron2, receiver.url, started)
        requests = await receiver.wait_for(lambda r: len(r) == 3)
        await settled(manager2, channel2)
        # the same message handed over again (say, a duplicated event) is not sent again
        first = await cron2.store.deliveries.get("webhook", delivered)
        await channel2.send(OutboundMessage.from_payload(first.payload))
        await settled(manager2, channel2)
        assert len(receiver.received) == 3

    assert [r.headers["x-agentcron-delivery"] for r in requests] == [delivered, pending, pending]
    assert [r.headers["webhook-id"] for r in requests] == [delivered, pending, pending]
    assert requests[2].json()["text"] == "echo: second"
    assert requests[2].json()["attempt"] == 2
    done = await cron2.store.deliveries.get("webhook", pending)
    assert (done.state, done.attempts) == (DeliveryState.DELIVERED, 2)


async def test_routing_by_channel_and_legacy_deliveries(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    cron = await make_cron(runner=Echo())
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started, channels=["telegram"])
        await say(cron, "not for the webhook")  # a websocket session
        await cron.lanes.posts.deliver(
            "telegram:7", "the daily report", {"source": "legacy_automation",
                                               "automation_run_id": "r1"},
            channel="telegram", chat_id="7", channel_meta={"username": "bob"},
        )  # fmt: skip
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)
        assert len(receiver.received) == 1

    body = request.json()
    assert request.headers["x-agentcron-event"] == "message"
    assert (body["event"], body["kind"], body["status"], body["source"]) == (
        "message", "message", "succeeded", "legacy_automation",
    )  # fmt: skip
    assert (body["session_key"], body["channel"], body["chat_id"], body["channel_meta"]) == (
        "telegram:7", "telegram", "7", {"username": "bob"},
    )  # fmt: skip
    assert (body["text"], body["run_id"], body["turn_id"]) == ("the daily report", "r1", None)


class Broken:
    """A channel whose send always fails, to show failures are logged and contained."""

    name = "broken"

    def __init__(self, fail_start: bool = False) -> None:
        self.fail_start = fail_start
        self.stopped = False

    async def start(self, inbound: Inbound) -> None:
        if self.fail_start:
            raise OSError("port in use")

    async def stop(self) -> None:
        self.stopped = True

    async def send(self, message: OutboundMessage) -> None:
        raise RuntimeError("boom")

    def wants(self, message: OutboundMessage) -> bool:
        return True


async def test_a_failing_channel_is_logged_and_does_not_stop_the_others(
    make_cron: CronFactory, started: list[ChannelManager], caplog: pytest.LogCaptureFixture
) -> None:
    cron = await make_cron(runner=Echo())
    async with HttpStub(scripted()) as receiver:
        webhook = WebhookChannel(receiver.url, SECRET, sleep=Sleeps(), retry=FAST)
        manager = ChannelManager(cron, [Broken(), webhook])
        await manager.start()
        started.append(manager)
        with caplog.at_level(logging.ERROR, logger="agentcron.channels"):
            message_id = await say(cron, "one")
            await say(cron, "two")
            await receiver.wait_for(lambda r: len(r) == 2)
            await settled(manager, webhook)
    failures = [r for r in caplog.records if r.getMessage() == "channels: send failed"]
    assert len(failures) == 2
    assert (failures[0].channel, failures[0].message_id) == ("broken", message_id)  # type: ignore[attr-defined]
    assert failures[0].exc_info is not None


async def test_a_channel_that_cannot_start_stops_the_started_ones(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(runner=Echo())
    first, second = Broken(), Broken(fail_start=True)
    second.name = "broken2"
    manager = ChannelManager(cron, [first, second])
    with pytest.raises(ChannelStartError, match="'broken2' could not start: OSError: port in use"):
        await manager.start()
    assert first.stopped
    assert not manager.running


class Receipts:
    """A runner that keeps what each turn got and answers with a chart (its bytes) and a
    report (a URL).
    """

    def __init__(self) -> None:
        self.turns: list[TurnInput] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append(turn)
        chart = Attachment("photo", "chart.png", "image/png", data=b"\x89PNG chart")
        report = Attachment("document", "report.pdf", "application/pdf",
                            url="https://files.example/report.pdf")  # fmt: skip
        return Outcome.succeeded("Totals attached.", attachments=(chart, report))


async def test_hook_attachments_reach_the_turn_and_reply_files_are_posted_as_url_or_base64(
    make_cron: CronFactory, started: list[ChannelManager]
) -> None:
    runner = Receipts()
    cron = await make_cron(runner=runner)
    app = create_app(cron, token="t", hook_token="hook")
    receipt = b"%PDF receipt \x00\x01"
    body = {"session_key": "hook:books", "content": "file these", "attachments": [
        {"kind": "photo", "name": "scan.jpg", "mime_type": "image/jpeg",
         "url": "https://files.example/scan.jpg"},
        {"name": "receipt.pdf", "mime_type": "application/pdf",
         "data": base64.b64encode(receipt).decode()},
    ]}  # fmt: skip
    async with HttpStub(scripted()) as receiver:
        manager, channel = await webhook_on(cron, receiver.url, started)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            answer = await api.post(
                "/hooks/agent", json=body, headers={"Authorization": "Bearer hook"}
            )
            assert answer.status_code == 202, answer.text
        await wait_settled(cron.engine)
        (request,) = await receiver.wait_for(lambda r: len(r) == 1)
        await settled(manager, channel)

    (turn,) = runner.turns
    assert turn.attachments == (
        Attachment("photo", "scan.jpg", "image/jpeg", url="https://files.example/scan.jpg"),
        Attachment("document", "receipt.pdf", "application/pdf", len(receipt), data=receipt),
    )
    posted = request.json()
    assert posted["text"] == "Totals attached."
    assert posted["attachments"] == [
        {"kind": "photo", "name": "chart.png", "mime_type": "image/png", "size": len(b"\x89PNG chart"),
         "data": base64.b64encode(b"\x89PNG chart").decode()},
        {"kind": "document", "name": "report.pdf", "mime_type": "application/pdf",
         "url": "https://files.example/report.pdf"},
    ]  # fmt: skip
    # the transcript (and the body's meta) describe the files without their bytes
    user, reply = await cron.sessions.messages("hook:books")
    assert user.meta["attachments"] == [
        {"kind": "photo", "name": "scan.jpg", "mime_type": "image/jpeg",
         "url": "https://files.example/scan.jpg"},
        {"kind": "document", "name": "receipt.pdf", "mime_type": "application/pdf",
         "size": len(receipt), "inline": True},
    ]  # fmt: skip
    assert posted["meta"]["attachments"] == reply.meta["attachments"]
    assert "data" not in json.dumps(reply.meta)
    # the delivery record kept the bytes until sent (to resend after a restart), not after
    record = await cron.store.deliveries.get("webhook", reply.id)
    assert record.state is DeliveryState.DELIVERED
    assert record.payload["attachments"] == reply.meta["attachments"]
