"""Telegram Bot API channel: long polling for inbound text, sendMessage for replies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

import httpx

from agentcron.channels.base import ChannelError, Inbound, OutboundMessage
from agentcron.channels.outbox import DeliveryAttemptError, Outbox, Report, RetryPolicy, Sleep
from agentcron.engine.clock import Clock
from agentcron.store.interface import DeliveryLedger

log = logging.getLogger(__name__)

DEFAULT_API_BASE = "https://api.telegram.org"
MESSAGE_LIMIT = 4096  # Telegram counts UTF-16 code units
_REDACTED = "<token>"


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
    """

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
        self._progress: dict[str, int] = {}  # message id -> parts already sent (retries)
        self._log_filter = _RedactToken(token)
        # Whether the last getUpdates reached Telegram (None: not polled yet), and its error.
        self.connected: bool | None = None
        self.poll_error: str | None = None
        self.outbox = Outbox(
            name, self._attempt, retry=retry, sleep=sleep, deliveries=deliveries, clock=clock
        )

    def bind(self, deliveries: DeliveryLedger, clock: Clock, report: Report | None = None) -> None:
        self.outbox.bind(deliveries, clock, report)

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
    ) -> Any:
        client = client or self._client
        if client is None:
            raise ChannelError("the Telegram channel is not started")
        url = f"{self.api_base}/bot{self._token}/{method}"
        response = await client.post(
            url, json=params, timeout=wait if wait is not None else self.request_timeout
        )
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
            params: dict[str, Any] = {"timeout": self.poll_timeout, "allowed_updates": ["message"]}
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
        """One update: a text message from an allowed chat becomes a turn; never raises."""
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
        try:
            await self._inbound(self.name, chat_id, text, {k: v for k, v in meta.items() if v})
        except Exception:
            log.exception("telegram: inbound message could not be submitted", extra=ctx)

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

    async def send(self, message: OutboundMessage) -> None:
        await self.outbox.submit(message)

    async def _attempt(self, message: OutboundMessage, attempt: int) -> None:
        parts = split_text(message.text)
        numeric = message.chat_id.lstrip("-").isdigit()
        chat: int | str = int(message.chat_id) if numeric else message.chat_id
        # A retry continues after the parts that already went out (within this process).
        for index in range(self._progress.get(message.message_id, 0), len(parts)):
            try:
                await self._call("sendMessage", {"chat_id": chat, "text": parts[index]})
            except TelegramApiError as exc:
                if not exc.retryable:
                    self._progress.pop(message.message_id, None)
                raise DeliveryAttemptError(
                    str(exc), retryable=exc.retryable, retry_after=exc.retry_after
                ) from exc
            except httpx.HTTPError as exc:
                raise DeliveryAttemptError(
                    self._redact(f"{type(exc).__name__}: {exc}"), retryable=True
                ) from exc
            self._progress[message.message_id] = index + 1
        self._progress.pop(message.message_id, None)
