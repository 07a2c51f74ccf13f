"""The Telegram channel against a fake Bot API on localhost, driving a real AgentCron."""

from __future__ import annotations

import asyncio
import email.policy
import logging
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from email.parser import BytesParser
from typing import Any

import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager, OutboundMessage, RetryPolicy, TelegramChannel
from agentcron.domain.attachments import Attachment
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.jobs import JobKind
from agentcron.limits import MAX_ATTACHMENT_BYTES
from agentcron.store import SessionNotFoundError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.integration.test_channels_webhook import Echo, HttpStub, Received, Reply, Sleeps

TOKEN = "123456:test-token_ABC"
MIN = timedelta(minutes=1)
FAST = RetryPolicy(max_attempts=4, initial_delay=0.01, max_delay=5.0)


class FakeBotApi:
    """getUpdates serves scripted updates (long polling, offsets); sendMessage is recorded;
    button presses (callback queries) are updates too, and answerCallbackQuery,
    editMessageText and editMessageReplyMarkup act on the messages it keeps, as Telegram does
    (an edit of a message it never sent is a 400, an edit that changes nothing too).
    Files: a person's photo or document (`push_file`) is kept under a file id; getFile names
    its path and `GET /file/bot<token>/<path>` serves its bytes. sendPhoto / sendDocument take
    a URL (JSON) or an upload (multipart): `calls` keeps the fields, an upload as
    (filename, content type, bytes).
    """

    METHODS = (
        "getUpdates",
        "sendMessage",
        "answerCallbackQuery",
        "editMessageText",
        "editMessageReplyMarkup",
        "getFile",
        "sendPhoto",
        "sendDocument",
    )

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.sent: list[tuple[int | str, str]] = []
        self.offsets: list[int | None] = []
        self.fail_polls: list[dict[str, Any]] = []  # error answers for the next getUpdates
        self.fail_sends: dict[int, dict[str, Any]] = {}  # sendMessage call number -> error
        self.calls: list[tuple[str, dict[str, Any]]] = []  # every call but getUpdates
        self.messages: dict[int, dict[str, Any]] = {}  # message id -> what the chat shows
        self.allowed_updates: list[Any] = []
        self.files: dict[str, bytes] = {}  # file id -> its bytes
        self.fail_files: list[dict[str, Any]] = []  # error answers for the next file sends
        self._send_calls = 0
        self._new = asyncio.Event()
        self._changed = asyncio.Condition()
        self._next_id = 1

    def push(self, chat_id: int, text: str | None, **sender: Any) -> None:
        message: dict[str, Any] = {
            "message_id": self._next_id, "date": 0,
            "chat": {"id": chat_id, "type": "private"},
            "from": {"id": chat_id, "is_bot": False, **sender},
        }  # fmt: skip
        if text is not None:
            message["text"] = text
        self._update({"message": message})

    def push_file(
        self, chat_id: int, kind: str, data: bytes, caption: str | None = None, **fields: Any
    ) -> None:
        """A person sends a photo (in two sizes, as Telegram does) or a document."""
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = data
        big = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data),
               **fields}  # fmt: skip
        message: dict[str, Any] = {
            "message_id": self._next_id, "date": 0,
            "chat": {"id": chat_id, "type": "private"},
            "from": {"id": chat_id, "is_bot": False},
        }  # fmt: skip
        if kind == "photo":
            thumb = {"file_id": "thumb", "file_unique_id": "t", "width": 90, "height": 60}
            message["photo"] = [thumb, {**big, "width": 1280, "height": 853}]
        else:
            message["document"] = big
        if caption is not None:
            message["caption"] = caption
        self._update({"message": message})

    def press(self, chat_id: int, message_id: int, data: str, **sender: Any) -> str:
        """A person presses an inline button of `message_id` as seen in `chat_id`; the query id."""
        shown = self.messages.get(message_id, {})
        query_id = f"q{self._next_id}"
        self._update({"callback_query": {
            "id": query_id, "chat_instance": "ci", "data": data,
            "from": {"id": sender.pop("user_id", chat_id), "is_bot": False, **sender},
            "message": {"message_id": message_id, "date": 0, "text": shown.get("text", ""),
                        "chat": {"id": chat_id, "type": "private"}},
        }})  # fmt: skip
        return query_id

    def _update(self, update: dict[str, Any]) -> None:
        self.updates.append({"update_id": self._next_id, **update})
        self._next_id += 1
        self._new.set()

    def called(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def wait_for(self, predicate: Callable[[], bool], seconds: float = 10.0) -> None:
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(predicate)

    async def _record(self, items: list[Any], item: Any) -> None:
        async with self._changed:
            items.append(item)
            self._changed.notify_all()

    async def respond(self, request: Received) -> Reply:
        prefix = f"/bot{TOKEN}/"
        downloads = f"/file/bot{TOKEN}/files/"
        if request.method == "GET" and request.path.startswith(downloads):
            found = self.files.get(request.path.removeprefix(downloads))
            return Reply(200, found) if found is not None else Reply(404, b"")
        method, params = request.path.removeprefix(prefix), _params(request)
        if not request.path.startswith(prefix) or method not in self.METHODS:
            return Reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        if method == "getFile":
            if params.get("file_id") not in self.files:
                return _error({"error_code": 400, "description": "Bad Request: invalid file_id"})
            path = {"file_id": params["file_id"], "file_path": f"files/{params['file_id']}"}
            return Reply(200, {"ok": True, "result": path})
        if method in ("sendPhoto", "sendDocument"):
            if self.fail_files:
                return _error(self.fail_files.pop(0))
            await self._record(self.calls, (method, params))
            message_id, self._next_id = 5000 + self._next_id, self._next_id + 1
            return Reply(200, {"ok": True, "result": {"message_id": message_id}})
        if method == "getUpdates":
            if self.fail_polls:
                return _error(self.fail_polls.pop(0))
            return Reply(200, {"ok": True, "result": await self.get_updates(params)})
        if method == "sendMessage":
            call, self._send_calls = self._send_calls, self._send_calls + 1
            if call in self.fail_sends:
                return _error(self.fail_sends[call])
            message_id = 1000 + call
            self.messages[message_id] = {"chat_id": params["chat_id"], "text": params["text"],
                                         "reply_markup": params.get("reply_markup")}  # fmt: skip
            await self._record(self.sent, (params["chat_id"], params["text"]))
            await self._record(self.calls, (method, params))
            return Reply(200, {"ok": True, "result": {"message_id": message_id}})
        await self._record(self.calls, (method, params))
        if method == "answerCallbackQuery":
            return Reply(200, {"ok": True, "result": True})
        shown = self.messages.get(params.get("message_id", -1))
        if shown is None or shown["chat_id"] != params.get("chat_id"):
            return _error(
                {"error_code": 400, "description": "Bad Request: message to edit not found"}
            )
        new = {**shown, "reply_markup": params.get("reply_markup")}
        if method == "editMessageText":
            new["text"] = params["text"]
        if new == shown:
            return _error(
                {"error_code": 400, "description": "Bad Request: message is not modified"}
            )
        self.messages[params["message_id"]] = new
        return Reply(200, {"ok": True, "result": {"message_id": params["message_id"]}})

    async def get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = params.get("offset")
        self.allowed_updates = params.get("allowed_updates", self.allowed_updates)
        # Telegram forgets updates once a later offset confirms them.
        if offset is not None:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        await self._record(self.offsets, offset)
        if not self.updates and params.get("timeout"):
            self._new.clear()
            try:
                async with asyncio.timeout(float(params["timeout"])):
                    await self._new.wait()
            except TimeoutError:
                return []
        return list(self.updates[: params.get("limit", 100)])


def _params(request: Received) -> dict[str, Any]:
    """A Bot API call's fields: JSON, or multipart form-data (an upload: a tuple)."""
    kind = request.headers.get("content-type", "")
    if not kind.startswith("multipart/form-data"):
        return dict(request.json())
    head = f"Content-Type: {kind}\r\n\r\n".encode()
    form = BytesParser(policy=email.policy.HTTP).parsebytes(head + request.body)
    found: dict[str, Any] = {}
    for part in form.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        if part.get_filename() is not None:
            found[str(name)] = (part.get_filename(), part.get_content_type(), data)
        else:
            found[str(name)] = data.decode()
    return found


def _error(error: dict[str, Any]) -> Reply:
    return Reply(error["error_code"], {"ok": False, **error})


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeBotApi, HttpStub]]:
    bot = FakeBotApi()
    async with HttpStub(bot.respond) as server:
        yield bot, server


async def telegram_on(
    cron: AgentCron, url: str, allowed: list[int | str], **kw: Any
) -> tuple[ChannelManager, TelegramChannel]:
    kw.setdefault("retry", FAST)
    kw.setdefault("sleep", Sleeps())
    channel = TelegramChannel(TOKEN, allowed, api_base=url, poll_timeout=5, **kw)
    manager = ChannelManager(cron, [channel])
    await manager.start()
    return manager, channel


async def test_a_reminder_asked_for_on_telegram_comes_back_to_that_chat(
    make_cron: CronFactory,
    clock: FakeClock,
    api: tuple[FakeBotApi, HttpStub],
    caplog: pytest.LogCaptureFixture,
) -> None:
    bot, server = api
    cron = await make_cron(runner=None, model=OfflineModel(0))
    manager, telegram = await telegram_on(cron, server.url, [42])
    try:
        with caplog.at_level(logging.WARNING, logger="agentcron.channels"):
            bot.push(42, "remind me in 10 minutes to stretch", username="ada", first_name="Ada")
            bot.push(99, "remind me in 5 minutes to hack", username="mallory")
            await bot.wait_for(lambda: len(bot.sent) == 1)
        await wait_settled(cron.engine)
        (chat, reply), = bot.sent  # fmt: skip
        assert chat == 42
        assert reply.startswith("(offline model) Done: Scheduled “stretch”")

        session = await cron.sessions.get("telegram:42")
        assert (session.channel, session.chat_id) == ("telegram", "42")
        assert session.channel_meta == {"username": "ada", "first_name": "Ada", "user_id": 42,
                                        "chat_type": "private"}  # fmt: skip
        (job,) = await cron.jobs.list()
        assert (job.session_key, job.name) == ("telegram:42", "stretch")
        assert job.kind is JobKind.AGENT_TURN
        assert job.channel is None  # bound through its session, not legacy delivery fields
        # the other chat got nothing and has no session
        with pytest.raises(SessionNotFoundError):
            await cron.sessions.get("telegram:99")
        assert [s.key for s in await cron.sessions.list()] == ["telegram:42"]
        (ignored,) = [r for r in caplog.records if "not on the allow-list" in r.getMessage()]
        assert (ignored.chat_id, ignored.username) == ("99", "mallory")  # type: ignore[attr-defined]

        clock.advance(9 * MIN)
        await wait_settled(cron.engine)
        assert len(bot.sent) == 1
        clock.advance(MIN)
        await wait_settled(cron.engine)
        await bot.wait_for(lambda: len(bot.sent) == 2)
        assert bot.sent[1] == (42, "(offline model) Reminder: stretch.")
        (run,) = await cron.runs.list(job.id)
        await manager.idle()
        await telegram.outbox.idle()
        records = await cron.store.deliveries.list_deliveries(channel="telegram")
        assert [(r.state, r.payload["source"], r.payload["run_id"]) for r in records] == [
            (DeliveryState.DELIVERED, "user", None),
            (DeliveryState.DELIVERED, "automation", run.id),
        ]
        # both updates were confirmed by the next poll
        assert 3 in bot.offsets
    finally:
        await manager.stop()
    assert bot.offsets[0] is None


async def test_long_replies_are_split_and_rate_limits_are_waited_out(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub]
) -> None:
    bot, server = api
    cron = await make_cron(runner=Echo())
    sleeps = Sleeps()
    manager, telegram = await telegram_on(cron, server.url, ["7"], sleep=sleeps)
    line = "word " * 600  # 3000 characters: two of them are over Telegram's 4096
    # the second part hits a rate limit once; the retry does not send the first part again
    bot.fail_sends[1] = {"error_code": 429, "description": "Too Many Requests: retry after 2",
                         "parameters": {"retry_after": 2}}  # fmt: skip
    try:
        await telegram.send(OutboundMessage(session_key="telegram:7", channel="telegram",
                                            chat_id="7", text=f"{line}\n{line}",
                                            message_id="m-long", status="succeeded"))  # fmt: skip
        await telegram.outbox.idle()
    finally:
        await manager.stop()
    assert bot.sent == [(7, line), (7, line)]
    assert sleeps.asked == [2.0]  # the server's retry_after, over our 0.01 s backoff
    record = await cron.store.deliveries.get("telegram", "m-long")
    assert (record.state, record.attempts) == (DeliveryState.DELIVERED, 2)


async def test_a_blocked_chat_fails_without_retry_and_polling_backs_off(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub], caplog: pytest.LogCaptureFixture
) -> None:
    bot, server = api
    sleeps = Sleeps()
    cron = await make_cron(runner=Echo())
    bot.fail_polls.extend([{"error_code": 502, "description": "Bad Gateway"}] * 2)
    bot.fail_sends[0] = {"error_code": 403, "description": "Forbidden: bot was blocked by the user"}
    with caplog.at_level(logging.INFO, logger="httpx"):
        manager, telegram = await telegram_on(cron, server.url, [7], sleep=sleeps)
        try:
            await bot.wait_for(lambda: len(bot.offsets) >= 1)  # polling recovered
            assert sleeps.asked == [1.0, 2.0]  # exponential backoff between failed polls
            await telegram.send(OutboundMessage(session_key="telegram:7", channel="telegram",
                                                chat_id="7", text="hi", message_id="m1",
                                                status="succeeded"))  # fmt: skip
            await telegram.outbox.idle()
        finally:
            await manager.stop()
    record = await cron.store.deliveries.get("telegram", "m1")
    assert (record.state, record.attempts) == (DeliveryState.FAILED, 1)
    assert record.last_error == (
        "Telegram sendMessage failed (403): Forbidden: bot was blocked by the user"
    )
    assert sleeps.asked == [1.0, 2.0]  # no retry of a permanent error
    assert bot.sent == []
    # httpx logs each request URL; the bot token in it is redacted
    logged = [r.getMessage() for r in caplog.records]
    assert any("/bot<token>/getUpdates" in m for m in logged)
    assert not any(TOKEN in m for m in logged)


async def test_an_empty_allow_list_serves_nobody(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub], caplog: pytest.LogCaptureFixture
) -> None:
    bot, server = api
    cron = await make_cron(runner=Echo())
    with caplog.at_level(logging.WARNING, logger="agentcron.channels"):
        manager, telegram = await telegram_on(cron, server.url, [])
    try:
        assert any("allow-list is empty" in r.getMessage() for r in caplog.records)
        bot.push(42, "hello")
        await bot.wait_for(lambda: 2 in bot.offsets)
        assert await cron.sessions.list() == []
        message = OutboundMessage(session_key="telegram:42", channel="telegram", chat_id="42",
                                  text="x", message_id="m1", status="succeeded")  # fmt: skip
        assert not telegram.wants(message)
    finally:
        await manager.stop()
    assert bot.sent == []


PHOTO = b"\xff\xd8\xff\xe0 a small jpeg \x00\x01\x02" * 10
PNG = b"\x89PNG\r\n\x1a\n framed \x00\xff"


class Gallery:
    """A runner that keeps what each turn got and answers with a photo (its bytes) and a
    document (a URL).
    """

    def __init__(self) -> None:
        self.turns: list[TurnInput] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append(turn)
        photo = Attachment("photo", "framed.png", "image/png", data=PNG)
        notes = Attachment("document", "notes.pdf", "application/pdf",
                           url="https://example.com/notes.pdf")  # fmt: skip
        return Outcome.succeeded("Here it is, framed.", attachments=(photo, notes))


async def test_a_photo_goes_to_the_turn_and_the_reply_sends_a_photo_and_a_document(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub], caplog: pytest.LogCaptureFixture
) -> None:
    bot, server = api
    runner = Gallery()
    cron = await make_cron(runner=runner)
    with caplog.at_level(logging.DEBUG):
        manager, telegram = await telegram_on(cron, server.url, [42])
        try:
            bot.push_file(42, "photo", PHOTO, caption="frame this")
            await bot.wait_for(lambda: len(bot.called("sendDocument")) == 1)
            await wait_settled(cron.engine)
            await telegram.outbox.idle()
        finally:
            await manager.stop()
    (turn,) = runner.turns
    assert turn.prompt == "frame this"  # the caption is the message
    (got,) = turn.attachments
    # the biggest size of the photo, fetched through getFile: its bytes reach the runner
    assert (got.kind, got.mime_type, got.size, got.data, got.url) == (
        "photo", "image/jpeg", len(PHOTO), PHOTO, None)  # fmt: skip
    assert [name for name, _ in bot.calls] == ["sendMessage", "sendPhoto", "sendDocument"]
    assert bot.sent == [(42, "Here it is, framed.")]
    (photo,) = bot.called("sendPhoto")
    assert photo == {"chat_id": "42", "photo": ("framed.png", "image/png", PNG)}  # uploaded
    (document,) = bot.called("sendDocument")
    assert document == {"chat_id": 42, "document": "https://example.com/notes.pdf"}  # by URL

    # the transcript says what came and what went, never the bytes
    user, reply = await cron.sessions.messages("telegram:42")
    assert user.meta["attachments"] == [
        {"kind": "photo", "mime_type": "image/jpeg", "size": len(PHOTO), "inline": True}]  # fmt: skip
    assert reply.meta["attachments"] == [
        {"kind": "photo", "name": "framed.png", "mime_type": "image/png", "size": len(PNG),
         "inline": True},
        {"kind": "document", "name": "notes.pdf", "mime_type": "application/pdf",
         "url": "https://example.com/notes.pdf"},
    ]  # fmt: skip
    record = await cron.store.deliveries.get("telegram", reply.id)
    assert record.state is DeliveryState.DELIVERED
    assert len(record.result["message_ids"]) == 3  # the text, the photo, the document
    # the download URL holds the token: it is never logged
    assert not any(TOKEN in r.getMessage() for r in caplog.records)


async def test_documents_reach_the_turn_with_bytes_or_as_metadata_when_too_big(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub]
) -> None:
    bot, server = api
    runner = Gallery()
    cron = await make_cron(runner=runner)
    manager, _ = await telegram_on(cron, server.url, [42])
    small, big = b"%PDF-1.7 tiny", b"z" * (MAX_ATTACHMENT_BYTES + 1)
    try:
        bot.push_file(42, "document", small, file_name="tiny.pdf", mime_type="application/pdf")
        bot.push_file(42, "document", big, caption="a big one", file_name="big.zip",
                      mime_type="application/zip")  # fmt: skip
        await bot.wait_for(lambda: len(bot.called("sendDocument")) == 2)
        await wait_settled(cron.engine)
    finally:
        await manager.stop()
    first, second = runner.turns
    assert first.prompt == "(sent a document)"  # no caption
    assert first.attachments == (
        Attachment("document", "tiny.pdf", "application/pdf", len(small), data=small),)  # fmt: skip
    assert second.prompt == "a big one"
    assert second.attachments == (
        Attachment("document", "big.zip", "application/zip", len(big)),)  # fmt: skip


async def test_a_failed_file_send_is_retried_after_the_parts_already_sent(
    make_cron: CronFactory, api: tuple[FakeBotApi, HttpStub]
) -> None:
    bot, server = api
    cron = await make_cron(runner=Echo())
    sleeps = Sleeps()
    manager, telegram = await telegram_on(cron, server.url, [7], sleep=sleeps)
    bot.fail_files.append({"error_code": 429, "description": "Too Many Requests: retry after 3",
                           "parameters": {"retry_after": 3}})  # fmt: skip
    files = (
        Attachment("photo", "a.png", "image/png", data=PNG),
        Attachment("document", "b.pdf", url="https://files.example/b.pdf"),
        Attachment("document", "c.zip", size=10**9),  # metadata only: nothing to send
    )
    try:
        await telegram.send(OutboundMessage(session_key="telegram:7", channel="telegram",
                                            chat_id="7", text="two files", message_id="m-files",
                                            status="succeeded", attachments=files))  # fmt: skip
        await telegram.outbox.idle()
    finally:
        await manager.stop()
    # the text went once; the photo was refused once, then sent; then the document
    assert [name for name, _ in bot.calls] == ["sendMessage", "sendPhoto", "sendDocument"]
    assert sleeps.asked == [3.0]
    record = await cron.store.deliveries.get("telegram", "m-files")
    assert (record.state, record.attempts) == (DeliveryState.DELIVERED, 2)
    assert len(record.result["message_ids"]) == 3
