"""The channel manager builds outbound messages from the events themselves (no store reads);
approval messages fit the delivery records and survive a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentcron.app import AgentCron
from agentcron.channels import ChannelManager, OutboundMessage
from agentcron.channels.manager import Inbound, approval_delivery_id
from agentcron.domain.attachments import Attachment
from agentcron.domain.events import ChatContext, EventBus, MessagePosted, StreamEnd
from agentcron.domain.sessions import Message
from agentcron.store.errors import SessionNotFoundError

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
KEY = "telegram:7"
CHAT = ChatContext(channel="telegram", chat_id="7", channel_meta={"username": "bob"})
ID = "0b9d7c7e-3f0e-4a53-9a55-2f4a1c1e8f00"  # a uuid4, as earlier versions stored (too long for apr.<id>)


class Collect:
    name = "collect"

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def start(self, inbound: Inbound) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self.sent.append(message)

    def wants(self, message: OutboundMessage) -> bool:
        return True


class Sessions:
    """Counts reads: the manager reads a session only for an event without its chat."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    async def get(self, key: str) -> Any:
        self.reads.append(key)
        if key != KEY:
            raise SessionNotFoundError(key)
        return SimpleNamespace(channel="telegram", chat_id="7", channel_meta={"from": "store"})


def reply(role: str = "assistant", **meta: Any) -> Message:
    return Message(id="m1", session_key=KEY, seq=2, role=role, content="hi there",
                   meta=dict(meta), created_at=T0)  # fmt: skip


@pytest.fixture
async def wired() -> AsyncIterator[tuple[EventBus, ChannelManager, Collect, Sessions]]:
    bus, sessions, channel = EventBus(), Sessions(), Collect()
    cron = SimpleNamespace(subscribe=bus.subscribe, sessions=sessions)
    manager = ChannelManager(cast(AgentCron, cron), [channel])
    await manager.start()
    yield bus, manager, channel, sessions
    await manager.stop()


async def test_a_turn_reply_goes_out_with_what_its_event_carries(
    wired: tuple[EventBus, ChannelManager, Collect, Sessions],
) -> None:
    bus, manager, channel, sessions = wired
    await bus.publish(StreamEnd(session_key=KEY, turn_id="t1", status="succeeded",
                                source="automation", run_id="r1",
                                reply=reply(automation_run_id="r1"), chat=CHAT))  # fmt: skip
    await manager.idle()
    assert channel.sent == [
        OutboundMessage(
            session_key=KEY, channel="telegram", chat_id="7", text="hi there", message_id="m1",
            status="succeeded", kind="turn", source="automation", turn_id="t1", run_id="r1",
            meta={"automation_run_id": "r1"}, channel_meta={"username": "bob"}, created_at=T0,
        )
    ]  # fmt: skip
    assert sessions.reads == []


async def test_a_message_without_its_chat_reads_the_session(
    wired: tuple[EventBus, ChannelManager, Collect, Sessions],
) -> None:
    bus, manager, channel, sessions = wired
    notice = reply(source="user", status="interrupted")
    await bus.publish(MessagePosted(session_key=KEY, message=notice))
    await manager.idle()
    (sent,) = channel.sent
    assert (sent.kind, sent.status, sent.source, sent.turn_id, sent.run_id) == (
        "message", "succeeded", "user", None, None,
    )  # fmt: skip
    assert (sent.channel, sent.chat_id, sent.channel_meta) == ("telegram", "7", {"from": "store"})
    assert sessions.reads == [KEY]


async def test_nothing_goes_out_without_an_assistant_reply_or_a_session(
    wired: tuple[EventBus, ChannelManager, Collect, Sessions],
) -> None:
    bus, manager, channel, sessions = wired
    await bus.publish(StreamEnd(session_key=KEY, turn_id="t1", status="failed", source="user",
                                chat=CHAT))  # fmt: skip
    await bus.publish(MessagePosted(session_key=KEY, message=reply(role="user"), chat=CHAT))
    gone = Message(id="m2", session_key="telegram:gone", seq=1, role="assistant", content="x",
                   meta={}, created_at=T0)  # fmt: skip
    await bus.publish(MessagePosted(session_key="telegram:gone", message=gone))
    await manager.idle()
    assert channel.sent == []
    assert sessions.reads == ["telegram:gone"]


def test_approval_messages_fit_the_delivery_records_and_survive_a_restart() -> None:
    assert approval_delivery_id("01JABCDEFGHJKMNPQRSTVWXYZ0", requested=True) == (
        "apr.01JABCDEFGHJKMNPQRSTVWXYZ0"
    )
    long_ids = {approval_delivery_id(ID, requested=r) for r in (True, False)}
    assert len(long_ids) == 2
    assert all(len(i) == 32 for i in long_ids)
    message = OutboundMessage(session_key="telegram:1", channel="telegram", chat_id="1",
                              text="t", message_id="apr.x", status="pending",
                              kind="approval_requested", approval={"id": "x", "tool": "t"})  # fmt: skip
    again = OutboundMessage.from_payload(message.to_payload())
    assert again == message
    assert (
        "approval"
        not in OutboundMessage.from_payload(
            {**message.to_payload(), "kind": "turn", "approval": None}
        ).to_payload()
    )


async def test_a_reply_s_files_go_out_with_it_and_survive_a_restart(
    wired: tuple[EventBus, ChannelManager, Collect, Sessions],
) -> None:
    bus, manager, channel, _ = wired
    files = (Attachment("photo", "p.png", "image/png", data=b"\x89PNG"),
             Attachment("document", url="https://files.example/a.pdf"))  # fmt: skip
    await bus.publish(StreamEnd(session_key=KEY, turn_id="t1", status="succeeded",
                                source="user", reply=reply(), chat=CHAT,
                                attachments=files))  # fmt: skip
    await manager.idle()
    (sent,) = channel.sent
    assert sent.attachments == files
    payload = sent.to_payload()
    assert payload["attachments"][0]["data"] == "iVBORw=="  # base64 in the delivery record
    assert OutboundMessage.from_payload(payload) == sent
    assert "attachments" not in replace(sent, attachments=()).to_payload()
