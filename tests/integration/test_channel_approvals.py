"""Approvals through a session's channel: Telegram buttons against the fake Bot API, the
webhook's request with a decision URL (real HTTP to the local fakes, a real AgentCron with the
offline model calling a user tool that requires approval).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.approval_links import ApprovalLinks
from agentcron.channels import (
    ChannelManager,
    TelegramChannel,
    WebhookChannel,
)
from agentcron.channels.manager import approval_delivery_id
from agentcron.channels.telegram import CALLBACK_DATA_LIMIT
from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.states import RunState, TurnState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.helpers.channels import RecordingChannel
from tests.integration.test_channels_telegram import FAST, TOKEN, FakeBotApi
from tests.integration.test_channels_webhook import (
    SECRET,
    HttpStub,
    Received,
    Sleeps,
    expected_signature,
    scripted,
)

calls: list[str] = []
API_TOKEN = "api-token-for-tests"
PUBLIC = "http://agentcron.test"
CHAT = 42
OTHER = 43  # another chat on the allow-list
KEY = f"telegram:{CHAT}"


def delete_file(path: str) -> str:
    """Delete a file."""
    calls.append(path)
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


async def gated_cron(make_cron: CronFactory, **kw: Any) -> AgentCron:
    kw.setdefault("model", OfflineModel(0))
    return await make_cron(runner=None, tools=[UserTool(delete_file, requires_approval=True)], **kw)


async def get(cron: AgentCron, approval_id: str) -> Approval:
    found: Approval = await cron.approvals.get(approval_id)
    return found


async def pending(cron: AgentCron, key: str) -> Approval:
    for _ in range(2000):
        found = await cron.approvals.list(key)
        if found:
            return found[0]
        await asyncio.sleep(0.005)
    raise AssertionError("no approval was requested")


def cleanup_model() -> FunctionModel:
    """A model that, when a turn begins, calls delete_file(path="/srv/old"), then reports."""

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returns:
            yield f"cleanup: {returns[0].content}"
            return
        args = json.dumps({"path": "/srv/old"})
        yield {0: DeltaToolCall("delete_file", args, tool_call_id="call-1")}

    return FunctionModel(stream_function=stream)


# --- Telegram ---------------------------------------------------------------------------------


@pytest.fixture
async def bot() -> AsyncIterator[tuple[FakeBotApi, HttpStub]]:
    api = FakeBotApi()
    async with HttpStub(api.respond) as server:
        yield api, server


@pytest.fixture
async def managers() -> AsyncIterator[list[ChannelManager]]:
    started: list[ChannelManager] = []
    yield started
    for manager in reversed(started):
        await manager.stop(grace=1.0)


async def telegram_on(
    cron: AgentCron, url: str, managers: list[ChannelManager]
) -> tuple[ChannelManager, TelegramChannel]:
    channel = TelegramChannel(
        TOKEN, [CHAT, OTHER], api_base=url, poll_timeout=5, retry=FAST, sleep=Sleeps()
    )
    manager = ChannelManager(cron, [channel])
    await manager.start()
    managers.append(manager)
    return manager, channel


async def request_message(bot: FakeBotApi) -> tuple[int, dict[str, Any]]:
    """The message with buttons the bot sent: its id and what the chat shows."""
    await bot.wait_for(lambda: any(m["reply_markup"] for m in bot.messages.values()))
    ((message_id, shown),) = [(i, m) for i, m in bot.messages.items() if m["reply_markup"]]
    return message_id, shown


async def test_a_chat_turn_asks_in_its_telegram_chat_and_an_allowed_press_approves(
    make_cron: CronFactory,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, server = bot
    cron = await gated_cron(make_cron)
    await telegram_on(cron, server.url, managers)
    api.push(CHAT, "call delete_file with path=/tmp/<x>&y", username="ada")
    approval = await pending(cron, KEY)
    message_id, shown = await request_message(api)
    assert "callback_query" in api.allowed_updates

    # the request: tool and arguments, escaped for HTML, and the two buttons
    (sent,) = api.called("sendMessage")
    assert (sent["chat_id"], sent["parse_mode"]) == (CHAT, "HTML")
    assert "<code>delete_file</code>" in shown["text"]
    assert "/tmp/&lt;x&gt;&amp;y" in shown["text"]
    assert "<x>" not in shown["text"]
    (buttons,) = shown["reply_markup"]["inline_keyboard"]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("✅ Approve", f"ap:{approval.id}:a"),
        ("❌ Deny", f"ap:{approval.id}:d"),
    ]
    assert all(len(b["callback_data"].encode()) <= CALLBACK_DATA_LIMIT for b in buttons)
    assert calls == []

    # a press from a chat not on the allow-list is refused, answered, logged; nothing decided
    with caplog.at_level(logging.WARNING, logger="agentcron.channels"):
        refused = api.press(99, message_id, f"ap:{approval.id}:a", username="mallory")
        await api.wait_for(lambda: len(api.called("answerCallbackQuery")) == 1)
    (answer,) = api.called("answerCallbackQuery")
    assert answer["callback_query_id"] == refused
    assert answer["show_alert"] is True
    assert answer["text"] == "Not allowed: this chat is not on the bot's allow-list."
    assert (await get(cron, approval.id)).pending
    (logged,) = [r for r in caplog.records if "not on the allow-list refused" in r.getMessage()]
    assert (logged.chat_id, logged.username) == ("99", "mallory")  # type: ignore[attr-defined]
    assert not any(TOKEN in r.getMessage() for r in caplog.records)
    assert calls == []

    # a press in the chat approves: the tool runs, the press is answered, the message edited
    pressed = api.press(CHAT, message_id, f"ap:{approval.id}:a", username="ada")
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    answer = api.called("answerCallbackQuery")[1]
    assert (answer["callback_query_id"], answer["text"]) == (
        pressed,
        "✅ Approved by telegram:ada.",
    )
    decided = await get(cron, approval.id)
    assert (decided.state, decided.decided_by) == (ApprovalState.APPROVED, "telegram:ada")
    await api.wait_for(lambda: (CHAT, "(offline model) Done: deleted /tmp/<x>&y") in api.sent)
    assert calls == ["/tmp/<x>&y"]
    edited = api.messages[message_id]
    assert edited["reply_markup"] == {"inline_keyboard": []}
    assert "✅ Approved by telegram:ada" in edited["text"]
    assert "<code>delete_file</code>" in edited["text"]

    # a late press (the same button again) answers with the state; nothing changes
    api.press(CHAT, message_id, f"ap:{approval.id}:d", username="ada")
    await api.wait_for(lambda: len(api.called("answerCallbackQuery")) == 3)
    assert api.called("answerCallbackQuery")[2]["text"] == (
        "Already decided: ✅ Approved by telegram:ada."
    )
    assert (await get(cron, approval.id)).state is ApprovalState.APPROVED
    assert calls == ["/tmp/<x>&y"]


async def test_a_scheduled_turn_asks_its_telegram_chat_and_a_press_denies(
    make_cron: CronFactory,
    clock: FakeClock,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
) -> None:
    api, server = bot
    cron = await gated_cron(make_cron, model=cleanup_model())
    manager, telegram = await telegram_on(cron, server.url, managers)
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(
        name="cleanup", when="every day at 9", message="clean up old files", session_key=KEY
    )
    clock.advance(timedelta(hours=21))  # 12:00 -> 09:00 the next day
    approval = await pending(cron, KEY)
    message_id, shown = await request_message(api)
    assert shown["chat_id"] == CHAT
    assert approval.turn_id is not None

    # another allowed chat cannot decide this chat's approval (a forged press)
    api.press(OTHER, message_id, f"ap:{approval.id}:a", username="eve")
    await api.wait_for(lambda: len(api.called("answerCallbackQuery")) == 1)
    assert api.called("answerCallbackQuery")[0]["text"] == (
        "Not allowed: this approval is not this chat's."
    )
    assert (await get(cron, approval.id)).pending

    api.press(CHAT, message_id, f"ap:{approval.id}:d", username="bob", user_id=7)
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    assert api.called("answerCallbackQuery")[1]["text"] == "❌ Denied by telegram:bob."
    await wait_settled(cron.engine)
    await manager.idle()
    await telegram.outbox.idle()
    assert calls == []
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    turn = await cron.sessions.turn(approval.turn_id)
    assert turn.state is TurnState.SUCCEEDED
    # the closure of the scheduled turn says so, in the same chat
    assert (CHAT, "cleanup: Denied by telegram:bob.") in api.sent
    edited = api.messages[message_id]
    assert "❌ Denied by telegram:bob" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}
    records = await cron.store.deliveries.list_deliveries(channel="telegram")
    states = {r.message_id: r.state for r in records}
    assert states[approval_delivery_id(approval.id, requested=True)] is DeliveryState.DELIVERED
    assert states[approval_delivery_id(approval.id, requested=False)] is DeliveryState.DELIVERED
    # the request's chat and message are kept with its record: the edit reads them there
    kept = {r.message_id: r.result for r in records}
    where = {"chat_id": CHAT, "message_id": message_id}
    assert kept[approval_delivery_id(approval.id, requested=True)] == where
    assert kept[approval_delivery_id(approval.id, requested=False)] == where


async def test_a_decision_made_by_another_process_edits_the_request(
    make_cron: CronFactory,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
) -> None:
    api, server = bot
    cron = await gated_cron(make_cron)  # holds the chat's turn and its Telegram channel
    cron.approvals.broker.poll = 0.02  # its re-read of the record (real time)
    await telegram_on(cron, server.url, managers)
    replica = await gated_cron(make_cron)  # another process on the same database, no channel
    api.push(CHAT, "call delete_file with path=/tmp/r", username="ada")
    approval = await pending(cron, KEY)
    message_id, _ = await request_message(api)
    await replica.approvals.decide(approval.id, "approve", by="api:ops")  # e.g. its POST
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    edited = api.messages[message_id]
    assert "✅ Approved by api:ops" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}
    await api.wait_for(lambda: (CHAT, "(offline model) Done: deleted /tmp/r") in api.sent)
    assert calls == ["/tmp/r"]


async def test_a_deleted_sessions_request_is_shown_cancelled(
    make_cron: CronFactory,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
) -> None:
    api, server = bot
    cron = await gated_cron(make_cron)
    await telegram_on(cron, server.url, managers)
    api.push(CHAT, "call delete_file with path=/tmp/d", username="ada")
    await pending(cron, KEY)
    message_id, _ = await request_message(api)
    assert (await cron.sessions.delete(KEY)).deleted
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    edited = api.messages[message_id]
    assert "⏹ Cancelled: its session was deleted" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}
    assert calls == []


async def test_a_decision_whose_session_is_already_gone_still_edits_the_request(
    make_cron: CronFactory,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
) -> None:
    """The order a session's deletion can leave behind: the session row is gone by the time
    the manager handles the decision's event. The edit needs only the request's record, and
    the session key names the chat: the request still loses its buttons.
    """
    api, server = bot
    cron = await gated_cron(make_cron)
    await telegram_on(cron, server.url, managers)
    api.push(CHAT, "call delete_file with path=/tmp/g", username="ada")
    approval = await pending(cron, KEY)
    message_id, _ = await request_message(api)
    await cron.store.sessions.delete_session(KEY)  # gone before the decision is announced
    await cron.approvals.decide(approval.id, "deny", by="ana")
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    edited = api.messages[message_id]
    assert "Denied" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}


async def test_an_approval_that_times_out_is_shown_expired_without_buttons(
    make_cron: CronFactory,
    clock: FakeClock,
    bot: tuple[FakeBotApi, HttpStub],
    managers: list[ChannelManager],
) -> None:
    api, server = bot
    cron = await gated_cron(make_cron)
    await telegram_on(cron, server.url, managers)
    api.push(CHAT, "call delete_file with path=/tmp/z", username="ada")
    message_id, _ = await request_message(api)
    clock.advance(timedelta(minutes=5))  # nobody decides: the default timeout passes
    await api.wait_for(lambda: len(api.called("editMessageText")) == 1)
    edited = api.messages[message_id]
    assert "⌛ Expired: nobody decided in time" in edited["text"]
    assert edited["reply_markup"] == {"inline_keyboard": []}
    (gone,) = await cron.approvals.list(KEY, pending_only=False)
    # a press after the expiry only gets the state
    api.press(CHAT, message_id, f"ap:{gone.id}:a", username="ada")
    await api.wait_for(lambda: len(api.called("answerCallbackQuery")) == 1)
    assert api.called("answerCallbackQuery")[0]["text"].startswith("Already decided: ⌛ Expired")
    assert calls == []


# --- webhook ----------------------------------------------------------------------------------

WEB_KEY = "websocket:abc"


def events_of(received: list[Received], event: str) -> list[dict[str, Any]]:
    return [r.json() for r in received if r.headers.get("x-agentcron-event") == event]


async def test_the_webhook_request_carries_a_decision_url_that_decides_it(
    make_cron: CronFactory, managers: list[ChannelManager]
) -> None:
    cron = await gated_cron(make_cron)
    async with HttpStub(scripted()) as receiver:
        channel = WebhookChannel(receiver.url, SECRET, retry=FAST, sleep=Sleeps())
        links = ApprovalLinks(API_TOKEN, public_url=PUBLIC)
        manager = ChannelManager(cron, [channel], approval_links=links)
        await manager.start()
        managers.append(manager)
        app = create_app(cron, token=API_TOKEN, channels=manager)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=PUBLIC) as client:
            turn = await cron.sessions.send(WEB_KEY, "call delete_file with path=/tmp/x")
            approval = await pending(cron, WEB_KEY)
            await receiver.wait_for(lambda r: bool(events_of(r, "approval_requested")))
            (request,) = [
                r
                for r in receiver.received
                if r.headers["x-agentcron-event"] == "approval_requested"
            ]
            timestamp = request.headers["x-agentcron-timestamp"]
            assert request.headers["x-agentcron-signature"] == expected_signature(
                timestamp, request.body
            )
            body = request.json()
            assert (body["event"], body["kind"], body["status"]) == (
                "approval_requested",
                "approval_requested",
                "pending",
            )
            assert (body["session_key"], body["channel"], body["turn_id"]) == (
                WEB_KEY,
                "websocket",
                turn.id,
            )
            sent = body["approval"]
            assert (sent["id"], sent["tool"], sent["args"], sent["state"]) == (
                approval.id,
                "delete_file",
                {"path": "/tmp/x"},
                "pending",
            )
            assert (sent["session_key"], sent["turn_id"]) == (WEB_KEY, turn.id)
            assert datetime.fromisoformat(sent["expires_at"]) == approval.expires_at
            url = sent["decision_url"]
            assert url.startswith(f"{PUBLIC}/api/approvals/{approval.id}/decide?token=")
            (token,) = parse_qs(urlsplit(url).query)["token"]

            # no token, a wrong one, another approval's: 403, nothing decided
            where = f"/api/approvals/{approval.id}/decide"
            for params in ({}, {"token": "x" * 43}, {"token": links.token("other")}):
                refused = await client.post(where, params=params, json={"decision": "approve"})
                assert refused.status_code == 403, refused.text
                assert refused.json()["error"] == "forbidden"
            # the API token is no decision token either
            bearer = {"Authorization": f"Bearer {API_TOKEN}"}
            refused = await client.post(where, headers=bearer, json={"decision": "approve"})
            assert refused.status_code == 403
            bad = await client.post(url, json={"decision": "maybe"})
            assert bad.status_code == 422
            assert (await get(cron, approval.id)).pending
            assert calls == []

            done = await client.post(url, json={"decision": "approve"})
            assert done.status_code == 200, done.text
            assert (done.json()["state"], done.json()["decided_by"]) == ("approved", "webhook")
            again = await client.post(url, json={"decision": "deny"})
            assert again.status_code == 409
            assert again.json()["error"] == "conflict"

        await receiver.wait_for(lambda r: bool(events_of(r, "turn.result")))
        await wait_settled(cron.engine)
        await manager.idle()
        await channel.outbox.idle()
        assert calls == ["/tmp/x"]
        (result,) = events_of(receiver.received, "turn.result")
        assert result["text"] == "(offline model) Done: deleted /tmp/x"
        (decided,) = events_of(receiver.received, "approval_decided")
        assert (decided["status"], decided["approval"]["decided_by"]) == ("approved", "webhook")
        assert decided["approval"]["decision_url"] is None
        # the capability is made at each attempt, never kept in the delivery records
        records = await cron.store.deliveries.list_deliveries(channel="webhook")
        assert len(records) == 3
        assert all(r.state is DeliveryState.DELIVERED for r in records)
        assert token not in json.dumps([r.payload for r in records])


async def test_a_webhook_denial_by_url_reaches_the_model(
    make_cron: CronFactory, managers: list[ChannelManager]
) -> None:
    cron = await gated_cron(make_cron)
    async with HttpStub(scripted()) as receiver:
        channel = WebhookChannel(receiver.url, SECRET, retry=FAST, sleep=Sleeps())
        manager = ChannelManager(
            cron, [channel], approval_links=ApprovalLinks(API_TOKEN, public_url=PUBLIC + "/")
        )
        await manager.start()
        managers.append(manager)
        app = create_app(cron, token=API_TOKEN, channels=manager)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=PUBLIC) as client:
            await cron.sessions.send(WEB_KEY, "call delete_file with path=/tmp/x")
            await receiver.wait_for(lambda r: bool(events_of(r, "approval_requested")))
            (body,) = events_of(receiver.received, "approval_requested")
            url = body["approval"]["decision_url"]
            assert url.startswith(f"{PUBLIC}/api/approvals/")  # no double slash
            done = await client.post(url, json={"decision": "deny", "by": "ops-bot"})
            assert done.status_code == 200, done.text
        await receiver.wait_for(lambda r: bool(events_of(r, "turn.result")))
        (result,) = events_of(receiver.received, "turn.result")
        assert "Denied by webhook:ops-bot." in result["text"]
        assert calls == []


async def test_without_a_public_url_the_decision_url_is_null(
    make_cron: CronFactory, clock: FakeClock, managers: list[ChannelManager]
) -> None:
    cron = await gated_cron(make_cron)
    async with HttpStub(scripted()) as receiver:
        channel = WebhookChannel(receiver.url, SECRET, retry=FAST, sleep=Sleeps())
        manager = ChannelManager(cron, [channel], approval_links=ApprovalLinks(API_TOKEN))
        await manager.start()
        managers.append(manager)
        await cron.sessions.send(WEB_KEY, "call delete_file with path=/tmp/x")
        await pending(cron, WEB_KEY)
        clock.advance(timedelta(minutes=5))
        await receiver.wait_for(lambda r: bool(events_of(r, "approval_decided")))
        (body,) = events_of(receiver.received, "approval_requested")
        assert body["approval"]["decision_url"] is None
        (decided,) = events_of(receiver.received, "approval_decided")
        assert (decided["approval"]["state"], decided["approval"]["decided_by"]) == (
            "expired",
            "timeout",
        )


async def test_approvals_go_only_to_channels_that_carry_them(
    make_cron: CronFactory, clock: FakeClock, managers: list[ChannelManager]
) -> None:
    cron = await gated_cron(make_cron)
    own = RecordingChannel()  # knows nothing of approvals: it wants every message
    async with HttpStub(scripted()) as receiver:
        webhook = WebhookChannel(receiver.url, SECRET, retry=FAST, sleep=Sleeps())
        manager = ChannelManager(cron, [own, webhook])
        await manager.start()
        managers.append(manager)
        turn = await cron.sessions.send(WEB_KEY, "call delete_file with path=/tmp/x")
        await pending(cron, WEB_KEY)
        clock.advance(timedelta(minutes=5))
        await receiver.wait_for(lambda r: bool(events_of(r, "turn.result")))
        await wait_settled(cron.engine)
        await manager.idle()
        assert [m.kind for m in own.got] == ["turn"]
        assert own.got[0].turn_id == turn.id
        kinds = [r.headers["x-agentcron-event"] for r in receiver.received]
        assert sorted(kinds) == ["approval_decided", "approval_requested", "turn.result"]
