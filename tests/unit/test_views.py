"""The views: records as the API's JSON (instants, enums, keys only some answers have)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobPolicy
from agentcron.domain.runs import Run
from agentcron.domain.sessions import Turn, TurnSource
from agentcron.domain.states import RunState, TurnState
from agentcron.schedule import CronSpec
from agentcron.service.jobs import JobState
from agentcron.service.sessions import Deletion, TurnDetail
from agentcron.views import DeletionOut, JobOut, RunOut, TurnDetailOut, iso, job_view

T0 = datetime(2025, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


def job(**changes: Any) -> Job:
    made = Job(
        id="j1", name="digest", kind=JobKind.AGENT_TURN, session_key="api:a",
        spec=CronSpec(expr="0 9 * * *", tz="Europe/Paris"), message="m", enabled=True,
        paused_reason=None, paused_at=None, created_by=CreatedBy.API, policy=JobPolicy(),
        next_fire_at=T0, next_run_at=T0, last_run_at=None, last_status=None,
        consecutive_failures=0, run_count=0, remaining_runs=None, idempotency_key=None,
        lease_owner=None, lease_expires_at=None, version=1, created_at=T0, updated_at=T0,
    )  # fmt: skip
    return replace(made, **changes)


def turn(reply_message_id: str | None) -> Turn:
    return Turn(id="t1", session_key="api:a", source=TurnSource.USER, state=TurnState.QUEUED,
                run_id=None, content="hi", created_at=T0, started_at=None, finished_at=None,
                error=None, error_details=None, usage=None,
                reply_message_id=reply_message_id)  # fmt: skip


def test_a_job_as_json_instants_enums_spec_and_what_is_computed() -> None:
    paused = T0.astimezone(timezone(timedelta(hours=2)))
    run = Run(id="r1", job_id="j1", session_key="api:a", fire_at=T0, state=RunState.QUEUED,
              owner=None, lease_expires_at=None, claimed_at=T0, queued_at=T0, deferred_at=None,
              started_at=None, finished_at=None)  # fmt: skip
    view = JobOut.of_state(JobState(job(paused_at=paused, channel="tg"), active_run=run))
    shown = view.json_dict()
    assert shown["created_at"] == "2025-03-04T05:06:07.890000Z" == iso(T0)
    assert shown["paused_at"] == "2025-03-04T07:06:07.890000+02:00"  # as stored, offset kept
    assert shown["kind"] == "agent_turn"
    assert shown["spec"] == {"kind": "cron", "expr": "0 9 * * *", "tz": "Europe/Paris"}
    assert shown["tz"] == "Europe/Paris"
    assert shown["schedule"].endswith("(Europe/Paris)")
    assert shown["policy"]["catchup_window_s"] == 86400
    assert shown["legacy"] is True  # a target field: the wire's old name
    assert shown["active_run"] == {"id": "r1", "state": "queued"}
    assert list(shown)[:3] == ["id", "name", "kind"]  # the declared order
    # the WebSocket's embedded job is the same JSON; the HTTP answer the same bytes
    assert job_view(job()) == JobOut.of_job(job()).json_dict()
    assert json.loads(JobOut.of_job(job()).model_dump_json()) == job_view(job())


def test_a_turn_shows_reply_only_once_it_has_one() -> None:
    waiting = TurnDetailOut.of_detail(TurnDetail(turn(None), None)).json_dict()
    assert "reply" not in waiting
    replied = TurnDetailOut.of_detail(TurnDetail(turn("m9"), "done")).json_dict()
    assert replied["reply"] == "done"
    gone = TurnDetailOut.of_detail(TurnDetail(turn("m9"), None)).json_dict()
    assert "reply" in gone
    assert gone["reply"] is None  # the reply entry is gone: still said
    assert "reply" in TurnDetailOut.model_json_schema(mode="serialization")["properties"]


def test_a_deletion_has_the_keys_of_its_outcome_only() -> None:
    blocked = DeletionOut.of_deletion(Deletion(False, blocking=[job()])).json_dict()
    assert blocked == {
        "deleted": False,
        "blocked_by_automations": True,
        "automations": [{"id": "j1", "name": "digest", "enabled": True}],
    }
    done = DeletionOut.of_deletion(Deletion(True, deleted_automations=["j1"])).json_dict()
    assert done == {"deleted": True, "deleted_automations": ["j1"]}


def test_a_record_without_a_field_the_view_needs_is_an_error() -> None:
    with pytest.raises(ValidationError, match="fire_at"):
        RunOut.of(turn(None), job_id="j1")  # a turn is no run: a bug, not a partial answer
