"""The HTTP runner: each turn is POSTed, signed (Standard Webhooks), to an agent of your own.

The wire protocol (docs/agents.md, "Your own agent over HTTP"; `/api/schema/runner.json` is the JSON
Schema of these models): one signed POST per turn (`webhook-id` = the turn id, the
idempotency key), answered with JSON (`RunnerAnswer`) or a Server-Sent Events stream
(`delta`, `thinking`, `tool`, `done`, `error`) relayed live like the built-in agent's. A
204 or an empty text is an empty outcome; a non-2xx answer or a timeout a failed one with
the status and a bounded excerpt of the body. Only a connection that was never made
(refused, unresolved) is retried: once the agent has the request it may have acted on it.
A remote agent asks a person's approval with a callback (`ask`, the route
`POST /api/runner/approvals`) while its request is open: the turn gives its slot back and
its timeout stops while the person decides, as for a gated tool of the built-in agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from standardwebhooks import Webhook

from agentcron.agent.runner import (
    Outcome,
    Runner,
    SessionInfo,
    ToolRecord,
    TurnEvents,
    TurnInput,
    TurnPause,
    tool_ran,
    turn_pause,
)
from agentcron.domain.approvals import Approval, Approver
from agentcron.errors import AgentcronError
from agentcron.store.errors import TurnNotFoundError

log = logging.getLogger(__name__)

__all__ = [
    "MAX_EXCERPT",
    "NO_ONE_TO_ASK",
    "HttpRunner",
    "RunnerAnswer",
    "RunnerRequest",
    "RunnerRoutes",
    "RunnerTurnNotFoundError",
    "runner_schema",
]

MAX_EXCERPT = 1024  # bytes of a failed answer's body kept on the run record
_MAX_ANSWER_BYTES = 4_000_000  # of a JSON answer; a longer one is a failure, not a memory hog
_CONNECT_S = 10.0
NO_ONE_TO_ASK = "Denied: this call needs a person's approval and no one can be asked here."
_RETRY_BASE_S = 0.2  # the first retry's delay; doubled each time, up to _RETRY_MAX_S
_RETRY_MAX_S = 2.0
_ASK_END_S = 10.0


# -- the wire models (the JSON Schema route is generated from them) -------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class HistoryItem(_Wire):
    role: str = Field(description="user, assistant, system, tool or summary")
    content: str
    at: str | None = Field(default=None, description="ISO-8601, when known")


class TriggerBody(_Wire):
    job_id: str
    name: str
    fire_at: str = Field(description="ISO-8601")
    kind: str = Field(description="agent_turn, recall or system_event")
    prompt_ref: dict[str, Any] | None = Field(
        default=None, description="the prompt template: id, version, sha256"
    )


class RunnerRequest(_Wire):
    """The body of the POST of one turn."""

    session_key: str
    turn_id: str = Field(description="also the `webhook-id` header: the idempotency key")
    run_id: str | None = Field(description="the scheduled run's id (null: not a fire)")
    source: str = Field(description="user, automation, recall, hook, system, ...")
    prompt: str
    trigger: TriggerBody | None
    system_context: str | None
    history: list[HistoryItem] | None = None
    attachments: list[dict[str, Any]] | None = None


class Usage(_Wire):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    model: str | None = None


class ToolCall(_Wire):
    """A tool call the agent made (also the `tool` event of a stream)."""

    name: str = Field(min_length=1, max_length=200)
    args: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    ok: bool = True


class RunnerAnswer(_Wire):
    """A JSON answer (`content-type: application/json`): no text or a blank one is empty."""

    text: str | None = None
    usage: Usage | None = None
    tool_calls: list[ToolCall] | None = None


class TextEvent(_Wire):
    """The data of a `delta` or `thinking` event."""

    text: str


class DoneEvent(_Wire):
    """The data of `done`: `text` absent = the deltas, concatenated."""

    text: str | None = None
    usage: Usage | None = None


class ErrorEvent(_Wire):
    message: str


def runner_schema() -> dict[str, Any]:
    """The JSON Schema of the request and of both answer forms."""
    return {
        "request": RunnerRequest.model_json_schema(),
        "answer": {
            "json": RunnerAnswer.model_json_schema(),
            "sse": {
                "delta": TextEvent.model_json_schema(),
                "thinking": TextEvent.model_json_schema(),
                "tool": ToolCall.model_json_schema(),
                "done": DoneEvent.model_json_schema(),
                "error": ErrorEvent.model_json_schema(),
            },
        },
    }


def request_of(session: SessionInfo, turn: TurnInput) -> RunnerRequest:
    """The wire request of one turn."""
    trigger = turn.trigger
    return RunnerRequest(
        session_key=session.key,
        turn_id=turn.turn_id,
        run_id=trigger.run_id if trigger else None,
        source=turn.source.value,
        prompt=turn.prompt,
        trigger=None
        if trigger is None
        else TriggerBody(
            job_id=trigger.job_id,
            name=trigger.job_name,
            fire_at=trigger.fire_at.isoformat(),
            kind=trigger.kind,
            prompt_ref=turn.prompt_ref,
        ),
        system_context=turn.system_context,
        history=[
            HistoryItem(
                role=e.role, content=e.content, at=None if e.at is None else e.at.isoformat()
            )
            for e in turn.history
        ]
        or None,
        attachments=[a.describe() for a in turn.attachments] or None,
    )


def wire_body(request: RunnerRequest) -> str:
    """The request as JSON: `run_id`, `trigger`, `system_context` null when unset; `history`,
    `attachments` and an entry's unknown `at` absent.
    """
    data = request.model_dump(exclude={"history", "attachments"})
    if request.history is not None:
        data["history"] = [item.model_dump(exclude_none=True) for item in request.history]
    if request.attachments is not None:
        data["attachments"] = request.attachments
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class RunnerTurnNotFoundError(TurnNotFoundError):
    """No turn of that id is waiting on the runner's answer in this process."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(turn_id)
        self.args = (f"no turn {turn_id!r} is waiting on its runner's answer here",)


# -- the runner ------------------------------------------------------------------------------


@dataclass(eq=False)
class _Active:
    """A turn whose request is open: its session, its pause, the approvals it waits for."""

    session_key: str
    pause: TurnPause | None
    asks: int = 0
    waits: set[asyncio.Future[Approval]] = field(default_factory=set)  # end with the turn
    idle: asyncio.Event = field(default_factory=asyncio.Event)  # no approval is waited for
    busy: asyncio.Event = field(default_factory=asyncio.Event)  # an approval is waited for

    def __post_init__(self) -> None:
        self.idle.set()


class _Failed(AgentcronError):
    """The exchange failed: the outcome's error and its details (caught inside the runner, which
    turns it into a failed outcome)."""

    def __init__(self, error: str, details: dict[str, Any]) -> None:
        super().__init__(error)
        self.error = error
        self.details = details


class HttpRunner:
    """Runs each turn on the agent at `url` (the module's docstring has the protocol).

    `secret` signs the requests (a `whsec_...` Standard Webhooks secret; the approval callback
    takes it as its bearer token). `timeout` bounds one turn's exchange in seconds, the time
    an approval waits not counted; `retries` how often a connection that could not be made is
    tried again; `concurrency` how many requests are open to the URL at once; `approvals` the
    broker a callback asks (None: every ask is denied).
    """

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        timeout: float = 300.0,
        retries: int = 3,
        concurrency: int = 16,
        approvals: Approver | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the runner URL must be http(s)://..., got {url[:80]!r}")
        if timeout <= 0 or retries < 0 or concurrency < 1:
            raise ValueError("timeout must be positive, retries >= 0, concurrency >= 1")
        self.url = url
        self.secret = secret
        try:
            self._signer = Webhook(secret)
        except ValueError:  # binascii.Error: not base64
            raise ValueError("the runner secret must be a `whsec_<base64>` secret") from None
        self.timeout = timeout
        self.retries = retries
        self._slots = asyncio.Semaphore(concurrency)
        self._approvals = approvals
        self._active: dict[str, _Active] = {}

    @property
    def model_id(self) -> str:
        """What `serve` says runs the turns: the URL."""
        return self.url

    def has_turn(self, turn_id: str) -> bool:
        """Is the request of turn `turn_id` open on this runner?"""
        return turn_id in self._active

    # -- approvals -----------------------------------------------------------------------

    async def ask(
        self, *, turn_id: str, tool: str, args: dict[str, Any], wait: timedelta | None = None
    ) -> Approval | None:
        """A person's decision on `tool(args)` for the running turn `turn_id` (its request is
        open): the turn gives its slot back and its timeouts stop meanwhile. None: no one can
        be asked here (no broker). Raises RunnerTurnNotFoundError when no such turn waits on
        this runner.
        """
        active = self._active.get(turn_id)
        if active is None:
            raise RunnerTurnNotFoundError(turn_id)
        if self._approvals is None:
            return None
        active.asks += 1
        active.idle.clear()
        active.busy.set()
        request = asyncio.ensure_future(
            self._approvals.request(
                tool=tool, args=args, session_key=active.session_key, turn_id=turn_id, wait=wait
            )
        )
        active.waits.add(request)
        try:
            pause = active.pause
            # A wait the turn's end cancelled leaves the pause cancelled: it takes no slot.
            async with pause.pause() if pause is not None else contextlib.nullcontext():
                return await asyncio.shield(request)
        except asyncio.CancelledError:
            if not request.cancelled():
                request.cancel()  # the caller went away: the approval's wait ends too
                raise
            # The turn ended while the person was asked (`run_turn` ends its waits).
            raise RunnerTurnNotFoundError(turn_id) from None
        finally:
            active.waits.discard(request)
            active.asks -= 1
            if not active.asks:
                active.busy.clear()
                active.idle.set()

    # -- a turn ----------------------------------------------------------------------------

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        body = wire_body(request_of(session, turn))
        active = self._active[turn.turn_id] = _Active(session.key, turn_pause.get())
        tools: dict[str, ToolRecord] = {}
        exchange = asyncio.ensure_future(self._exchange(turn.turn_id, body, events, tools))
        watch = asyncio.ensure_future(self._watch(active))
        try:
            await asyncio.wait({exchange, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not exchange.done():
                exchange.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await exchange
                return Outcome.failed(
                    f"the runner did not answer within {self.timeout:g}s",
                    error_details={"timeout_s": self.timeout, "url": self.url},
                    tools=tuple(tools.values()),
                )
            return exchange.result()
        except _Failed as failed:
            return Outcome.failed(
                failed.error, error_details=failed.details, tools=(*tools.values(),)
            )
        finally:
            ending: list[asyncio.Future[Any]] = [exchange, watch, *active.waits]
            for task in ending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, _Failed):
                await asyncio.gather(exchange, watch, return_exceptions=True)
            # The asks of this turn leave its pause before the turn ends (bounded: the
            # broker's cancelled wait writes its end within a few seconds).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_ASK_END_S):
                    await active.idle.wait()
            if self._active.get(turn.turn_id) is active:  # its own entry, not a reused id's
                del self._active[turn.turn_id]

    async def _watch(self, active: _Active) -> None:
        """Returns when the turn has had `timeout` seconds without an approval waited for."""
        loop = asyncio.get_running_loop()
        left = self.timeout
        while left > 0:
            await active.idle.wait()
            started = loop.time()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await active.busy.wait()
            left -= loop.time() - started

    def _headers(self, turn_id: str, body: str) -> dict[str, str]:
        now = datetime.now(UTC)
        return {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "webhook-id": turn_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(turn_id, now, body),
        }

    @contextlib.asynccontextmanager
    async def _open(self, turn_id: str, body: str) -> AsyncIterator[httpx.Response]:
        """The answer's response, its body not read; a refused connection is tried again."""
        timeout = httpx.Timeout(None, connect=_CONNECT_S)  # the turn's own watch bounds it
        async with self._slots, httpx.AsyncClient(timeout=timeout) as client:
            attempt = 0
            while True:
                request = client.build_request(
                    "POST", self.url, content=body.encode(), headers=self._headers(turn_id, body)
                )
                try:
                    response = await client.send(request, stream=True)
                except httpx.ConnectError as exc:
                    # Never sent: the agent did not get the turn, so trying again is safe.
                    if attempt >= self.retries:
                        raise _Failed(
                            f"the runner could not be reached: {exc}"[:300],
                            {"url": self.url, "attempts": attempt + 1},
                        ) from None
                    delay = min(_RETRY_BASE_S * 2**attempt, _RETRY_MAX_S)
                    log.warning(
                        "the runner at %s could not be reached (%s): trying again in %gs",
                        self.url,
                        exc,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    attempt += 1
                    continue
                except httpx.HTTPError as exc:
                    raise _Failed(f"the runner's answer failed: {exc!r}"[:300], {}) from None
                try:
                    yield response
                finally:
                    await response.aclose()
                return

    async def _exchange(
        self, turn_id: str, body: str, events: TurnEvents, tools: dict[str, ToolRecord]
    ) -> Outcome:
        async with self._open(turn_id, body) as response:
            try:
                if not response.is_success:
                    excerpt = await _excerpt(response)
                    raise _Failed(
                        f"the runner answered {response.status_code}: {excerpt[:200]}".strip(),
                        {"status": response.status_code, "body": excerpt},
                    )
                if response.status_code == 204:
                    return Outcome.empty()
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if kind == "text/event-stream":
                    return await self._stream(response, events, tools)
                return await self._json(response, events, tools)
            except httpx.HTTPError as exc:
                raise _Failed(f"the runner's answer failed: {exc!r}"[:300], {}) from None

    async def _json(
        self, response: httpx.Response, events: TurnEvents, tools: dict[str, ToolRecord]
    ) -> Outcome:
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > _MAX_ANSWER_BYTES:
                raise _Failed("the runner's answer is too long", {"limit": _MAX_ANSWER_BYTES})
        if not data.strip():
            return Outcome.empty()
        try:
            answer = RunnerAnswer.model_validate_json(bytes(data))
        except ValidationError as exc:
            raise _Failed(
                "the runner's answer is not the protocol's JSON",
                {
                    "status": response.status_code,
                    "body": bytes(data[:MAX_EXCERPT]).decode("utf-8", "replace"),
                    "problem": str(exc)[:MAX_EXCERPT],
                },
            ) from None
        for call in answer.tool_calls or ():
            await _report(call, events, tools)
        return _outcome(answer.text, answer.usage, tools)

    async def _stream(
        self, response: httpx.Response, events: TurnEvents, tools: dict[str, ToolRecord]
    ) -> Outcome:
        deltas: list[str] = []
        try:
            async for sse in EventSource(response).aiter_sse():
                kind = sse.event
                try:
                    if kind == "delta":
                        text = TextEvent.model_validate_json(sse.data).text
                        deltas.append(text)
                        await events.emit({"type": "text_delta", "text": text})
                    elif kind == "thinking":
                        text = TextEvent.model_validate_json(sse.data).text
                        await events.emit({"type": "thinking_delta", "text": text})
                    elif kind == "tool":
                        await _report(ToolCall.model_validate_json(sse.data), events, tools)
                    elif kind == "done":
                        done = DoneEvent.model_validate_json(sse.data or "{}")
                        text = "".join(deltas) if done.text is None else done.text
                        return _outcome(text, done.usage, tools)
                    elif kind == "error":
                        message = ErrorEvent.model_validate_json(sse.data).message
                        raise _Failed(
                            message[:300], {"event": "error", "message": message[:MAX_EXCERPT]}
                        )
                    # Other events (comments, keep-alives, later additions) are skipped.
                except ValidationError as exc:
                    raise _Failed(
                        f"the runner's {kind!r} event is not the protocol's",
                        {
                            "event": kind,
                            "data": sse.data[:MAX_EXCERPT],
                            "problem": str(exc)[:MAX_EXCERPT],
                        },
                    ) from None
        except SSEError as exc:
            raise _Failed(f"the runner's stream is malformed: {exc}"[:300], {}) from None
        raise _Failed(
            "the runner's stream ended without a done event",
            {"partial_text": "".join(deltas)[:MAX_EXCERPT]},
        )


class RunnerRoutes:
    """Chooses each turn's runner: the HTTP runner at the turn's own URL (its fire's job's,
    else its session's: `TurnInput.runner_url`), else the process's runner (`default`: the
    built-in agent, the process's runner URL or a runner of your own).

    One `HttpRunner` per distinct URL, made on its first turn, signed with the process's runner
    `secret` and bound like the process's (`timeout`, `retries`, `concurrency`); a URL equal to
    the process's runner URL uses that runner. The approval callback (`ask`) finds the turn on
    whichever of them runs it. Nothing to close: each request opens its own connection.
    """

    def __init__(
        self,
        default: Runner,
        secret: str | None,
        *,
        main: HttpRunner | None = None,
        timeout: float = 300.0,
        retries: int = 3,
        concurrency: int = 16,
        approvals: Approver | None = None,
    ) -> None:
        self.default = default
        self.secret = secret
        self.main = main
        self._options: dict[str, Any] = {
            "timeout": timeout,
            "retries": retries,
            "concurrency": concurrency,
            "approvals": approvals,
        }
        self._by_url: dict[str, HttpRunner] = {} if main is None else {main.url: main}

    def __getattr__(self, name: str) -> Any:
        # The lanes' memory reads the process's runner's history settings and `summarize`
        # (optional attributes, looked up with getattr): they stay the process's runner's.
        if name == "default":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.default, name)

    def runner_for(self, url: str) -> HttpRunner:
        """The HTTP runner of `url`, made on first use (ValueError: no secret to sign with)."""
        runner = self._by_url.get(url)
        if runner is None:
            if not self.secret:
                raise ValueError(
                    "a runner URL needs the secret its requests are signed with: "
                    "`runner_secret=` or AGENTCRON_RUNNER_SECRET (`serve` keeps one)"
                )
            runner = self._by_url[url] = HttpRunner(url, self.secret, **self._options)
        return runner

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        if turn.runner_url is None:
            return await self.default.run_turn(session, turn, events)
        try:
            runner = self.runner_for(turn.runner_url)
        except ValueError as exc:
            return Outcome.failed(str(exc), error_details={"url": turn.runner_url})
        return await runner.run_turn(session, turn, events)

    async def ask(
        self, *, turn_id: str, tool: str, args: dict[str, Any], wait: timedelta | None = None
    ) -> Approval | None:
        """`HttpRunner.ask` on the runner whose request for `turn_id` is open."""
        for runner in self._by_url.values():
            if runner.has_turn(turn_id):
                return await runner.ask(turn_id=turn_id, tool=tool, args=args, wait=wait)
        raise RunnerTurnNotFoundError(turn_id)


async def _excerpt(response: httpx.Response) -> str:
    """At most MAX_EXCERPT bytes of the body, as text."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= MAX_EXCERPT:
            break
    return bytes(data[:MAX_EXCERPT]).decode("utf-8", "replace")


async def _report(call: ToolCall, events: TurnEvents, tools: dict[str, ToolRecord]) -> None:
    """A tool call the agent made: into the turn's record (`tool_ran`) and its live stream."""
    record = ToolRecord(f"http-{len(tools) + 1}", call.name, call.args, call.result, call.ok)
    tools[record.call_id] = record
    tool_ran(record)
    await events.emit(
        {"type": "tool_call", "name": call.name, "args": call.args, "result": call.result}
    )


def _outcome(text: str | None, usage: Usage | None, tools: Mapping[str, ToolRecord]) -> Outcome:
    used = None if usage is None else usage.model_dump(exclude_none=True)
    records = tuple(tools.values())
    if text is None or not text.strip():
        return Outcome.empty(usage=used, tools=records)
    return Outcome.succeeded(text, usage=used, tools=records)
