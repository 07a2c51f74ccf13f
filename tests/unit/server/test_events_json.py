"""Each typed event's WebSocket JSON (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agentcron.domain.events import (
    ChatContext,
    Event,
    FireStarted,
    JobAction,
    JobEvent,
    MessagePosted,
    RunnerEvent,
    SessionDeleted,
    SessionSync,
    StreamEnd,
    StreamStart,
    TextDelta,
    ToolCalled,
    ToolStarted,
)
from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobPolicy
from agentcron.domain.sessions import Message
from agentcron.schedule import AtSpec
from agentcron.server.events_json import event_json
from agentcron.views import job_view

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
KEY = "websocket:abc"


def message(role: str = "assistant", **meta: Any) -> Message:
    return Message(id="m1", session_key=KEY, seq=3, role=role, content="hello",
                   meta=dict(meta), created_at=T0)  # fmt: skip


def job(kind: JobKind = JobKind.AGENT_TURN, session_key: str | None = KEY) -> Job:
    return Job(
        id="j1", name="stretch", kind=kind, session_key=session_key, spec=AtSpec(at=T0),
        message="stretch", enabled=True, paused_reason=None, paused_at=None,
        created_by=CreatedBy.AGENT, policy=JobPolicy(), next_fire_at=T0, next_run_at=T0,
        last_run_at=None, last_status=None, consecutive_failures=0, run_count=0,
        remaining_runs=None, idempotency_key=None, lease_owner=None, lease_expires_at=None,
        version=1, created_at=T0, updated_at=T0,
    )  # fmt: skip


def test_turn_events_as_json() -> None:
    assert event_json(StreamStart(session_key=KEY, turn_id="t1", source="user")) == {
        "type": "stream_start", "turn_id": "t1", "source": "user", "session_key": KEY,
    }  # fmt: skip
    assert event_json(TextDelta(session_key=KEY, turn_id="t1", text="hi")) == {
        "type": "text_delta", "text": "hi", "session_key": KEY,
    }  # fmt: skip
    assert event_json(ToolStarted(session_key=KEY, turn_id="t1", name="n", args={"a": 1})) == {
        "type": "tool_started", "name": "n", "args": {"a": 1}, "session_key": KEY,
    }  # fmt: skip
    called = ToolCalled(session_key=KEY, turn_id="t1", name="n", args={"a": 1}, result="r")
    assert event_json(called) == {
        "type": "tool_call", "name": "n", "args": {"a": 1}, "result": "r", "session_key": KEY,
    }  # fmt: skip


def test_other_runner_events_go_out_as_the_runner_emitted_them() -> None:
    event = RunnerEvent(session_key=KEY, turn_id="t1", name="thinking",
                        data={"text": "hmm", "session_key": "forged"})  # fmt: skip
    assert event_json(event) == {"type": "thinking", "text": "hmm", "session_key": KEY}


def test_stream_end_as_json() -> None:
    end = StreamEnd(session_key=KEY, turn_id="t1", status="succeeded", source="automation",
                    run_id="r1", reply=message(),
                    chat=ChatContext(channel="websocket", chat_id="abc"))  # fmt: skip
    assert event_json(end) == {
        "type": "stream_end", "turn_id": "t1", "status": "succeeded", "message_id": "m1",
        "session_key": KEY,
    }  # fmt: skip
    lost = StreamEnd(session_key=KEY, turn_id="t1", status="failed", source="user")
    assert event_json(lost)["message_id"] is None


def test_session_events_as_json() -> None:
    assert event_json(SessionSync(session_key=KEY)) == {"type": "session_sync", "session_key": KEY}
    assert event_json(SessionDeleted(session_key=KEY)) == {
        "type": "session_deleted", "session_key": KEY,
    }  # fmt: skip
    posted = MessagePosted(session_key=KEY, message=message(source="legacy_automation"))
    assert event_json(posted) == {
        "type": "message", "session_key": KEY, "message_id": "m1", "role": "assistant",
        "content": "hello", "meta": {"source": "legacy_automation"},
    }  # fmt: skip


def test_a_job_change_as_json_carries_the_job() -> None:
    changed = job()
    event = JobEvent(session_key=KEY, action=JobAction.PAUSED, job_id="j1",
                     kind=JobKind.AGENT_TURN, job=changed)  # fmt: skip
    assert event_json(event) == {
        "type": "automation_update", "action": "paused", "job_id": "j1", "session_key": KEY,
        "job": job_view(changed),
    }  # fmt: skip


def test_a_fire_of_a_job_as_json_carries_its_run_and_status() -> None:
    fired = JobEvent(session_key=KEY, action=JobAction.FIRED, job_id="j1",
                     kind=JobKind.RECALL, run_id="r1")  # fmt: skip
    assert event_json(fired) == {
        "type": "recall_update", "action": "fired", "job_id": "j1", "run_id": "r1",
        "session_key": KEY,
    }  # fmt: skip
    finished = JobEvent(session_key=KEY, action=JobAction.FINISHED, job_id="j1",
                        kind=JobKind.AGENT_TURN, run_id="r1", status="failed")  # fmt: skip
    assert event_json(finished) == {
        "type": "automation_update", "action": "finished", "job_id": "j1", "run_id": "r1",
        "status": "failed", "session_key": KEY,
    }  # fmt: skip


def test_an_unbound_job_has_an_empty_session_key() -> None:
    system = job(JobKind.SYSTEM_EVENT, session_key=None)
    event = JobEvent(session_key="", action=JobAction.CREATED, job_id="j1",
                     kind=JobKind.SYSTEM_EVENT, job=system)  # fmt: skip
    body = event_json(event)
    assert (body["type"], body["session_key"]) == ("automation_update", "")
    assert body["job"]["session_key"] is None


def test_fire_started_has_a_json_form_too() -> None:
    event = FireStarted(session_key=KEY, job_id="j1", run_id="r1", lateness_s=0.25)
    assert event_json(event) == {
        "type": "fire_started", "job_id": "j1", "run_id": "r1", "lateness_s": 0.25,
        "session_key": KEY,
    }  # fmt: skip


def test_an_event_without_a_json_form_is_refused() -> None:
    class Unknown(Event):
        pass

    with pytest.raises(TypeError, match="Unknown"):
        event_json(Unknown(session_key=KEY))
