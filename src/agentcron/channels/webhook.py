"""Outbound webhook: each turn result is POSTed as signed JSON, durably, with retries.

The request::

    POST <url>
    Content-Type: application/json
    webhook-id: <message_id>                    (the same on every retry: deduplicate on it)
    webhook-timestamp: <unix seconds, integer>
    webhook-signature: v1,<base64>              (Standard Webhooks)
    X-Agentcron-Event: turn.result | message | approval_requested | approval_decided |
                       approval_reminder | job.alert
    X-Agentcron-Delivery: <message_id>          (= webhook-id)
    X-Agentcron-Timestamp: <unix seconds>       (= webhook-timestamp; deprecated)
    X-Agentcron-Signature: sha256=<hex>         (deprecated: gone in 0.2.0)

    {"event", "session_key", "channel", "chat_id", "channel_meta", "text", "status", "kind",
     "source", "message_id", "turn_id", "run_id", "meta", "created_at", "attempt", "sent_at"}

Attachments (files a runner's `Outcome` sent with its reply): the body then has
``attachments``: a list of {"kind" (photo, document, audio, video, voice), "name",
"mime_type", "size", and either "url" (fetch it there) or "data" (the bytes, base64; at most
`MAX_ATTACHMENT_BYTES` each, `MAX_ATTACHMENTS` a message)}; absent without files. ``meta``
``attachments`` describes the same files without their bytes (what the transcript keeps).

Approvals (a gated tool call of a session the webhook serves, `carries_approvals`): the
event is ``approval_requested`` (when the call starts waiting) or ``approval_decided`` (when it
was approved, denied or expired), or ``approval_reminder`` (once, part way into the wait of a
scheduled run's call nobody has decided yet), ``kind`` the same, ``status`` the approval's
state, and the body has ``approval``: {"id", "session_key", "turn_id", "tool", "args", "state",
"requested_at", "expires_at", "decision", "decided_by", "decided_at", "job_id", "grant_id",
"reminded_at", "decision_url"}. ``decision_url`` (requests and reminders only; null without
`AGENTCRON_PUBLIC_URL`) is where the receiver POSTs ``{"decision": "approve" | "deny"}``
(optionally ``"by"``) to decide without the API token: it carries a capability token for
that one approval (`agentcron.approval_links`); a wrong token is 403, an approval already
decided or expired 409.

Alerts (a job of a session the webhook serves went overdue, is failing, recovered or ends
soon: `service/alerts.py`): the event is ``job.alert``, ``kind`` ``alert``, ``status`` the
alert (``job_overdue``, ``job_failing``, ``job_recovered``, ``job_ending``), ``text`` what
happened and ``meta`` {"job_id", "alert"}.

Requests are signed the Standard Webhooks way (https://www.standardwebhooks.com), made with
the `standardwebhooks` package: ``webhook-signature`` is ``v1,`` + base64 of
``HMAC-SHA256(key, webhook-id + "." + webhook-timestamp + "." + raw body)``, so a receiver
verifies with its language's stock verifier (Python: ``standardwebhooks.Webhook(secret)
.verify(body, headers)``), which also rejects timestamps more than 5 minutes off its clock. The
key: a secret of the form ``whsec_<base64>`` (the Standard Webhooks form; make one with
``"whsec_" + base64(32 random bytes)``) is those bytes; any other secret (what agentcron took
before) is its UTF-8 bytes, and the receiver's verifier takes it as ``"whsec_" +
base64(UTF-8 secret)``, which `standard_webhook_secret` gives. Every attempt is signed afresh,
with the same ``webhook-id``.

Deprecated, sent by 0.1.x so receivers can move, removed in 0.2.0: ``X-Agentcron-Signature`` is
``sha256=`` + ``hex(HMAC-SHA256(key=the configured secret as UTF-8, whole, msg=timestamp + "."
+ raw body))``, ``timestamp`` the ``X-Agentcron-Timestamp`` header as ASCII; `verify_signature`
checks it.

Configured extra headers (`headers=`, `AGENTCRON_WEBHOOK_HEADERS`: an auth header for the
receiver's gateway, say) go with every request; they cannot replace the headers above.

Responses: 2xx = delivered (a JSON object answered with an ``id`` or ``message_id``, a string
or a number, is kept as the delivery's external id). 408, 429 (honouring a numeric
Retry-After) and 5xx, timeouts and connection errors are retried with exponential backoff until
the delivery deadline (`AGENTCRON_DELIVERY_DEADLINE`, a day); any other status (3xx, 4xx) fails
the delivery at once: the receiver rejected it and a resend would be rejected again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks import Webhook

from agentcron.approval_links import ApprovalLinks
from agentcron.channels.manager import ApprovalDesk, Inbound, OutboundMessage
from agentcron.channels.outbox import (
    EXTERNAL_ID,
    DeliveryAttemptError,
    Outbox,
    Report,
    RetryPolicy,
    Sleep,
)
from agentcron.runtime.clock import Clock
from agentcron.store.interface import DeliveryLedger

log = logging.getLogger(__name__)

ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"
SIGNATURE_HEADER = "X-Agentcron-Signature"  # deprecated: gone in 0.2.0
TIMESTAMP_HEADER = "X-Agentcron-Timestamp"  # deprecated with it
DELIVERY_HEADER = "X-Agentcron-Delivery"
EVENT_HEADER = "X-Agentcron-Event"
_OWN_HEADERS = (
    "Content-Type",
    ID_HEADER,
    STANDARD_TIMESTAMP_HEADER,
    STANDARD_SIGNATURE_HEADER,
    EVENT_HEADER,
    DELIVERY_HEADER,
    TIMESTAMP_HEADER,
    SIGNATURE_HEADER,
)
SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300.0
_RETRY_STATUSES = frozenset({408, 429})


def signing_key(secret: str) -> bytes:
    """The Standard Webhooks key of a configured secret: a `whsec_` secret's base64 bytes, any
    other secret's UTF-8 bytes. ValueError for a `whsec_` secret that is not base64 of a key.
    """
    if not secret.startswith(SECRET_PREFIX):
        return secret.encode("utf-8")
    encoded = secret.removeprefix(SECRET_PREFIX).rstrip("=")
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        key = b""
    if not key:
        raise ValueError(
            f"a secret starting with {SECRET_PREFIX} is a Standard Webhooks secret: "
            "base64 bytes must follow the prefix"
        )
    return key


def standard_webhook_secret(secret: str) -> str:
    """The `whsec_` form of a configured secret: what a Standard Webhooks verifier is given."""
    key = base64.b64encode(signing_key(secret)).decode("ascii")
    return SECRET_PREFIX + key


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The deprecated `X-Agentcron-Signature` value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify_signature(
    secret: str,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    *,
    now: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """For receivers of the deprecated `X-Agentcron-Signature` (Standard Webhooks verifiers
    check `webhook-signature`): True if `signature` signs `body` at `timestamp` with `secret`
    and the timestamp is within `tolerance` seconds of `now` (default: the current time).
    """
    if not timestamp or not signature:
        return False
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - sent) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP header name (RFC 9110)
_MAX_HEADERS = 50
_MAX_HEADER_VALUE = 4096


def check_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Extra request headers, checked: valid names, values without line breaks, none of the
    headers the webhook sets itself. Raises ValueError saying what is wrong.
    """
    if len(headers) > _MAX_HEADERS:
        raise ValueError(f"at most {_MAX_HEADERS} extra webhook headers, got {len(headers)}")
    reserved = {h.lower() for h in _OWN_HEADERS}
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValueError(f"{name!r} is not a valid HTTP header name")
        if name.lower() in reserved or name.lower() in {"host", "content-length"}:
            raise ValueError(f"the webhook sets {name} itself: it cannot be configured")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"the value of header {name} must be text on one line")
        if len(value) > _MAX_HEADER_VALUE:
            raise ValueError(f"the value of header {name} is longer than {_MAX_HEADER_VALUE}")
        checked[name] = value
    return checked


_EVENTS = {
    "turn": "turn.result",
    "message": "message",
    "approval_requested": "approval_requested",
    "approval_decided": "approval_decided",
    "approval_reminder": "approval_reminder",
    "alert": "job.alert",
}


class WebhookChannel:
    """POSTs turn results of all sessions, or of the sessions of some channels, to one URL,
    and the approval requests and decisions of their gated tool calls.
    """

    carries_approvals = True

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        channels: Collection[str] | None = None,
        name: str = "webhook",
        retry: RetryPolicy | None = None,
        timeout: float = 10.0,
        sleep: Sleep = asyncio.sleep,
        wall_clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
        deliveries: DeliveryLedger | None = None,
        clock: Clock | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not secret:
            raise ValueError("a webhook needs a secret to sign its requests")
        self.headers = check_headers(headers or {})
        self.name = name
        self.url = url
        self.channels = frozenset(channels) if channels is not None else None
        self.timeout = timeout
        self._secret = secret
        self._signer = Webhook(signing_key(secret))
        self._wall_clock = wall_clock  # signatures use real time: receivers check it
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._links: ApprovalLinks | None = None
        self.outbox = Outbox(
            name, self._attempt, retry=retry, sleep=sleep, deliveries=deliveries, clock=clock
        )

    def bind(self, deliveries: DeliveryLedger, clock: Clock, report: Report | None = None) -> None:
        self.outbox.bind(deliveries, clock, report)

    def bind_approvals(self, desk: ApprovalDesk, links: ApprovalLinks | None) -> None:
        """Approval requests carry a decision URL made by `links` (None: `decision_url` null)."""
        self._links = links

    def wants(self, message: OutboundMessage) -> bool:
        return self.channels is None or message.channel in self.channels

    async def start(self, inbound: Inbound) -> None:
        """Outbound only (`inbound` is unused); resumes deliveries left pending."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, transport=self._transport)
        await self.outbox.start()

    async def stop(self) -> None:
        await self.outbox.stop()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def send(self, message: OutboundMessage) -> None:
        await self.outbox.submit(message)

    def body(self, message: OutboundMessage, attempt: int, sent_at: float) -> bytes:
        """The JSON body of one attempt."""
        data = message.to_payload()
        if message.approval is not None:
            # made at each attempt, never kept in the delivery record: it is a capability
            approval = dict(message.approval)
            approval_id = str(approval.get("id") or "")
            requested = message.kind in ("approval_requested", "approval_reminder")
            links = self._links
            url = links.decision_url(approval_id) if links and requested and approval_id else None
            approval["decision_url"] = url
            data["approval"] = approval
        payload: dict[str, Any] = {
            "event": _EVENTS[message.kind],
            **data,
            "attempt": attempt,
            "sent_at": datetime.fromtimestamp(sent_at, UTC).isoformat(),
        }
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    async def _attempt(self, message: OutboundMessage, attempt: int) -> dict[str, Any] | None:
        if self._client is None:
            raise DeliveryAttemptError("the webhook channel is not started", retryable=True)
        sent_at = self._wall_clock()
        timestamp = str(int(sent_at))
        body = self.body(message, attempt, sent_at)
        # the delivery's id, stable across retries and restarts: the receiver dedupes on it
        signature = self._signer.sign(
            message.message_id, datetime.fromtimestamp(int(timestamp), UTC), body.decode("utf-8")
        )
        headers = {
            **self.headers,  # first: the signed headers below cannot be replaced
            "Content-Type": "application/json",
            ID_HEADER: message.message_id,
            STANDARD_TIMESTAMP_HEADER: timestamp,
            STANDARD_SIGNATURE_HEADER: signature,
            EVENT_HEADER: _EVENTS[message.kind],
            DELIVERY_HEADER: message.message_id,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self._secret, timestamp, body),
        }
        try:
            response = await self._client.post(self.url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise DeliveryAttemptError(f"timed out: {type(exc).__name__}", retryable=True) from exc
        except httpx.TransportError as exc:
            raise DeliveryAttemptError(
                f"connection failed: {type(exc).__name__}: {exc}", retryable=True
            ) from exc
        status = response.status_code
        if 200 <= status < 300:
            return _receipt(response)
        detail = response.text[:200].strip()
        reason = f"HTTP {status} {response.reason_phrase}" + (f": {detail}" if detail else "")
        if status >= 500 or status in _RETRY_STATUSES:
            raise DeliveryAttemptError(reason, retryable=True, retry_after=_retry_after(response))
        raise DeliveryAttemptError(reason, retryable=False)


def _receipt(response: httpx.Response) -> dict[str, Any] | None:
    """The receiver's id of what it accepted (`id` or `message_id` of a JSON object), if any."""
    try:
        data = response.json()
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for key in ("id", "message_id"):
        found = data.get(key)
        if isinstance(found, str | int) and not isinstance(found, bool) and str(found):
            return {EXTERNAL_ID: str(found)[:200]}
    return None
