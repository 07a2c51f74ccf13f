"""Durable outbound delivery: a record per (channel, message), attempts with exponential backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agentcron.channels.manager import OutboundMessage
from agentcron.config.channels import DEFAULT_DELIVERY_DEADLINE, describe_seconds
from agentcron.domain.deliveries import Delivery, DeliveryState
from agentcron.domain.events import DeliveryFailed, DeliverySucceeded, Event
from agentcron.domain.quiet import held_until
from agentcron.errors import AgentcronError
from agentcron.runtime.clock import Clock
from agentcron.store.interface import DeliveryLedger

log = logging.getLogger(__name__)

_STALLED_AFTER = timedelta(minutes=2)  # longer than any attempt (HTTP timeouts are ~30 s)
_SWEEP_EVERY = timedelta(seconds=30)

Sleep = Callable[[float], Awaitable[None]]
"""Waits between attempts (real seconds); tests pass a fast one."""

Attempt = Callable[[OutboundMessage, int], Awaitable[dict[str, Any] | None]]
"""(message, attempt number from 1, counted across processes) -> once the far end accepted
it, what it answered that a follow-up needs (kept in the delivery record's `result`; None:
nothing, or what `Outbox.save_progress` left; its `external_id`, a string, is the far end's
id of the message, kept in the record's column of that name and sent with the
`delivery_succeeded` event); raises DeliveryAttemptError (or any exception, taken as
retryable) otherwise."""

EXTERNAL_ID = "external_id"  # the key of an attempt's answer that names the far end's id


Report = Callable[[Event], Awaitable[None]]
"""Publishes a delivery's outcome (`AgentCron.publish`: the event stream)."""


@dataclass(slots=True)
class Health:
    """What a channel's deliveries did lately (in this process): for `GET /api/channels`."""

    last_success_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    failed: int = 0  # deliveries given up since start
    healthy: bool = True  # the latest attempt succeeded (or none was made yet)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: the wait after attempt n is initial * factor**(n-1), capped.

    A delivery is retried until `deadline` seconds after it was recorded (or re-sent by
    hand), the last attempt made at the deadline; `max_attempts` (None: no cap) ends it
    earlier. So a channel that is down for a while (an outage, a restart of the far end)
    gets its deliveries once it is back, in order.
    """

    max_attempts: int | None = None
    initial_delay: float = 1.0  # seconds
    factor: float = 2.0
    max_delay: float = 300.0
    deadline: float = DEFAULT_DELIVERY_DEADLINE  # seconds

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.deadline <= 0:
            raise ValueError("the delivery deadline must be positive")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must not be negative")
        if self.factor < 1:
            raise ValueError("the backoff factor must be at least 1")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt `attempt`; a server's Retry-After is honoured
        up to `max_delay`.
        """
        wait = min(self.max_delay, self.initial_delay * self.factor ** max(0, attempt - 1))
        if retry_after is not None:
            wait = min(self.max_delay, max(wait, retry_after))
        return wait


class DeliveryAttemptError(AgentcronError):
    """One attempt failed; `retryable` says whether another attempt can succeed."""

    def __init__(self, reason: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retryable, self.retry_after = reason, retryable, retry_after


class OutboxNotBoundError(AgentcronError, RuntimeError):
    def __init__(self, channel: str) -> None:
        super().__init__(
            f"channel {channel!r} keeps delivery records: bind it to a store first "
            "(ChannelManager.start does this, or pass deliveries= and clock=)"
        )


class Outbox:
    """Sends a channel's messages one at a time, in order, each at most once successfully.

    `submit` records the message as pending before it returns; a worker task attempts it,
    retries retryable failures with backoff until the policy's deadline (a channel that is
    down holds its messages that long) and settles the record as delivered or failed; a
    failed one made pending again (`Deliveries.retry`) is queued by `resume`.
    A message already recorded on this channel is never sent again, nor attempted by a
    second submitter: only the `submit` that created the record queues it, so replicas that
    all see the same event (an approval's decision) send it once. Pending records (an outage,
    a restart mid-retry) are resumed by `start`. Attempts go on counting across restarts. A
    process that dies during an attempt sends that message again on its next start (at least
    once): receivers deduplicate by message id. What an attempt got back (`Attempt`) is kept
    in the record, so a follow-up made by any process can read it (`record`).
    """

    def __init__(
        self,
        channel: str,
        attempt: Attempt,
        *,
        retry: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        deliveries: DeliveryLedger | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.channel = channel
        self.retry = retry or RetryPolicy()
        # A pending record another process left is taken over after this long untouched
        # (longer than any attempt takes); looked for this often.
        self.stalled_after = _STALLED_AFTER
        self.sweep_every = _SWEEP_EVERY
        self._attempt = attempt
        self._sleep = sleep
        self._deliveries = deliveries
        self._clock = clock
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._worker: asyncio.Task[None] | None = None
        self._report: Report | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # Deliveries held until a time (a reply in its session's quiet hours): their wakes.
        self._later: dict[str, asyncio.Task[None]] = {}
        self.health = Health()

    def bind(self, deliveries: DeliveryLedger, clock: Clock, report: Report | None = None) -> None:
        """Keep records in `deliveries`; publish each attempt's outcome through `report`."""
        self._deliveries, self._clock = deliveries, clock
        self._report = report

    async def _publish(self, event: Event) -> None:
        if self._report is None:
            return
        try:
            await self._report(event)
        except Exception:  # an event nobody could take costs the event, not the delivery
            log.exception(
                "outbox: could not publish a delivery outcome", extra={"channel": self.channel}
            )

    @property
    def _store(self) -> tuple[DeliveryLedger, Clock]:
        if self._deliveries is None or self._clock is None:
            raise OutboxNotBoundError(self.channel)
        return self._deliveries, self._clock

    async def start(self) -> None:
        """Start the worker and resume the channel's pending deliveries, oldest first."""
        deliveries, _ = self._store
        if self._worker is not None:
            return
        self._queue = asyncio.Queue()
        self._queued.clear()
        self._worker = asyncio.create_task(self._work(), name=f"outbox:{self.channel}")
        resumed = await deliveries.pending(self.channel)
        for record in resumed:
            self._put(record.message_id)
        if resumed:
            log.info(
                "outbox: resuming pending deliveries",
                extra={"channel": self.channel, "count": len(resumed)},
            )
        self._sweeper = asyncio.create_task(self._sweep(), name=f"outbox-sweep:{self.channel}")

    async def _sweep(self) -> None:
        """Take over, every `sweep_every`, the pending records another process left (it
        stopped or died mid-retry): untouched for `stalled_after`, their next attempt that long
        overdue. An attempt is taken with a compare-and-set on its count (`begin_attempt`), so
        a record still worked on elsewhere is never sent twice by one attempt.
        """
        deliveries, clock = self._store
        while True:
            await asyncio.sleep(self.sweep_every.total_seconds())
            try:
                found = await deliveries.stalled(
                    self.channel, now=clock.now(), idle_for=self.stalled_after
                )
            except Exception as exc:
                log.warning("outbox: looking for stalled deliveries failed: %s", exc)
                continue
            for record in found:
                if record.message_id not in self._queued:
                    log.info(
                        "outbox: taking over a stalled delivery",
                        extra={"channel": self.channel, "message_id": record.message_id},
                    )
                    self._put(record.message_id)

    async def stop(self) -> None:
        """Stop at once; what is not delivered stays pending for the next start."""
        worker, self._worker = self._worker, None
        sweeper, self._sweeper = self._sweeper, None
        later, self._later = list(self._later.values()), {}
        tasks = [t for t in (worker, sweeper, *later) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def submit(self, message: OutboundMessage) -> Delivery:
        """Record `message` as pending (durably, before returning) and queue it; a message
        already recorded (here or by another process) is left to whoever recorded it.
        """
        deliveries, clock = self._store
        record, created = await deliveries.enqueue(
            self.channel,
            message.message_id,
            message.session_key,
            message.to_payload(),
            clock.now(),
        )
        if not created:
            # Another submitter (a replica that saw the same event, or an earlier submit here)
            # owns the attempts; a record it left pending is resumed by a start.
            log.info(
                "outbox: message already recorded on this channel; not sent again",
                extra={
                    "channel": self.channel,
                    "session_key": message.session_key,
                    "message_id": message.message_id,
                    "state": record.state.value,
                },
            )
        else:
            self._put(record.message_id)
        return record

    async def record(self, message_id: str) -> Delivery:
        """This channel's record of `message_id` (DeliveryNotFoundError: none): what a
        follow-up reads, such as the message an approval's decision edits.
        """
        deliveries, _ = self._store
        return await deliveries.get(self.channel, message_id)

    async def save_progress(self, message_id: str, result: dict[str, Any]) -> bool:
        """Keep what the attempt in flight achieved so far in the record's `result`, so a
        later attempt (in any process) goes on from there; False if it is not pending.
        """
        deliveries, clock = self._store
        return await deliveries.save_progress(self.channel, message_id, result, clock.now())

    def resume(self, message_id: str) -> None:
        """Queue a pending record again (a failed delivery re-sent: `Deliveries.retry`)."""
        self._put(message_id)

    async def idle(self) -> None:
        """Wait until every queued delivery is settled or waiting for a later start."""
        await self._queue.join()

    def _put(self, message_id: str) -> None:
        if message_id not in self._queued:
            self._queued.add(message_id)
            self._queue.put_nowait(message_id)

    async def _work(self) -> None:
        while True:
            message_id = await self._queue.get()
            try:
                await self._deliver(message_id)
            except Exception:
                # A store failure: the record stays pending and the next start resumes it.
                log.exception(
                    "outbox: delivery interrupted by an error; left pending",
                    extra={"channel": self.channel, "message_id": message_id},
                )
            finally:
                self._queued.discard(message_id)
                self._queue.task_done()

    def _hold(self, message_id: str, at: datetime) -> None:
        """Queue a pending record at `at` (not before): a reply its quiet hours hold."""
        if message_id in self._later:
            return
        _, clock = self._store

        async def wake() -> None:
            await clock.sleep_until(at, asyncio.Event())
            self._later.pop(message_id, None)
            self._put(message_id)

        self._later[message_id] = asyncio.create_task(wake(), name=f"outbox-hold:{message_id}")

    async def _deliver(self, message_id: str) -> None:
        deliveries, clock = self._store
        record = await deliveries.get(self.channel, message_id)
        at = held_until(record.payload.get("meta") or {})
        if record.state is DeliveryState.PENDING and at is not None and at > clock.now():
            log.info(
                "outbox: delivery held until its quiet hours end",
                extra={"channel": self.channel, "message_id": message_id, "until": at.isoformat()},
            )
            self._hold(message_id, at)
            return
        while record.state is DeliveryState.PENDING:
            claimed = await deliveries.begin_attempt(
                self.channel,
                message_id,
                attempts=record.attempts,
                now=clock.now(),
                lease=self.stalled_after,
            )
            if claimed is None:
                log.info(
                    "outbox: delivery taken over or settled elsewhere",
                    extra={"channel": self.channel, "message_id": message_id},
                )
                return
            ctx = {
                "channel": self.channel,
                "session_key": claimed.session_key,
                "message_id": message_id,
                "attempt": claimed.attempts,
            }
            try:
                result = await self._attempt(
                    OutboundMessage.from_payload(claimed.payload), claimed.attempts
                )
            except DeliveryAttemptError as exc:
                error, retryable, retry_after = exc.reason, exc.retryable, exc.retry_after
            except Exception as exc:  # an unexpected failure may pass: retry it
                log.exception("outbox: attempt raised unexpectedly", extra=ctx)
                error, retryable, retry_after = f"{type(exc).__name__}: {exc}", True, None
            else:
                await self._delivered(claimed, result, ctx)
                return
            retry = await self._failed(claimed, error, retryable, retry_after, ctx)
            if retry is None:
                return
            await self._sleep(retry)
            record = await deliveries.get(self.channel, message_id)

    async def _delivered(
        self, claimed: Delivery, result: dict[str, Any] | None, ctx: dict[str, Any]
    ) -> None:
        deliveries, clock = self._store
        now = clock.now()
        kept = dict(result or {})
        given = kept.pop(EXTERNAL_ID, None)  # a column of its own, not part of the answer
        external_id = given if isinstance(given, str) and given else None
        await deliveries.mark_delivered(
            self.channel,
            claimed.message_id,
            now,
            result=kept or None,
            external_id=external_id,
        )
        log.info("outbox: delivered", extra={**ctx, "external_id": external_id})
        self.health.last_success_at, self.health.healthy = now, True
        await self._publish(
            DeliverySucceeded(
                session_key=claimed.session_key,
                channel=self.channel,
                message_id=claimed.message_id,
                attempts=claimed.attempts,
                external_id=external_id,
                delivered_at=now,
            )
        )

    async def _failed(
        self,
        claimed: Delivery,
        error: str,
        retryable: bool,
        retry_after: float | None,
        ctx: dict[str, Any],
    ) -> float | None:
        """Settle a failed attempt: the seconds until the next one, or None when it gave up
        (a permanent error, no attempts left, or the deadline reached).
        """
        deliveries, clock = self._store
        message_id = claimed.message_id
        now = clock.now()
        self.health.last_error, self.health.last_error_at = error, now
        self.health.healthy = False
        # the deadline counts from when it was recorded, or re-sent by hand
        give_up_at = (claimed.retried_at or claimed.created_at) + timedelta(
            seconds=self.retry.deadline
        )
        cap = self.retry.max_attempts
        reason: str | None = None
        if not retryable:
            why, reason = "permanent error", error
        elif cap is not None and claimed.attempts >= cap:
            why, reason = "no attempts left", error
        elif now >= give_up_at:
            waited = describe_seconds(self.retry.deadline)
            why = "deadline"
            reason = f"not delivered within the deadline ({waited}); last error: {error}"
        retry: float | None = None
        if reason is not None:
            await deliveries.mark_failed(self.channel, message_id, error=reason, now=now)
            log.error("outbox: delivery failed (%s): %s", why, error, extra=ctx)
            self.health.failed += 1
        else:
            # the last attempt is made at the deadline
            left = (give_up_at - now).total_seconds()
            delay = min(self.retry.delay(claimed.attempts, retry_after), left)
            retry = delay
            await deliveries.mark_retry(
                self.channel,
                message_id,
                error=error,
                next_attempt_at=now + timedelta(seconds=delay),
                now=now,
            )
            log.warning("outbox: attempt failed, retrying in %.1fs: %s", delay, error, extra=ctx)
        await self._publish(
            DeliveryFailed(
                session_key=claimed.session_key,
                channel=self.channel,
                message_id=message_id,
                attempts=claimed.attempts,
                error=error if reason is None else reason,
                retryable=reason is None,
            )
        )
        return retry
