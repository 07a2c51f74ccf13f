"""Channel follow-ups any replica can finish: several AgentCron processes (instances) on one
database, each with its own Telegram channel, against one fake Bot API on loopback (one HTTP
server per instance, so each request shows which instance made it). The request's message id
is in the store; the edit after a decision is made once, by whichever instance handles the
decision first (an instance whose channels are down leaves it to the others), also after the
requesting instance is gone. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from agentcron.app import AgentCron
from agentcron.channels import ChannelManager, OutboundMessage, TelegramChannel
from agentcron.channels.manager import approval_delivery_id
from agentcron.domain.deliveries import Delivery, DeliveryState
from agentcron.store.errors import DeliveryNotFoundError
from agentcron.testing import wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.integration.test_channel_approvals import CHAT, KEY, calls, gated_cron, pending
from tests.integration.test_channels_telegram import FAST, TOKEN, FakeBotApi
from tests.integration.test_channels_webhook import HttpStub, Received, Reply, Sleeps

EDIT = f"/bot{TOKEN}/editMessageText"
Responder = Callable[[Received], Awaitable[Reply]]


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


class Instance:
    """One process of the deployment: an AgentCron, its channel manager and Telegram channel,
    talking to the shared fake Bot API through an HTTP server of its own.
    """

    def __init__(self, cron: AgentCron, server: HttpStub, sleeps: Sleeps) -> None:
        self.cron, self.server, self.sleeps = cron, server, sleeps
        self.telegram = TelegramChannel(
            TOKEN, [CHAT], api_base=server.url, poll_timeout=5, retry=FAST, sleep=sleeps
        )
        self.manager = ChannelManager(cron, [self.telegram])

    def edits(self) -> list[dict[str, Any]]:
        return [r.json() for r in self.server.received if r.path == EDIT]

    async def settle(self) -> None:
        await self.manager.idle()
        await self.telegram.outbox.idle()

    async def close(self) -> None:
        """Stop as `serve` does: the channels first, then AgentCron (turns cut at once)."""
        await self.manager.stop(grace=1.0)
        await self.cron.close(grace=0.05)


Launch = Callable[..., Awaitable[Instance]]


@pytest.fixture
async def launch(make_cron: CronFactory) -> AsyncIterator[Launch]:
    """Start instances on the test database; their channels are stopped at the end."""
    stack: list[Instance] = []
    servers: list[HttpStub] = []

    async def start(respond: Responder, *, run: bool = True) -> Instance:
        server = HttpStub(respond)
        await server.__aenter__()
        servers.append(server)
        instance = Instance(await gated_cron(make_cron), server, Sleeps())
        stack.append(instance)
        if run:
            await instance.manager.start()
        return instance

    yield start
    for instance in reversed(stack):
        await instance.manager.stop(grace=1.0)
    for server in servers:
        await server.__aexit__()


@pytest.fixture
def api() -> FakeBotApi:
    return FakeBotApi()


def edit_fails(api: FakeBotApi) -> Responder:
    """The Bot API as one instance sees it during an outage of edits: 502, nothing edited."""

    async def respond(request: Received) -> Reply:
        if request.path == EDIT:
            return Reply(502, {"ok": False, "error_code": 502, "description": "Bad Gateway"})
        return await api.respond(request)

    return respond


async def requested(api: FakeBotApi, cron: AgentCron, instance: Instance) -> tuple[str, int]:
    """A chat message to `instance` whose turn asks for approval: the approval id and the
    id of the request message (sent with its buttons).
    """
    await instance.manager.inbound("telegram", str(CHAT), "call delete_file with path=/tmp/r", {})
    approval = await pending(cron, KEY)
    await api.wait_for(lambda: any(m["reply_markup"] for m in api.messages.values()))
    (message_id,) = [i for i, m in api.messages.items() if m["reply_markup"]]
    await instance.telegram.outbox.idle()  # the request's record is settled (delivered)
    return approval.id, message_id


async def record(cron: AgentCron, approval_id: str, *, requested: bool) -> Delivery:
    delivery_id = approval_delivery_id(approval_id, requested=requested)
    found: Delivery = await cron.store.deliveries.get("telegram", delivery_id)
    return found


def shown_decided(api: FakeBotApi, message_id: int, outcome: str) -> None:
    edited = api.messages[message_id]
    assert outcome in edited["text"]
    assert "<code>delete_file</code>" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}


async def test_the_replica_that_handles_a_decision_edits_the_request_another_sent(
    api: FakeBotApi, launch: Launch
) -> None:
    a = await launch(api.respond)
    b = await launch(api.respond)
    a.cron.approvals.broker.poll = 0.02  # A's waiting call re-reads its record (real time)
    approval_id, message_id = await requested(api, a.cron, a)
    # B sent nothing (it only polls): the request went out through A
    assert {r.path for r in b.server.received} <= {f"/bot{TOKEN}/getUpdates"}
    # the request's chat and message id are in the store, where B reads them
    sent = await record(b.cron, approval_id, requested=True)
    assert (sent.state, sent.result) == (
        DeliveryState.DELIVERED,
        {"chat_id": CHAT, "message_id": message_id},
    )
    # A's channels are down for now (its turn still waits): only B can handle the decision
    await a.manager.stop(grace=1.0)

    await b.cron.approvals.decide(approval_id, "approve", by="api:ops")  # e.g. a POST to B
    await b.server.wait_for(lambda got: any(r.path == EDIT for r in got))
    await b.settle()
    (edit,) = b.edits()
    assert (edit["chat_id"], edit["message_id"]) == (CHAT, message_id)
    shown_decided(api, message_id, "✅ Approved by api:ops")
    done = await record(b.cron, approval_id, requested=False)
    assert (done.state, done.attempts) == (DeliveryState.DELIVERED, 1)
    assert done.result == {"chat_id": CHAT, "message_id": message_id}
    # A heard of it too: its turn went on and ran the tool
    await wait_settled(a.cron.engine)
    assert calls == ["/tmp/r"]

    # A's channels come back: nothing is left to edit, nothing is edited twice
    await a.manager.start()
    await a.settle()
    assert a.edits() == []
    assert len(api.called("editMessageText")) == 1


async def test_two_replicas_hearing_one_decision_edit_once(api: FakeBotApi, launch: Launch) -> None:
    a = await launch(api.respond)
    b = await launch(api.respond)
    a.cron.approvals.broker.poll = 0.01  # A re-reads the record all the time: both hear it
    approval_id, message_id = await requested(api, a.cron, a)
    await b.cron.approvals.decide(approval_id, "deny", by="api:ops")
    await api.wait_for(lambda: any("Denied by api:ops" in text for _, text in api.sent))
    await a.settle()
    await b.settle()
    assert len(api.called("editMessageText")) == 1
    assert len(a.edits()) + len(b.edits()) == 1
    shown_decided(api, message_id, "❌ Denied by api:ops")
    assert calls == []


async def test_a_decision_left_pending_by_a_stopped_replica_is_edited_by_a_fresh_one(
    api: FakeBotApi, launch: Launch
) -> None:
    a = await launch(api.respond)
    b = await launch(edit_fails(api))  # B cannot edit right now: its attempt is retried
    b.sleeps.block = True  # ...later, after its backoff, which outlasts B
    a.cron.approvals.broker.poll = 0.02
    approval_id, message_id = await requested(api, a.cron, a)
    await a.manager.stop(grace=1.0)  # A's channels are down: B handles the decision
    await b.cron.approvals.decide(approval_id, "approve", by="api:ops")
    await asyncio.wait_for(b.sleeps.called.wait(), 10)
    waiting = await record(b.cron, approval_id, requested=False)
    assert (waiting.state, waiting.attempts) == (DeliveryState.PENDING, 1)
    assert waiting.last_error is not None
    assert waiting.last_error.startswith("Telegram editMessageText failed (502)")
    await wait_settled(a.cron.engine)  # A heard of it: its turn ran the tool
    assert calls == ["/tmp/r"]

    await b.close()  # mid-backoff: the edit stays pending
    await a.close()  # the requesting instance is gone too
    assert api.called("editMessageText") == []
    assert api.messages[message_id]["reply_markup"] is not None  # still with its buttons

    c = await launch(api.respond)  # a fresh instance resumes the edit
    await c.server.wait_for(lambda got: any(r.path == EDIT for r in got))
    await c.settle()
    (edit,) = c.edits()
    assert (edit["chat_id"], edit["message_id"]) == (CHAT, message_id)
    shown_decided(api, message_id, "✅ Approved by api:ops")
    assert len(api.called("editMessageText")) == 1
    done = await record(c.cron, approval_id, requested=False)
    assert (done.state, done.attempts) == (DeliveryState.DELIVERED, 2)


async def test_a_decision_nobody_sent_is_caught_up_once_by_the_next_instances(
    api: FakeBotApi, launch: Launch
) -> None:
    a = await launch(api.respond)
    approval_id, message_id = await requested(api, a.cron, a)
    # A stops while its turn waits: the approval ends "cancelled" after A's channels stopped,
    # so no process sent the decision
    await a.close()
    c, d = await launch(api.respond, run=False), await launch(api.respond, run=False)
    ended = await c.cron.approvals.get(approval_id)
    assert (ended.state.value, ended.decided_by) == ("expired", "cancelled")
    assert api.called("editMessageText") == []
    with pytest.raises(DeliveryNotFoundError):
        await record(c.cron, approval_id, requested=False)

    # two fresh instances start at once: each looks for decisions nobody sent; one edits
    await asyncio.gather(c.manager.start(), d.manager.start())
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    await c.settle()
    await d.settle()
    assert len(api.called("editMessageText")) == 1
    assert len(c.edits()) + len(d.edits()) == 1
    shown_decided(api, message_id, "⏹ Cancelled: the turn that asked was stopped")
    done = await record(c.cron, approval_id, requested=False)
    assert (done.state, done.attempts) == (DeliveryState.DELIVERED, 1)
    # and a later start finds nothing left to do
    assert await c.manager.catch_up() == 0
    assert calls == []


async def test_a_long_reply_resumed_by_another_instance_sends_only_the_parts_left(
    api: FakeBotApi, launch: Launch
) -> None:
    a = await launch(api.respond)
    line = "word " * 600  # 3000 characters: two of them are over Telegram's 4096
    api.fail_sends[1] = {"error_code": 502, "description": "Bad Gateway"}  # the second part
    a.sleeps.block = True  # A's retry waits past A's end
    message = OutboundMessage(session_key=KEY, channel="telegram", chat_id=str(CHAT),
                              text=f"{line}\n{line}", message_id="m-long",
                              status="succeeded")  # fmt: skip
    await a.telegram.send(message)
    await asyncio.wait_for(a.sleeps.called.wait(), 10)
    half = await a.cron.store.deliveries.get("telegram", "m-long")
    assert (half.state, half.result) == (
        DeliveryState.PENDING,
        {"chat_id": CHAT, "message_ids": [1000]},
    )
    await a.close()

    b = await launch(api.respond)
    await api.wait_for(lambda: len(api.sent) == 2)
    await b.settle()
    assert api.sent == [(CHAT, line), (CHAT, line)]  # the first part was not sent again
    done = await b.cron.store.deliveries.get("telegram", "m-long")
    assert (done.state, done.attempts) == (DeliveryState.DELIVERED, 2)
    assert done.result == {"chat_id": CHAT, "message_ids": [1000, 1002]}
