"""The agent's scheduling tools against a real AgentCron (fake clock): binding and guard rails."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from agentcron.agent.tools import (
    ToolDeps,
    ToolLimits,
    cron,
    manage_recall,
    schedule_recall,
    scheduling_tools,
)
from agentcron.domain.jobs import CreatedBy, JobKind
from agentcron.domain.states import RunState
from agentcron.schedule import AtSpec, EverySpec, describe
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory

KEY = "websocket:abc"


def ctx(app: Any, clock: FakeClock, **kw: Any) -> Any:
    kw.setdefault("session_key", KEY)
    return SimpleNamespace(deps=ToolDeps(jobs=app.jobs, now=clock.now(), **kw))


async def test_add_binds_to_the_current_session(make_cron: CronFactory, clock: FakeClock) -> None:
    app = await make_cron()
    text = await cron(
        ctx(app, clock), "add", name="stretch", when="in 10 minutes", message="stand up"
    )
    assert text.startswith("Scheduled “stretch”")
    (job,) = await app.jobs.list()
    assert job.session_key == KEY
    assert job.kind is JobKind.AGENT_TURN
    assert job.created_by is CreatedBy.AGENT
    assert job.spec == AtSpec(at=T0 + timedelta(minutes=10))
    assert job.policy.delete_after_run
    assert (job.deliver, job.channel, job.to) == (None, None, None)


async def test_add_without_session_context_fails_clearly(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    text = await cron(ctx(app, clock, session_key=None), "add", when="in 1h", message="x")
    assert text == ("Error: cannot add an automation here: this turn has no session to bind it to")
    assert await app.jobs.list() == []


async def test_deliver_is_not_advertised() -> None:
    schemas = {t.name: t.function_schema.json_schema for t in scheduling_tools()}
    assert set(schemas) == {"cron", "schedule_recall", "manage_recall"}
    assert "deliver" not in schemas["cron"]["properties"]
    assert "channel" not in schemas["cron"]["properties"]


async def test_guard_rails(make_cron: CronFactory, clock: FakeClock) -> None:
    app = await make_cron()
    limits = ToolLimits(max_jobs_per_session=2)  # recurring: at most every 5 minutes (default)
    c = ctx(app, clock, limits=limits)
    assert "at most every 5 minutes" in await cron(c, "add", when="every 1m", message="spam")
    assert "at most every 5 minutes" in await cron(c, "add", when="* * * * *", message="spam")
    assert (await cron(c, "add", when="every 10m", message="a")).startswith("Scheduled")
    # the same request again (a retried tool call) does not create a second job
    assert (await cron(c, "add", when="every 10m", message="a")).startswith("Scheduled")
    assert len(await app.jobs.list()) == 1
    assert (await cron(c, "add", when="every 1h", message="b")).startswith("Scheduled")
    assert "limit 2" in await cron(c, "add", when="every 2h", message="c")
    scheduled = ctx(app, clock, in_scheduled_turn=True)
    assert "inside a scheduled turn" in await cron(scheduled, "add", when="in 1h", message="d")
    assert "cannot read 'whenever'" in await cron(c, "add", when="whenever", message="e")
    system = await app.jobs.create(
        name="heartbeat", when="every 30m", session_key=KEY, kind=JobKind.SYSTEM_EVENT
    )
    assert "no automation 'heartbeat'" in await cron(c, "remove", name="heartbeat")
    assert (await app.jobs.get(system.id)).enabled


async def test_list_pause_resume_update_remove_by_name(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    c = ctx(app, clock)
    await cron(c, "add", name="check the build", when="every weekday at 9", message="check CI")
    listing = await cron(c, "list")
    assert "check the build" in listing
    assert "every weekday at 09:00 (UTC)" in listing
    assert await cron(c, "pause", name="check the build") == "Paused “check the build”."
    assert "paused (paused by the agent)" in await cron(c, "list")
    assert (await cron(c, "resume", name="build")).startswith("Resumed “check the build”")
    updated = await cron(c, "update", name="build", when="every day at 7:30")
    assert "every day at 07:30 (UTC)" in updated
    assert await cron(c, "remove", name="check the build") == "Removed “check the build”."
    assert await cron(c, "list") == "No automations in this session."
    assert "no automation 'nope'" in await cron(c, "pause", name="nope")


async def test_recalls_one_per_session_skip_and_cancel(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    c = ctx(app, clock)
    first = await schedule_recall(
        c, "once", "Read /tmp/build.log and report errors", when="in 30 seconds"
    )
    assert first.startswith("Recall scheduled")
    second = await schedule_recall(c, "once", "again", when="in 1h")
    assert second.startswith("Error: this session already has a pending recall")
    (recall,) = [j for j in await app.jobs.list() if j.kind is JobKind.RECALL]
    assert recall.spec == AtSpec(at=T0 + timedelta(seconds=30))
    assert recall.message == "Read /tmp/build.log and report errors"
    assert (await manage_recall(c, "cancel")).startswith("Cancelled the recall")
    listed = await manage_recall(c, "list")  # the cancelled one stays readable
    assert listed.splitlines()[1].startswith("- cancelled: Read /tmp/build.log and report errors")
    # a recurring one can skip, never into the past
    text = await schedule_recall(c, "recurring", "poll the API", interval_seconds=300)
    assert text.startswith("Recall scheduled")
    (recall,) = [j for j in await app.jobs.list() if j.kind is JobKind.RECALL]
    assert isinstance(recall.spec, EverySpec)
    assert recall.next_fire_at == T0 + timedelta(minutes=5)
    await app.engine.stop()  # the engine is down, so the recall becomes overdue
    clock.advance(timedelta(minutes=12))
    skipped = await manage_recall(ctx(app, clock), "skip")
    assert skipped.startswith("Skipped one occurrence")
    (recall,) = [j for j in await app.jobs.list() if j.kind is JobKind.RECALL]
    assert recall.next_fire_at == T0 + timedelta(minutes=15)  # after now, on its grid
    assert "interval_seconds >= 60" in await schedule_recall(
        c, "recurring", "x", interval_seconds=5
    )


async def test_immediate_recall_runs_right_after_the_turn(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    text = await schedule_recall(ctx(app, clock), "immediate", "continue the report")
    assert text.startswith("Recall scheduled")
    # due at once (the engine may claim it right away: it claims a few ms ahead)
    clock.advance(timedelta(milliseconds=1))
    await wait_settled(app.engine)
    (run,) = await app.runs.list(limit=None)
    assert run.state is RunState.SUCCEEDED
    assert run.fire_at - T0 < timedelta(seconds=1)
    assert await app.jobs.list() == []  # a one-shot recall is gone after its run


async def test_update_keeps_the_guard_rails_of_add(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    c = ctx(app, clock, session_key="web:1")
    added = await cron(c, "add", name="digest", when="every day at 9", message="sum up")
    assert added.startswith("Scheduled")
    for too_often in ("every 1m", "* * * * *", "every 30 seconds"):
        text = await cron(c, "update", name="digest", when=too_often)
        assert text.startswith("Error: recurring automations may run at most every 5 minutes")
    (job,) = await app.jobs.list(session_key="web:1")
    assert describe(job.spec) == "every day at 09:00 (UTC)"  # unchanged
    scheduled = ctx(app, clock, session_key="web:1", in_scheduled_turn=True)
    text = await cron(scheduled, "update", name="digest", when="every day at 10")
    assert text == "Error: schedules cannot be changed from inside a scheduled turn"
    # a new message is not a new schedule: allowed from a scheduled turn
    text = await cron(scheduled, "update", name="digest", message="sum up briefly")
    assert text.startswith("Updated “digest”")
    text = await cron(c, "update", name="digest", when="every 2h", timezone="Europe/Berlin")
    assert text.startswith("Updated “digest”: every 2 hours")


@pytest.mark.parametrize(
    ("call", "when", "offset", "first"),
    [
        # a recurring recall's `when` is its first fire (not one interval before it)
        ("recurring", "in 2 hours", None, T0 + timedelta(hours=2)),
        ("recurring", None, None, T0 + timedelta(hours=1)),  # no `when`: one interval from now
        # the offset applies to every absolute phrase, not only to ISO text (T0 is 12:00Z)
        ("once", "tomorrow at 09:00", "+02:00", T0.replace(hour=7) + timedelta(days=1)),
        ("once", "at 17:30", "-05:30", T0.replace(hour=23)),
        ("once", "2026-12-01 09:00", "+02:00", T0.replace(month=12, day=1, hour=7)),
        ("recurring", "tomorrow at 09:00", "+02:00", T0.replace(hour=7) + timedelta(days=1)),
        # a relative phrase, or one with its own offset or zone, is the same either way
        ("once", "in 90 minutes", "+02:00", T0 + timedelta(minutes=90)),
        ("once", "2026-12-01T09:00+05:00", "+02:00", T0.replace(month=12, day=1, hour=4)),
        (
            "once",
            "tomorrow at 09:00 Europe/Berlin",
            "+05:00",
            T0.replace(hour=8) + timedelta(days=1),
        ),
    ],
)
async def test_recall_times(
    make_cron: CronFactory, clock: FakeClock, call: str, when: str | None, offset: str | None,
    first: object,
) -> None:  # fmt: skip
    app = await make_cron()
    text = await schedule_recall(
        ctx(app, clock), call, "check the deploy", when=when, timezone_offset=offset,
        interval_seconds=3600,
    )  # fmt: skip
    assert text.startswith("Recall scheduled"), text
    (recall,) = [j for j in await app.jobs.list() if j.kind is JobKind.RECALL]
    assert recall.next_fire_at == first


async def test_a_malformed_timezone_offset_is_refused(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    text = await schedule_recall(
        ctx(app, clock), "once", "x", when="tomorrow at 9", timezone_offset="Berlin"
    )
    assert text == "Error: timezone_offset must look like +02:00 or -05:30, not 'Berlin'"


async def test_ids_name_automations_whole_shortened_or_given_as_the_name(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    c = ctx(app, clock)
    await cron(c, "add", name="report", when="every day at 9", message="a")
    await cron(c, "add", name="report weekly", when="every monday at 9", message="b")
    daily, weekly = sorted(await app.jobs.list(session_key=KEY), key=lambda j: j.name)
    listed = await cron(c, "list")
    assert listed.splitlines()[1].endswith(f"; id {daily.id}")  # the id last, after the name
    # "report" is one automation's exact name: it wins over the partial match
    assert await cron(c, "pause", name="report") == "Paused “report”."
    ambiguous = await cron(c, "resume", name="repo")
    assert ambiguous.startswith("Error: 'repo' matches 2 automations")
    assert f"job_id {daily.id}" in ambiguous
    assert f"job_id {weekly.id}" in ambiguous
    assert (await cron(c, "resume", job_id=daily.id.lower())).startswith("Resumed “report”")
    assert await cron(c, "pause", name=weekly.id) == "Paused “report weekly”."
    assert await cron(c, "remove", job_id=weekly.id[:-4] + "...") == "Removed “report weekly”."
    too_short = await cron(c, "remove", job_id=daily.id[:3])
    assert too_short.startswith(f"Error: no automation {daily.id[:3]!r} in this session")


async def test_the_minimum_interval_is_the_setting_the_api_holds_to_too(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    from dataclasses import replace

    from agentcron.config.engine import EngineSettings

    app = await make_cron(settings=replace(EngineSettings(), min_interval=timedelta(seconds=30)))
    c = ctx(app, clock)
    refused = await cron(c, "add", name="often", when="every 10 seconds", message="x")
    assert refused == (
        "Error: recurring automations may run at most every 30 seconds (engine.min_interval); "
        "this one runs every 10 seconds"
    )
    lowered = await cron(c, "add", name="minutely", when="every 1m", message="x")
    assert lowered.startswith("Scheduled “minutely”: every minute")  # the operator lowered it
