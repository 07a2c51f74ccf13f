"""DeliveryStore contract, on every backend: one record per (channel, message), pending -> settled."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentcron.domain.deliveries import DeliveryState
from agentcron.store.errors import DeliveryNotFoundError
from agentcron.store.sql import SqlStore
from tests.conftest import T0

SEC = timedelta(seconds=1)
PAYLOAD = {"text": "hello", "meta": {"source": "user", "n": 1}}


async def test_enqueue_records_a_pending_delivery_once(store: SqlStore) -> None:
    deliveries = store.deliveries
    record, created = await deliveries.enqueue("webhook", "m1", "telegram:42", PAYLOAD, T0)
    assert created
    assert (record.state, record.attempts, record.payload) == (DeliveryState.PENDING, 0, PAYLOAD)
    assert (record.session_key, record.created_at, record.delivered_at) == ("telegram:42", T0, None)

    again, created = await deliveries.enqueue(
        "webhook", "m1", "telegram:42", {"other": 1}, T0 + SEC
    )
    assert not created
    assert again == record  # the first record stands, payload included
    # the same message on another channel is a delivery of its own
    _, created = await deliveries.enqueue("telegram", "m1", "telegram:42", PAYLOAD, T0)
    assert created


async def test_an_attempt_is_a_compare_and_set_on_the_attempt_count(store: SqlStore) -> None:
    deliveries = store.deliveries
    await deliveries.enqueue("webhook", "m1", "web:1", PAYLOAD, T0)
    first = await deliveries.begin_attempt("webhook", "m1", attempts=0, now=T0 + SEC)
    assert first is not None
    assert (first.attempts, first.updated_at) == (1, T0 + SEC)
    # someone who read the record before that attempt loses
    assert await deliveries.begin_attempt("webhook", "m1", attempts=0, now=T0 + SEC) is None

    # two processes resuming the same pending record: exactly one attempts it
    both = await asyncio.gather(
        *(deliveries.begin_attempt("webhook", "m1", attempts=1, now=T0) for _ in range(2))
    )
    assert sorted(r is None for r in both) == [False, True]


async def test_retry_then_delivered_then_nothing_more(store: SqlStore) -> None:
    deliveries = store.deliveries
    await deliveries.enqueue("webhook", "m1", "web:1", PAYLOAD, T0)
    await deliveries.begin_attempt("webhook", "m1", attempts=0, now=T0)
    assert await deliveries.mark_retry(
        "webhook", "m1", error="HTTP 503", next_attempt_at=T0 + 2 * SEC, now=T0 + SEC
    )
    waiting = await deliveries.get("webhook", "m1")
    assert (waiting.state, waiting.last_error, waiting.next_attempt_at) == (
        DeliveryState.PENDING, "HTTP 503", T0 + 2 * SEC,
    )  # fmt: skip

    await deliveries.begin_attempt("webhook", "m1", attempts=1, now=T0 + 2 * SEC)
    assert await deliveries.mark_delivered("webhook", "m1", T0 + 3 * SEC)
    done = await deliveries.get("webhook", "m1")
    assert (done.state, done.attempts, done.delivered_at) == (
        DeliveryState.DELIVERED, 2, T0 + 3 * SEC,
    )  # fmt: skip
    assert (done.last_error, done.next_attempt_at) == (None, None)
    # settled records do not move again
    assert not await deliveries.mark_failed("webhook", "m1", error="late", now=T0 + 4 * SEC)
    assert await deliveries.begin_attempt("webhook", "m1", attempts=2, now=T0) is None
    assert (await deliveries.get("webhook", "m1")).state is DeliveryState.DELIVERED


async def test_a_record_keeps_what_the_far_end_answered(store: SqlStore, store_url: str) -> None:
    deliveries = store.deliveries
    record, _ = await deliveries.enqueue("telegram", "apr.a1", "telegram:42", PAYLOAD, T0)
    assert record.result is None
    await deliveries.begin_attempt("telegram", "apr.a1", attempts=0, now=T0)
    answer = {"chat_id": 42, "message_id": 1000}
    assert await deliveries.mark_delivered("telegram", "apr.a1", T0 + SEC, result=answer)
    # another process (a store of its own on the same database) reads the same
    other = SqlStore(store_url)
    await other.open()
    try:
        assert (await other.deliveries.get("telegram", "apr.a1")).result == answer
    finally:
        await other.close()
    again, created = await deliveries.enqueue("telegram", "apr.a1", "telegram:42", {}, T0)
    assert (created, again.result) == (False, answer)

    # progress of an attempt in flight is kept while pending; delivered without a result of
    # its own keeps it; once settled, progress is refused
    await deliveries.enqueue("telegram", "long", "telegram:42", PAYLOAD, T0)
    await deliveries.begin_attempt("telegram", "long", attempts=0, now=T0)
    part = {"chat_id": 42, "message_ids": [1001]}
    assert await deliveries.save_progress("telegram", "long", part, T0 + SEC)
    saved = await deliveries.get("telegram", "long")
    assert (saved.state, saved.result, saved.updated_at) == (
        DeliveryState.PENDING, part, T0 + SEC,
    )  # fmt: skip
    assert await deliveries.mark_delivered("telegram", "long", T0 + 2 * SEC)
    assert (await deliveries.get("telegram", "long")).result == part
    assert not await deliveries.save_progress("telegram", "long", {"x": 1}, T0 + 3 * SEC)
    assert (await deliveries.get("telegram", "long")).result == part
    with pytest.raises(DeliveryNotFoundError):
        await deliveries.save_progress("telegram", "nope", part, T0)


async def test_unanswered_lists_requests_without_their_follow_up(store: SqlStore) -> None:
    deliveries = store.deliveries
    for message_id, at in [("apr.old", T0 - 2 * SEC), ("apr.a", T0), ("apr.b", T0 + SEC),
                           ("apr.c", T0 + 2 * SEC), ("apr.d", T0 + 3 * SEC), ("m1", T0),
                           ("apd.b", T0 + 4 * SEC)]:  # fmt: skip
        await deliveries.enqueue("telegram", message_id, "telegram:42", PAYLOAD, at)
    await deliveries.enqueue("webhook", "apr.e", "telegram:42", PAYLOAD, T0)
    await deliveries.mark_delivered("telegram", "apr.a", T0)
    await deliveries.mark_failed("telegram", "apr.c", error="HTTP 400", now=T0)
    found = await deliveries.unanswered(
        "telegram", prefix="apr.", answer_prefix="apd.", since=T0 - SEC
    )
    # apr.b has its answer, apr.c failed, apr.old is too old, m1 is no request, apr.e is
    # another channel's; delivered and pending requests both count, oldest first
    assert [d.message_id for d in found] == ["apr.a", "apr.d"]
    limited = await deliveries.unanswered(
        "telegram", prefix="apr.", answer_prefix="apd.", since=T0 - SEC, limit=1
    )
    assert [d.message_id for d in limited] == ["apr.a"]


async def test_failed_records_keep_their_error_and_are_not_pending(store: SqlStore) -> None:
    deliveries = store.deliveries
    for i in range(3):
        await deliveries.enqueue("webhook", f"m{i}", "web:1", PAYLOAD, T0 + i * SEC)
    await deliveries.enqueue("telegram", "m9", "telegram:1", PAYLOAD, T0)
    assert await deliveries.mark_failed("webhook", "m1", error="HTTP 400 Bad Request", now=T0)
    failed = await deliveries.get("webhook", "m1")
    assert (failed.state, failed.last_error) == (DeliveryState.FAILED, "HTTP 400 Bad Request")

    assert [d.message_id for d in await deliveries.pending("webhook")] == ["m0", "m2"]
    assert [d.message_id for d in await deliveries.pending("telegram")] == ["m9"]
    listed = await deliveries.list_deliveries(state=DeliveryState.FAILED)
    assert [(d.channel, d.message_id) for d in listed] == [("webhook", "m1")]
    assert len(await deliveries.list_deliveries(session_key="web:1", limit=2)) == 2


async def test_unknown_deliveries_raise_a_typed_error(store: SqlStore) -> None:
    with pytest.raises(DeliveryNotFoundError, match="no delivery of message 'nope'"):
        await store.deliveries.get("webhook", "nope")
    with pytest.raises(DeliveryNotFoundError):
        await store.deliveries.mark_delivered("webhook", "nope", T0)


async def test_message_reads_one_transcript_entry(store: SqlStore) -> None:
    await store.sessions.ensure_session("web:1", T0)
    entry = await store.sessions.append_message("web:1", "assistant", "hi", T0, {"status": "ok"})
    assert await store.sessions.get_message(entry.id) == entry
    assert await store.sessions.get_message("missing") is None


async def test_stalled_lists_pending_records_nobody_works_on(store: SqlStore) -> None:
    deliveries = store.deliveries
    for m in ("idle", "backing-off", "fresh", "done"):
        await deliveries.enqueue("webhook", m, "web:1", PAYLOAD, T0)
    await deliveries.begin_attempt("webhook", "backing-off", attempts=0, now=T0)
    await deliveries.mark_retry(
        "webhook", "backing-off", error="HTTP 503", next_attempt_at=T0 + 10 * SEC, now=T0
    )
    await deliveries.begin_attempt("webhook", "fresh", attempts=0, now=T0 + 5 * SEC)
    await deliveries.begin_attempt("webhook", "done", attempts=0, now=T0)
    await deliveries.mark_delivered("webhook", "done", T0)
    found = await deliveries.stalled("webhook", now=T0 + 6 * SEC, idle_for=2 * SEC)
    assert [d.message_id for d in found] == ["idle"]  # its retry is not due; one in flight
    found = await deliveries.stalled("webhook", now=T0 + 13 * SEC, idle_for=2 * SEC)
    assert sorted(d.message_id for d in found) == ["backing-off", "fresh", "idle"]


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
async def test_a_delivery_left_by_a_process_that_died_is_taken_over_once(
    store_url: str,
) -> None:
    """Process A records a reply, its first attempt fails (retry planned), and A dies: the
    outbox of process B on the same database finds the record stalled and delivers it, once.
    """
    from agentcron.channels.manager import OutboundMessage
    from agentcron.channels.outbox import DeliveryAttemptError, Outbox
    from agentcron.runtime.clock import SystemClock

    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
    sent: list[tuple[str, int]] = []
    delivered = asyncio.Event()

    async def failing(message: OutboundMessage, attempt: int) -> None:
        sent.append(("a", attempt))
        raise DeliveryAttemptError("HTTP 503", retryable=True, retry_after=0.1)

    async def working(message: OutboundMessage, attempt: int) -> None:
        sent.append(("b", attempt))
        delivered.set()

    async def forever(_delay: float) -> None:
        await asyncio.Event().wait()  # A "dies" in its backoff: it never tries again

    clock = SystemClock()
    first = Outbox("webhook", failing, sleep=forever, deliveries=a.deliveries, clock=clock)
    second = Outbox("webhook", working, deliveries=b.deliveries, clock=clock)
    for outbox in (first, second):
        outbox.stalled_after = timedelta(milliseconds=300)
        outbox.sweep_every = timedelta(milliseconds=50)
    message = OutboundMessage(
        session_key="web:1", channel="web", chat_id="1", text="hi", message_id="m1",
        status="succeeded",
    )  # fmt: skip
    try:
        await first.start()
        await second.start()
        await first.submit(message)
        async with asyncio.timeout(10):
            await delivered.wait()
            await second.idle()  # its attempt is settled in the store
        await first.stop()  # the dead process's worker is gone
        record = await b.deliveries.get("webhook", "m1")
        assert record.state is DeliveryState.DELIVERED
        assert sent == [("a", 1), ("b", 2)]  # attempts count on across processes
        await asyncio.sleep(0.3)  # further sweeps find nothing to send
        assert sent == [("a", 1), ("b", 2)]
    finally:
        await first.stop()
        await second.stop()
        for s in (a, b):
            await s.close()


async def test_a_file_s_bytes_are_kept_while_pending_or_failed_and_dropped_once_delivered(
    store: SqlStore,
) -> None:
    deliveries = store.deliveries
    files = [{"kind": "photo", "name": "p.png", "size": 3, "data": "AAEC"},
             {"kind": "document", "url": "https://files.example/a.pdf"}]  # fmt: skip
    for message_id in ("sent", "refused"):
        await deliveries.enqueue("telegram", message_id, "telegram:1",
                                 {**PAYLOAD, "attachments": files}, T0)  # fmt: skip
        await deliveries.begin_attempt("telegram", message_id, attempts=0, now=T0)
    await deliveries.mark_retry("telegram", "sent", error="429", next_attempt_at=T0, now=T0)
    assert (await deliveries.get("telegram", "sent")).payload["attachments"] == files  # resumable
    assert await deliveries.mark_delivered("telegram", "sent", T0 + SEC)
    assert await deliveries.mark_failed("telegram", "refused", error="403", now=T0 + SEC)
    delivered = await deliveries.get("telegram", "sent")
    assert delivered.payload == {**PAYLOAD, "attachments": [
        {"kind": "photo", "name": "p.png", "size": 3, "inline": True}, files[1]]}  # fmt: skip
    # a failed one keeps them: a re-send carries the file
    failed = await deliveries.get("telegram", "refused")
    assert failed.payload["attachments"] == files
    again = await deliveries.retry("telegram", "refused", now=T0 + 2 * SEC)
    assert again.payload["attachments"] == files
    # a settled record is not changed again
    assert not await deliveries.mark_delivered("telegram", "sent", T0 + 2 * SEC)


async def test_a_failed_delivery_can_be_made_pending_again_once(store: SqlStore) -> None:
    from agentcron.store.errors import DeliveryNotFailedError

    deliveries = store.deliveries
    await deliveries.enqueue("webhook", "m1", "web:1", PAYLOAD, T0)
    await deliveries.begin_attempt("webhook", "m1", attempts=0, now=T0)
    await deliveries.mark_failed("webhook", "m1", error="HTTP 400", now=T0 + SEC)
    again = await deliveries.retry("webhook", "m1", now=T0 + 9 * SEC)
    assert (again.state, again.attempts, again.last_error) == (
        DeliveryState.PENDING, 1, "HTTP 400",
    )  # fmt: skip
    assert (again.next_attempt_at, again.retried_at, again.updated_at) == (T0 + 9 * SEC,) * 3
    assert again.created_at == T0  # its place in the list stays
    # two who ask at once: one re-sends it, the other hears it is pending
    await deliveries.mark_failed("webhook", "m1", error="HTTP 400", now=T0 + 10 * SEC)
    both = await asyncio.gather(
        *(deliveries.retry("webhook", "m1", now=T0 + 11 * SEC) for _ in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in both) == ["Delivery", "DeliveryNotFailedError"]
    with pytest.raises(DeliveryNotFailedError, match="is pending, not failed"):
        await deliveries.retry("webhook", "m1", now=T0 + 12 * SEC)
    await deliveries.begin_attempt("webhook", "m1", attempts=1, now=T0 + 12 * SEC)
    await deliveries.mark_delivered("webhook", "m1", T0 + 13 * SEC, external_id="ext-1")
    done = await deliveries.get("webhook", "m1")
    assert (done.state, done.external_id, done.delivered_at) == (
        DeliveryState.DELIVERED, "ext-1", T0 + 13 * SEC,
    )  # fmt: skip
    with pytest.raises(DeliveryNotFailedError, match="already delivered"):
        await deliveries.retry("webhook", "m1", now=T0 + 14 * SEC)
    with pytest.raises(DeliveryNotFoundError):
        await deliveries.retry("webhook", "nope", now=T0)


async def test_an_unroutable_reply_is_recorded_failed_once(store: SqlStore) -> None:
    deliveries = store.deliveries
    record, created = await deliveries.record_failed(
        "slack", "m1", "slack:C1", PAYLOAD, error="no channel 'slack'", now=T0
    )
    assert created
    assert (record.state, record.attempts, record.last_error, record.next_attempt_at) == (
        DeliveryState.FAILED, 0, "no channel 'slack'", None,
    )  # fmt: skip
    assert await deliveries.pending("slack") == []
    same, created = await deliveries.record_failed(
        "slack", "m1", "slack:C1", PAYLOAD, error="other", now=T0 + SEC
    )
    assert not created
    assert same == record


async def test_an_attempt_in_flight_holds_the_record_for_its_lease(store: SqlStore) -> None:
    """With a lease no attempt begins beside one in flight, even for a caller that read the
    count after it began; once the lease is over, the one in flight is taken for dead.
    """
    deliveries = store.deliveries
    lease = 10 * SEC
    await deliveries.enqueue("webhook", "m1", "web:1", PAYLOAD, T0)
    first = await deliveries.begin_attempt("webhook", "m1", attempts=0, now=T0, lease=lease)
    assert first is not None
    assert (first.attempts, first.next_attempt_at) == (1, None)  # in flight
    late = T0 + 9 * SEC
    assert (
        await deliveries.begin_attempt("webhook", "m1", attempts=1, now=late, lease=lease) is None
    )
    # it failed: a retry is planned, and whoever reads the count now may begin the next one
    await deliveries.mark_retry(
        "webhook", "m1", error="HTTP 503", next_attempt_at=T0 + 11 * SEC, now=T0 + SEC
    )
    second = await deliveries.begin_attempt("webhook", "m1", attempts=1, now=late, lease=lease)
    assert second is not None
    assert second.attempts == 2
    # its process died mid-attempt: after the lease another takes it over
    assert (
        await deliveries.begin_attempt("webhook", "m1", attempts=2, now=late + SEC, lease=lease)
        is None
    )
    taken = await deliveries.begin_attempt(
        "webhook", "m1", attempts=2, now=late + lease, lease=lease
    )
    assert taken is not None
    assert taken.attempts == 3
