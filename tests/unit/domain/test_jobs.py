"""A recall's view of its job: pending or paused (with why), and what it keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentcron.domain.jobs import (
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    Recall,
    RecallCallType,
    RecallState,
)
from agentcron.schedule import EverySpec

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def recall_job(*, enabled: bool) -> Job:
    return Job(
        id="r1",
        name="poll",
        kind=JobKind.RECALL,
        session_key="websocket:a",
        spec=EverySpec(seconds=60, anchor=T0),
        message="poll the API",
        enabled=enabled,
        paused_reason=None if enabled else "auto-paused after 5 consecutive failures",
        paused_at=None if enabled else T0,
        created_by=CreatedBy.AGENT,
        policy=JobPolicy(),
        next_fire_at=T0 + timedelta(minutes=1) if enabled else None,
        next_run_at=T0 + timedelta(minutes=1) if enabled else None,
        last_run_at=None,
        last_status=None,
        consecutive_failures=0,
        run_count=0,
        remaining_runs=None,
        idempotency_key=None,
        lease_owner=None,
        lease_expires_at=None,
        version=1,
        created_at=T0,
        updated_at=T0,
        call_type=RecallCallType.RECURRING,
        internal_comment="a long note",
    )


def test_an_enabled_recall_job_is_pending_with_its_next_fire() -> None:
    recall = Recall.live(recall_job(enabled=True))
    assert recall.state is RecallState.PENDING
    assert recall.next_fire_at == T0 + timedelta(minutes=1)
    assert (recall.paused_reason, recall.paused_at) == (None, None)
    assert (recall.call_type, recall.internal_comment) == (RecallCallType.RECURRING, "a long note")


def test_a_disabled_recall_job_is_paused_and_says_why() -> None:
    recall = Recall.live(recall_job(enabled=False))
    assert recall.state is RecallState.PAUSED
    assert recall.next_fire_at is None
    assert recall.paused_reason == "auto-paused after 5 consecutive failures"
    assert recall.paused_at == T0
