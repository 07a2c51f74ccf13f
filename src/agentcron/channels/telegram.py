"""Telegram Bot API channel: long polling for inbound text, photos and documents,
sendMessage (sendPhoto / sendDocument for a reply's files) for replies, and approvals of gated
tool calls as messages with inline Approve / Deny buttons.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from agentcron.approval_links import ApprovalLinks
from agentcron.channels.manager import (
    ApprovalDesk,
    ChannelError,
    Inbound,
    OutboundMessage,
    approval_delivery_id,
)
from agentcron.channels.outbox import (
    EXTERNAL_ID,
    DeliveryAttemptError,
    Outbox,
    Report,
    RetryPolicy,
    Sleep,
)
from agentcron.config.channels import DEFAULT_TELEGRAM_API_BASE
from agentcron.domain.approvals import Approval, ApprovalError, ApprovalNotFoundError, Decision
from agentcron.domain.attachments import Attachment, AttachmentKind
from agentcron.domain.deliveries import DeliveryState
from agentcron.limits import MAX_ATTACHMENT_BYTES, MAX_SHORT_CHARS
from agentcron.runtime.clock import Clock
from agentcron.store.errors import DeliveryNotFoundError
from agentcron.store.interface import DeliveryLedger

log = logging.getLogger(__name__)

DEFAULT_API_BASE = DEFAULT_TELEGRAM_API_BASE  # `[telegram] api_base` unset
MESSAGE_LIMIT = 4096  # Telegram counts UTF-16 code units
_REDACTED = "<token>"
CALLBACK_DATA_LIMIT = 64  # bytes of an inline button's callback_data
ARGS_SHOWN = 1500  # characters of a gated call's arguments shown (escaped after cutting)
_CALLBACK_PREFIX = "ap"
_DECISION_CODES: dict[str, Decision] = {"a": "approve", "d": "deny"}


def callback_data(approval_id: str, decision: Decision) -> str | None:
    """`ap:<approval id>:a|d`, or None when it would not fit Telegram's 64 bytes."""
    data = f"{_CALLBACK_PREFIX}:{approval_id}:{decision[0]}"
    return data if len(data.encode("utf-8")) <= CALLBACK_DATA_LIMIT else None


def parse_callback(data: object) -> tuple[str, Decision] | None:
    """The approval id and decision of one of our buttons' callback_data; None otherwise."""
    if not isinstance(data, str):
        return None
    prefix, _, rest = data.partition(":")
    approval_id, _, code = rest.rpartition(":")
    decision = _DECISION_CODES.get(code)
    if prefix != _CALLBACK_PREFIX or not approval_id or decision is None:
        return None
    return approval_id, decision


def approval_keyboard(approval_id: str) -> dict[str, Any] | None:
    """The inline keyboard Approve / Deny of one approval (None: the id is too long)."""
    approve, deny = callback_data(approval_id, "approve"), callback_data(approval_id, "deny")
    if approve is None or deny is None:
        return None
    return {
        "inline_keyboard": [
            [
                {"text": "✅ Approve", "callback_data": approve},
                {"text": "❌ Deny", "callback_data": deny},
            ]
        ]
    }


def outcome_text(state: str, decided_by: str | None) -> str:
    """One line: how an approval ended (or that it still waits)."""
    if state == "approved":
        return f"✅ Approved by {decided_by or 'someone'}"
    if state == "denied":
        return f"❌ Denied by {decided_by or 'someone'}"
    if state == "expired":
        if decided_by == "cancelled":
            return "⏹ Cancelled: the turn that asked was stopped"
        if decided_by == "restart":
            return "⌛ Expired: the server restarted while it waited"
        if decided_by == "session deleted":
            return "⏹ Cancelled: its session was deleted"
        return "⌛ Expired: nobody decided in time"
    return "⏳ Waiting for a decision"


def _when(value: object) -> str:
    if not isinstance(value, str) or not value:
        return "?"
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return value


def approval_text(approval: Mapping[str, Any]) -> str:
    """The message of an approval (Telegram HTML: every value escaped): the tool, its
    arguments (cut to ARGS_SHOWN characters), when it expires, and its outcome once decided.
    """
    args = json.dumps(approval.get("args") or {}, ensure_ascii=False, indent=1, default=str)
    if len(args) > ARGS_SHOWN:
        args = args[: ARGS_SHOWN - 1] + "…"
    tool = html.escape(str(approval.get("tool") or "?"), quote=False)
    lines = [
        f"🔐 <b>Approval needed</b>: the agent wants to call <code>{tool}</code>",
        f"<pre>{html.escape(args, quote=False)}</pre>",
    ]
    state = str(approval.get("state") or "pending")
    if state == "pending":
        lines.append(f"Expires {html.escape(_when(approval.get('expires_at')), quote=False)}.")
    else:
        decided_by = approval.get("decided_by")
        by = None if decided_by is None else str(decided_by)
        lines.append(f"<b>{html.escape(outcome_text(state, by), quote=False)}</b>")
    return "\n".join(lines)


class TelegramApiError(ChannelError):
    """The Bot API answered `ok: false` (or not JSON at all)."""

    def __init__(
        self,
        method: str,
        description: str,
        error_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"Telegram {method} failed ({error_code}): {description}")
        self.method, self.description = method, description
        self.error_code, self.retry_after = error_code, retry_after

    @property
    def retryable(self) -> bool:
        code = self.error_code
        return code is None or code == 429 or code >= 500


def _utf16_units(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1


def split_text(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Split `text` into parts of at most `limit` UTF-16 units, at a line break or space in
    the second half of a part when there is one; blank parts are dropped.
    """
    if limit < 2:
        raise ValueError("the limit must be at least 2 (one astral character)")
    parts: list[str] = []
    rest = text
    while rest:
        units, fit = 0, len(rest)
        for index, char in enumerate(rest):
            units += _utf16_units(char)
            if units > limit:
                fit = index
                break
        if fit == len(rest):
            parts.append(rest)
            break
        # A break right after the part's last character still counts: it is dropped.
        window = rest[: fit + 1]
        cut = window.rfind("\n")
        if cut < fit // 2:
            cut = window.rfind(" ")
        if cut >= fit // 2 and cut > 0:
            parts.append(rest[:cut])
            rest = rest[cut + 1 :]
        else:
            parts.append(rest[:fit])
            rest = rest[fit:]
    return [p for p in parts if p.strip()]


def _chat_id(value: str | int) -> str:
    try:
        return str(int(str(value).strip()))
    except ValueError:
        raise ValueError(
            f"a Telegram chat id is an integer (e.g. 12345 or -100987), got {value!r}"
        ) from None


class _RedactToken(logging.Filter):
    """httpx logs every request URL at INFO, and a Bot API URL contains the token."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._token in message:
            record.msg, record.args = message.replace(self._token, _REDACTED), None
        return True


class TelegramChannel:
    """A Telegram bot: inbound by long polling `getUpdates`, outbound by `sendMessage`.

    Each allowed chat is the session `telegram:<chat_id>`, with the sender's username and first
    name as channel meta. Only chats on the allow-list are served, in both directions; an empty
    list serves nobody. Replies go through the durable outbox (a record per message, retries
    with backoff on 429, 5xx and network errors); texts over 4096 characters are split.
    Polling errors are retried for ever with backoff (up to a minute apart).

    Approvals: a gated call of a chat's session is sent there with inline Approve / Deny
    buttons; a press (a `callback_query`) from that chat, if it is on the allow-list, decides
    it (`by="telegram:<username or user id>"`); any other chat's press is refused and logged.
    Once decided (here, in the web UI, through the API, or by the timeout) the message is
    edited to show the outcome, without buttons. The edit is a delivery of its own, and the
    request's chat and message id are kept in the request's delivery record (its `result`),
    so any process on the same database that handles the decision makes the edit, once,
    also after a restart. A long reply's parts already sent are kept there too, so a retry
    in any process goes on after them.
    """

    carries_approvals = True

    def __init__(
        self,
        token: str,
        allowed_chats: Iterable[str | int],
        *,
        api_base: str = DEFAULT_API_BASE,
        poll_timeout: int = 30,
        name: str = "telegram",
        retry: RetryPolicy | None = None,
        poll_backoff: RetryPolicy | None = None,
        request_timeout: float = 10.0,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
        deliveries: DeliveryLedger | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not token:
            raise ValueError("a Telegram channel needs a bot token")
        if poll_timeout < 0:
            raise ValueError("poll_timeout must not be negative")
        self.name = name
        self.allowed_chats = frozenset(_chat_id(c) for c in allowed_chats)
        self.api_base = api_base.rstrip("/")
        self.poll_timeout = poll_timeout
        self.request_timeout = request_timeout
        # Polling never gives up: it waits longer and longer, up to a minute, between errors.
        self.poll_backoff = poll_backoff or RetryPolicy(initial_delay=1.0, max_delay=60.0)
        self._token = token
        self._sleep = sleep
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._poller: asyncio.Task[None] | None = None
        self._inbound: Inbound | None = None
        self._offset: int | None = None  # the next update id to ask for
        self._confirmed: int | None = None  # the offset Telegram last saw from us
        self._desk: ApprovalDesk | None = None
        self._log_filter = _RedactToken(token)
        # Whether the last getUpdates reached Telegram (None: not polled yet), and its error.
        self.connected: bool | None = None
        self.poll_error: str | None = None
        self.outbox = Outbox(
            name, self._attempt, retry=retry, sleep=sleep, deliveries=deliveries, clock=clock
        )

    def bind(self, deliveries: DeliveryLedger, clock: Clock, report: Report | None = None) -> None:
        self.outbox.bind(deliveries, clock, report)

    def bind_approvals(self, desk: ApprovalDesk, links: ApprovalLinks | None) -> None:
        """Decide approvals on `desk` (`cron.approvals`) when a button is pressed."""
        self._desk = desk

    def _redact(self, text: str) -> str:
        return text.replace(self._token, _REDACTED)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, inbound: Inbound) -> None:
        if self._poller is not None:
            return
        if not self.allowed_chats:
            log.warning(
                "telegram: the allow-list is empty, so no chat is served; set "
                "AGENTCRON_TELEGRAM_ALLOWED_CHATS to the chat ids that may talk to the bot",
                extra={"channel": self.name},
            )
        logging.getLogger("httpx").addFilter(self._log_filter)
        self._inbound = inbound
        self._client = httpx.AsyncClient(timeout=self.request_timeout, transport=self._transport)
        await self.outbox.start()
        self._poller = asyncio.create_task(self._poll(), name=f"telegram-poll:{self.name}")
        log.info(
            "telegram: polling for updates",
            extra={"channel": self.name, "allowed_chats": sorted(self.allowed_chats)},
        )

    async def stop(self) -> None:
        """Stop polling at once (a long poll in flight is cancelled), confirm the updates
        already handled so a restart does not see them again, stop the outbox.
        """
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        await self.outbox.stop()
        client, self._client = self._client, None
        if client is not None:
            if self._offset is not None and self._offset != self._confirmed:
                with contextlib.suppress(Exception):
                    await self._call(
                        "getUpdates",
                        {"offset": self._offset, "timeout": 0, "limit": 1},
                        client=client,
                        wait=2.0,
                    )
            await client.aclose()
        logging.getLogger("httpx").removeFilter(self._log_filter)

    # -- Bot API -----------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        client: httpx.AsyncClient | None = None,
        wait: float | None = None,
        upload: tuple[str, Attachment] | None = None,
    ) -> Any:
        client = client or self._client
        if client is None:
            raise ChannelError("the Telegram channel is not started")
        url = f"{self.api_base}/bot{self._token}/{method}"
        timeout = wait if wait is not None else self.request_timeout
        if upload is not None:  # a file's bytes: multipart/form-data, the other fields as text
            field_name, file = upload
            form = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
            part = (file.filename, file.data or b"", file.mime_type or "application/octet-stream")
            response = await client.post(url, data=form, files={field_name: part}, timeout=timeout)
        else:
            response = await client.post(url, json=params, timeout=timeout)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise TelegramApiError(
                method, f"HTTP {response.status_code}, not a Bot API answer", response.status_code
            )
        if not data.get("ok"):
            retry_after = (data.get("parameters") or {}).get("retry_after")
            raise TelegramApiError(
                method,
                self._redact(str(data.get("description") or "no description")),
                int(data.get("error_code") or response.status_code),
                float(retry_after) if isinstance(retry_after, int | float) else None,
            )
        return data.get("result")

    # -- inbound -----------------------------------------------------------------------------

    async def _poll(self) -> None:
        failures = 0
        while True:
            params: dict[str, Any] = {
                "timeout": self.poll_timeout,
                "allowed_updates": ["message", "callback_query"],
            }
            if self._offset is not None:
                params["offset"] = self._offset
            try:
                updates = await self._call(
                    "getUpdates", params, wait=self.poll_timeout + self.request_timeout
                )
                self._confirmed = self._offset
                self.connected, self.poll_error = True, None
            except (httpx.HTTPError, TelegramApiError) as exc:
                failures += 1
                self.connected = False
                self.poll_error = self._redact(f"{type(exc).__name__}: {exc}")
                delay = self.poll_backoff.delay(failures)
                if isinstance(exc, TelegramApiError) and exc.retry_after is not None:
                    delay = max(delay, exc.retry_after)
                hint = ""
                if isinstance(exc, TelegramApiError) and exc.error_code in (401, 404):
                    hint = " (is AGENTCRON_TELEGRAM_TOKEN right?)"
                elif isinstance(exc, TelegramApiError) and exc.error_code == 409:
                    hint = " (another bot process, or a webhook, uses this token)"
                log.warning(
                    "telegram: getUpdates failed%s, retrying in %.1fs: %s",
                    hint,
                    delay,
                    self._redact(f"{type(exc).__name__}: {exc}"),
                    extra={"channel": self.name, "failures": failures},
                )
                await self._sleep(delay)
                continue
            failures = 0
            for update in updates if isinstance(updates, list) else []:
                await self._handle(update)
                update_id = update.get("update_id") if isinstance(update, dict) else None
                if isinstance(update_id, int):
                    self._offset = max(self._offset or 0, update_id + 1)

    async def _handle(self, update: Any) -> None:
        """One update: a text message from an allowed chat becomes a turn, a button press
        decides an approval; never raises.
        """
        query = update.get("callback_query") if isinstance(update, dict) else None
        if isinstance(query, dict):
            try:
                await self._on_callback(query)
            except Exception:
                log.exception("telegram: a button press failed", extra={"channel": self.name})
            return
        message = update.get("message") if isinstance(update, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
            log.debug("telegram: update without a message ignored", extra={"channel": self.name})
            return
        chat, sender = message["chat"], message.get("from") or {}
        chat_id = str(chat.get("id"))
        ctx = {"channel": self.name, "chat_id": chat_id, "username": sender.get("username")}
        if chat_id not in self.allowed_chats:
            log.warning("telegram: message from a chat not on the allow-list ignored", extra=ctx)
            return
        text = message.get("text")
        found = inbound_files(message)
        if found:  # a photo or a document: its caption is the text
            caption = message.get("caption")
            text = caption if isinstance(caption, str) and caption.strip() else None
            text = text or f"(sent a {found[0].kind})"
        if not isinstance(text, str) or not text.strip():
            log.info("telegram: non-text message ignored", extra=ctx)
            return
        meta = {
            "username": sender.get("username"),
            "first_name": sender.get("first_name"),
            "last_name": sender.get("last_name"),
            "user_id": sender.get("id"),
            "chat_type": chat.get("type"),
            "chat_title": chat.get("title"),
        }
        if self._inbound is None:  # polling runs only after start() set it
            return
        files = [await self._fetch(f, ctx) for f in found]
        try:
            await self._inbound(
                self.name, chat_id, text, {k: v for k, v in meta.items() if v}, files
            )
        except Exception:
            log.exception("telegram: inbound message could not be submitted", extra=ctx)

    async def _fetch(self, file: InboundFile, ctx: dict[str, Any]) -> Attachment:
        """A file a person sent, with its bytes when it is at most MAX_ATTACHMENT_BYTES
        (getFile, then the download); metadata only when bigger or when fetching fails. The
        download URL holds the bot token: it is never kept or handed on.
        """
        bare = Attachment(file.kind, file.name, file.mime_type, file.size)
        if file.size is not None and file.size > MAX_ATTACHMENT_BYTES:
            log.info("telegram: a file over the bound is passed on as metadata only", extra=ctx)
            return bare
        client = self._client
        try:
            found = await self._call("getFile", {"file_id": file.file_id})
            path = found.get("file_path") if isinstance(found, dict) else None
            if not isinstance(path, str) or client is None:
                return bare
            url = f"{self.api_base}/file/bot{self._token}/{path}"
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise TelegramApiError("download", f"HTTP {response.status_code}")
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_ATTACHMENT_BYTES:
                        return bare  # bigger than Telegram said: not kept
        except (httpx.HTTPError, TelegramApiError) as exc:
            log.warning(
                "telegram: could not fetch a file, passed on as metadata only: %s",
                self._redact(f"{type(exc).__name__}: {exc}"),
                extra=ctx,
            )
            return bare
        return Attachment(file.kind, file.name, file.mime_type, len(data), data=bytes(data))

    # -- outbound ----------------------------------------------------------------------------

    def wants(self, message: OutboundMessage) -> bool:
        if message.channel != self.name:
            return False
        if message.chat_id not in self.allowed_chats:
            log.warning(
                "telegram: not sending to a chat that is not on the allow-list",
                extra={
                    "channel": self.name,
                    "chat_id": message.chat_id,
                    "session_key": message.session_key,
                },
            )
            return False
        return True

    def unroutable(self, message: OutboundMessage) -> str | None:
        """Why a message of this bot's sessions cannot go out (None: it can): the manager
        records it as a failed delivery.
        """
        if message.channel == self.name and message.chat_id not in self.allowed_chats:
            return f"chat {message.chat_id} is not on the {self.name} allow-list"
        return None

    async def send(self, message: OutboundMessage) -> None:
        await self.outbox.submit(message)

    async def _attempt(self, message: OutboundMessage, attempt: int) -> dict[str, Any] | None:
        """One attempt; what it answers is kept in the delivery record (`result`): the chat
        and the ids of the messages sent.
        """
        refused = self.unroutable(message)
        if refused is not None:  # a re-sent delivery is held to the allow-list too
            raise DeliveryAttemptError(refused, retryable=False)
        if message.kind == "approval_requested":
            return await self._send_approval(message)
        if message.kind == "approval_decided":
            return await self._edit_approval(message)
        parts = split_text(message.text)
        chat = _chat(message.chat_id)
        # The reply's files go after its text, each a message of its own (a "part").
        files = [a for a in message.attachments if a.url is not None or a.data is not None]
        sent: list[int | None] = []
        if attempt > 1 and len(parts) + len(files) > 1:
            # A retry (here or in another process) goes on after the parts already sent.
            done = (await self.outbox.record(message.message_id)).result or {}
            if done.get("chat_id") == chat and isinstance(done.get("message_ids"), list):
                sent = list(done["message_ids"])[: len(parts) + len(files)]
        for index in range(len(sent), len(parts) + len(files)):
            if index < len(parts):
                answer = await self._delivery_call(
                    "sendMessage", {"chat_id": chat, "text": parts[index]}
                )
            else:
                answer = await self._send_file(chat, files[index - len(parts)])
            sent.append(_message_id(answer))
            if index + 1 < len(parts) + len(files):  # the last part's ids go with delivered
                await self.outbox.save_progress(
                    message.message_id, {"chat_id": chat, "message_ids": sent}
                )
        ids = ",".join(str(i) for i in sent if i is not None)
        return {"chat_id": chat, "message_ids": sent, EXTERNAL_ID: ids or None}

    async def _send_file(self, chat: int | str, file: Attachment) -> Any:
        """sendPhoto for a photo, sendDocument for any other file: by URL (Telegram fetches
        it) or uploaded from its bytes.
        """
        method, field_name = ("sendPhoto", "photo") if file.kind == "photo" else _DOCUMENT
        params: dict[str, Any] = {"chat_id": chat}
        if file.url is not None:
            params[field_name] = file.url
            return await self._delivery_call(method, params)
        return await self._delivery_call(method, params, upload=(field_name, file))

    async def _delivery_call(
        self, method: str, params: dict[str, Any], upload: tuple[str, Attachment] | None = None
    ) -> Any:
        """One Bot API call of a delivery attempt: its failure as a DeliveryAttemptError."""
        try:
            return await self._call(method, params, upload=upload)
        except TelegramApiError as exc:
            raise DeliveryAttemptError(
                str(exc), retryable=exc.retryable, retry_after=exc.retry_after
            ) from exc
        except httpx.HTTPError as exc:
            raise DeliveryAttemptError(
                self._redact(f"{type(exc).__name__}: {exc}"), retryable=True
            ) from exc

    # -- approvals ---------------------------------------------------------------------------

    async def _send_approval(self, message: OutboundMessage) -> dict[str, Any]:
        """The request with its buttons; answers where it went, for the edit once decided."""
        approval = message.approval or {}
        approval_id = str(approval.get("id") or "")
        chat = _chat(message.chat_id)
        params: dict[str, Any] = {
            "chat_id": chat,
            "text": approval_text(approval),
            "parse_mode": "HTML",
        }
        keyboard = approval_keyboard(approval_id)
        if keyboard is not None:
            params["reply_markup"] = keyboard
        else:  # an id too long for a button's 64 bytes: decide it elsewhere
            params["text"] += "\n<i>Decide it in the web UI or through the API.</i>"
        sent = await self._delivery_call("sendMessage", params)
        found = _message_id(sent)
        return {"chat_id": chat, "message_id": found, EXTERNAL_ID: _external(found)}

    async def _request_message(self, approval_id: str) -> tuple[int | str, int] | None:
        """The chat and message id of an approval's request, from its delivery record (sent
        by any process); None when there is nothing to edit. Raises a retryable attempt error
        while the request is still on its way (the edit waits for it).
        """
        ctx = {"channel": self.name, "approval_id": approval_id}
        try:
            request = await self.outbox.record(approval_delivery_id(approval_id, requested=True))
        except DeliveryNotFoundError:
            log.info("telegram: this approval's request was never sent here", extra=ctx)
            return None
        if request.state is DeliveryState.PENDING:
            raise DeliveryAttemptError("the approval's request is not sent yet", retryable=True)
        where = request.result or {}
        chat, message_id = where.get("chat_id"), where.get("message_id")
        if not isinstance(chat, int | str) or not isinstance(message_id, int):
            # failed, or sent without an answer to keep (before this was kept)
            log.info("telegram: no request message of this approval to edit", extra=ctx)
            return None
        return chat, message_id

    async def _edit_approval(self, message: OutboundMessage) -> dict[str, Any] | None:
        """The request's message shows the outcome and loses its buttons."""
        approval = message.approval or {}
        where = await self._request_message(str(approval.get("id") or ""))
        if where is None:
            return None
        chat, message_id = where
        params: dict[str, Any] = {
            "chat_id": chat,
            "message_id": message_id,
            "text": approval_text(approval),
            "parse_mode": "HTML",
            "reply_markup": {"inline_keyboard": []},
        }
        try:
            await self._delivery_call("editMessageText", params)
        except DeliveryAttemptError as exc:
            if "not modified" not in exc.reason:  # else it already shows this: done
                raise
        return {"chat_id": chat, "message_id": message_id, EXTERNAL_ID: str(message_id)}

    async def _answer(self, query_id: str, text: str, *, alert: bool = False) -> None:
        """answerCallbackQuery (best effort: the button stops spinning either way)."""
        try:
            await self._call(
                "answerCallbackQuery",
                {"callback_query_id": query_id, "text": text[:200], "show_alert": alert},
            )
        except (httpx.HTTPError, TelegramApiError) as exc:
            log.warning(
                "telegram: answerCallbackQuery failed: %s",
                self._redact(f"{type(exc).__name__}: {exc}"),
                extra={"channel": self.name},
            )

    async def _drop_buttons(self, chat: int | str, message_id: object) -> None:
        """A stale request's buttons go (best effort)."""
        if not isinstance(message_id, int):
            return
        with contextlib.suppress(httpx.HTTPError, TelegramApiError):
            await self._call(
                "editMessageReplyMarkup",
                {
                    "chat_id": chat,
                    "message_id": message_id,
                    "reply_markup": {"inline_keyboard": []},
                },
            )

    async def _on_callback(self, query: dict[str, Any]) -> None:
        """A button press: refused unless its chat is allowed and owns the approval; else
        the approval is decided, the press answered, and the decision edits the message.
        """
        query_id = query.get("id")
        if not isinstance(query_id, str):
            return
        sender = _dict(query.get("from"))
        message = _dict(query.get("message"))
        chat = _dict(message.get("chat"))
        raw_chat = chat.get("id")
        chat_id = str(raw_chat) if isinstance(raw_chat, int) else None
        parsed = parse_callback(query.get("data"))
        ctx: dict[str, Any] = {
            "channel": self.name,
            "chat_id": chat_id,
            "user_id": sender.get("id"),
            "username": sender.get("username"),
            "approval_id": parsed[0] if parsed else None,
        }
        if chat_id is None or chat_id not in self.allowed_chats:
            log.warning(
                "telegram: button press from a chat not on the allow-list refused", extra=ctx
            )
            await self._answer(
                query_id, "Not allowed: this chat is not on the bot's allow-list.", alert=True
            )
            return
        if parsed is None:
            await self._answer(query_id, "This button is not one of the bot's.")
            return
        approval_id, decision = parsed
        if self._desk is None:
            await self._answer(query_id, "Approvals are not decided here.", alert=True)
            return
        try:
            approval = await self._desk.get(approval_id)
        except ApprovalNotFoundError:
            await self._answer(
                query_id, "This approval is no longer known (it expired, or the server restarted)."
            )
            await self._drop_buttons(int(chat_id), message.get("message_id"))
            return
        if approval.session_key != f"{self.name}:{chat_id}":
            log.warning("telegram: button press for another chat's approval refused", extra=ctx)
            await self._answer(
                query_id, "Not allowed: this approval is not this chat's.", alert=True
            )
            return
        if not approval.pending:
            await self._answer(query_id, f"Already decided: {_outcome(approval)}.")
            await self._drop_buttons(int(chat_id), message.get("message_id"))
            return
        who = sender.get("username") or sender.get("id") or "unknown"
        try:
            decided = await self._desk.decide(approval_id, decision, by=f"telegram:{who}")
        except ApprovalError:  # decided or expired a moment ago
            now = await self._desk.get(approval_id)
            await self._answer(query_id, f"Already decided: {_outcome(now)}.")
            return
        log.info(
            "telegram: approval decided from a button",
            extra={**ctx, "decision": decision, "state": decided.state.value},
        )
        await self._answer(query_id, f"{_outcome(decided)}.")


_DOCUMENT = ("sendDocument", "document")


@dataclass(frozen=True, slots=True)
class InboundFile:
    """A file in a Telegram message: what the update says of it (its bytes come later)."""

    kind: AttachmentKind
    file_id: str
    name: str | None
    mime_type: str | None
    size: int | None


def inbound_files(message: Mapping[str, Any]) -> list[InboundFile]:
    """The photo (its biggest size) and the document of a message, if it has them."""
    found: list[InboundFile] = []
    sizes = message.get("photo")
    photos = [p for p in sizes if isinstance(p, dict)] if isinstance(sizes, list) else []
    if photos:
        biggest = max(photos, key=lambda p: int(p.get("width") or 0) * int(p.get("height") or 0))
        found.extend(_file("photo", biggest, {"name": None, "mime_type": "image/jpeg"}))
    document = message.get("document")
    if isinstance(document, dict):
        found.extend(_file("document", document, {}))
    return found


def _file(
    kind: AttachmentKind, item: dict[str, Any], defaults: dict[str, Any]
) -> list[InboundFile]:
    file_id, size = item.get("file_id"), item.get("file_size")
    if not isinstance(file_id, str) or not file_id:
        return []
    name = defaults.get("name", item.get("file_name"))
    mime = defaults.get("mime_type", item.get("mime_type"))
    return [
        InboundFile(
            kind,
            file_id,
            name[:MAX_SHORT_CHARS] if isinstance(name, str) else None,
            mime[:MAX_SHORT_CHARS] if isinstance(mime, str) else None,
            size if isinstance(size, int) else None,
        )
    ]


def _chat(chat_id: str) -> int | str:
    """A chat id as the Bot API takes it: an integer, or a channel's @username."""
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


def _message_id(answer: object) -> int | None:
    """The id of the message a sendMessage answered with (None: none given)."""
    found = answer.get("message_id") if isinstance(answer, dict) else None
    return found if isinstance(found, int) else None


def _external(message_id: int | None) -> str | None:
    return None if message_id is None else str(message_id)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _outcome(approval: Approval) -> str:
    return outcome_text(approval.state.value, approval.decided_by)
