"""The scheduling tools the agent gets: `cron`, `schedule_recall` and `manage_recall`.

They bind every new job to the current session from the turn's context, never create unbound
jobs, read times through `parse_when` on the server, and return errors to the model as text.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic_ai import RunContext, Tool

from agentcron.agent.tool_deps import JobsAPI, ToolDeps, ToolLimits
from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobStatus, Recall, RecallState
from agentcron.errors import AgentcronError
from agentcron.schedule import (
    AtSpec,
    CronSpec,
    EverySpec,
    ScheduleError,
    describe,
    parse_when,
    upcoming,
)
from agentcron.schedule.zones import get_zone
from agentcron.store.errors import ConflictError, StoreError

__all__ = [
    "JobsAPI",
    "ToolDeps",
    "ToolError",
    "ToolLimits",
    "cron",
    "manage_recall",
    "schedule_recall",
    "scheduling_tools",
]


class ToolError(AgentcronError):
    """A refusal or bad input, told to the model as readable text."""


def _interval(spec: AtSpec | CronSpec | EverySpec, now: datetime) -> timedelta | None:
    if isinstance(spec, AtSpec):
        return None
    if isinstance(spec, EverySpec):
        return spec.interval
    fires = upcoming(spec, now, 3)
    return min(b - a for a, b in itertools.pairwise(fires)) if len(fires) > 1 else None


def _at(instant: datetime | None, tz: str) -> str:
    """An instant as the user reads it: local time in the job's zone."""
    if instant is None:
        return "none"
    return f"{instant.astimezone(get_zone(tz)):%a %Y-%m-%d %H:%M:%S} ({tz})"


def _line(job: Job) -> str:
    state = "enabled" if job.enabled else f"paused ({job.paused_reason})"
    if job.status is JobStatus.DONE:
        state = f"done (finished {_at(job.finished_at, job.spec.tz)})"
    nxt = _at(job.next_fire_at, job.spec.tz)
    last = job.last_status.value if job.last_status else "never ran"
    return f"- {job.name} (id {job.id}): {describe(job.spec)}; next {nxt}; last {last}; {state}"


_RECALLS_LISTED = 20  # the pending one and the latest that ended: enough for the model


def _recall_line(recall: Recall) -> str:
    """One recall with its state and times, as the model reads it."""
    tz = recall.spec.tz
    fired = (
        f"fired {recall.run_count}x, last {_at(recall.last_run_at, tz)}"
        if recall.run_count
        else "never fired"
    )
    if recall.state is RecallState.PENDING:
        when = f"next {_at(recall.next_fire_at, tz)}"
    elif recall.state is RecallState.FIRED:
        status = f" ({recall.last_status.value})" if recall.last_status else ""
        when = f"fired {_at(recall.last_run_at or recall.ended_at, tz)}{status}"
        fired = ""
    else:
        when = f"cancelled {_at(recall.ended_at, tz)}"
    parts = [describe(recall.spec), when, fired, f"created {_at(recall.created_at, tz)}"]
    detail = "; ".join(p for p in parts if p)
    return f"- {recall.state.value}: {recall.name} (id {recall.id}): {detail}"


async def _session_jobs(deps: ToolDeps, kind: JobKind = JobKind.AGENT_TURN) -> list[Job]:
    """This session's jobs of `kind`; automations also from the unified owner it binds to."""
    keys = [deps.session_key] if kind is JobKind.RECALL else [deps.owner, deps.session_key]
    found: list[Job] = []
    for key in dict.fromkeys(k for k in keys if k is not None):
        found.extend(j for j in await deps.jobs.list(session_key=key) if j.kind is kind)
    return found


async def _find(deps: ToolDeps, name: str | None, job_id: str | None) -> Job:
    jobs = await _session_jobs(deps)
    if job_id:
        found = [j for j in jobs if j.id == job_id]
    elif name:
        wanted = name.strip().lower()
        found = [j for j in jobs if j.name.lower() == wanted] or [
            j for j in jobs if wanted in j.name.lower()
        ]
    else:
        raise ToolError("give the automation's name or job_id")
    if not found:
        names = ", ".join(j.name for j in jobs) or "none"
        raise ToolError(f"no automation {name or job_id!r} in this session (automations: {names})")
    if len(found) > 1:
        raise ToolError(f"{name!r} matches {len(found)} automations; use job_id")
    return found[0]


async def cron(
    ctx: RunContext[ToolDeps],
    action: Literal["add", "list", "update", "pause", "resume", "remove"],
    name: str | None = None,
    when: str | None = None,
    message: str | None = None,
    timezone: str | None = None,
    job_id: str | None = None,
) -> str:
    """Manage this session's scheduled automations.

    Args:
        action: add, list, update, pause, resume or remove.
        name: a short name for the automation (add), or the one to act on.
        when: when it runs, in plain words or cron: "in 10 minutes", "tomorrow at 9",
            "every weekday at 9", "every 2h", "0 9 * * 1-5". Never compute dates yourself.
        message: what to do when it runs (a task for yourself).
        timezone: an IANA zone such as Europe/Berlin (defaults to the session's zone).
        job_id: the automation's id, instead of its name.
    """
    deps = ctx.deps
    try:
        if action == "list":
            jobs = await _session_jobs(deps)
            if not jobs:
                return "No automations in this session."
            return "Automations in this session:\n" + "\n".join(_line(j) for j in jobs)
        if action == "add":
            return await _add(deps, name, when, message, timezone)
        job = await _find(deps, name, job_id)
        if action == "pause":
            job = await deps.jobs.pause(job.id, reason="paused by the agent")
            return f"Paused “{job.name}”."
        if action == "resume":
            job = await deps.jobs.resume(job.id)
            return f"Resumed “{job.name}”: next run {_at(job.next_fire_at, job.spec.tz)}."
        if action == "remove":
            await deps.jobs.delete(job.id)
            return f"Removed “{job.name}”."
        changes: dict[str, Any] = {}
        if when:
            # The guard rails of `add` apply to a new schedule given by `update` too.
            if deps.in_scheduled_turn and not deps.limits.allow_add_from_scheduled_turn:
                raise ToolError("schedules cannot be changed from inside a scheduled turn")
            changes["spec"] = _checked_spec(deps, when, timezone or job.spec.tz)
        if message:
            changes["message"] = message
        if not changes:
            raise ToolError("update needs `when` or `message`")
        job = await deps.jobs.update(job.id, **changes)
        return (
            f"Updated “{job.name}”: {describe(job.spec)}; "
            f"next run {_at(job.next_fire_at, job.spec.tz)}."
        )
    except (ToolError, ScheduleError, StoreError) as exc:
        return f"Error: {exc}"


def _checked_spec(deps: ToolDeps, when: str, zone: str) -> AtSpec | CronSpec | EverySpec:
    """`when` read in `zone`, refused when it recurs more often than the limit allows."""
    spec = parse_when(when, deps.now, zone)
    gap = _interval(spec, deps.now)
    if gap is not None and gap < deps.limits.min_recurring_interval:
        raise ToolError(
            f"recurring automations may run at most every "
            f"{int(deps.limits.min_recurring_interval.total_seconds() // 60)} minutes"
        )
    return spec


async def _add(
    deps: ToolDeps, name: str | None, when: str | None, message: str | None, tz: str | None
) -> str:
    if deps.owner is None:
        raise ToolError("cannot add an automation here: this turn has no session to bind it to")
    if deps.in_scheduled_turn and not deps.limits.allow_add_from_scheduled_turn:
        raise ToolError("automations cannot be created from inside a scheduled turn")
    if not when or not message:
        raise ToolError("add needs `when` and `message`")
    zone = tz or deps.tz
    spec = _checked_spec(deps, when, zone)
    existing = [  # done ones (their schedule spent) do not count
        j
        for j in await deps.jobs.list(session_key=deps.owner)
        if j.kind is JobKind.AGENT_TURN and j.status is not JobStatus.DONE
    ]
    if len(existing) >= deps.limits.max_jobs_per_session:
        raise ToolError(
            f"this session already has {len(existing)} automations "
            f"(limit {deps.limits.max_jobs_per_session}); remove one first"
        )
    title = (name or message).strip()[:80]
    # The same request twice (e.g. a retried tool call) creates one job.
    key = hashlib.sha256(f"{title}\n{when}\n{message}\n{zone}".encode()).hexdigest()[:32]
    job = await deps.jobs.create(
        name=title,
        spec=spec,
        message=message,
        session_key=deps.owner,
        kind=JobKind.AGENT_TURN,
        created_by=CreatedBy.AGENT,
        idempotency_key=key,
        delete_after_run=isinstance(spec, AtSpec),
    )
    return (
        f"Scheduled “{job.name}” (id {job.id}): {describe(job.spec)}; "
        f"next run {_at(job.next_fire_at, job.spec.tz)}."
    )


_OFFSET = re.compile(r"^([+-])(\d{2}):?(\d{2})$")
_EXPLICIT_OFFSET = re.compile(r"(?:[+-]\d{2}:?\d{2}|Z)$", re.IGNORECASE)


def _recall_time(deps: ToolDeps, when: str, offset_text: str | None) -> datetime | None:
    """The single instant `when` names, or None when it repeats. An absolute phrase without a
    zone of its own ("tomorrow at 09:00", "2026-12-01 09:00") is read at `offset_text`
    (±HH:MM) when given, else in the session's zone; a relative one ("in 2 hours") is the same
    either way.
    """
    if not offset_text:
        spec = parse_when(when, deps.now, deps.tz)
        return spec.at if isinstance(spec, AtSpec) else None
    match = _OFFSET.match(offset_text.strip())
    if match is None:
        raise ToolError(f"timezone_offset must look like +02:00 or -05:30, not {offset_text!r}")
    sign, hours, minutes = match.groups()
    offset = timedelta(hours=int(hours), minutes=int(minutes)) * (1 if sign == "+" else -1)
    if abs(offset) > timedelta(hours=14):
        raise ToolError(f"timezone_offset {offset_text!r} is beyond ±14:00")
    text = when.strip()
    if _EXPLICIT_OFFSET.search(text):  # the phrase names its own offset: it wins
        spec = parse_when(text, deps.now, deps.tz)
        return spec.at if isinstance(spec, AtSpec) else None
    # The wall clock at that offset, read as if it were UTC, then moved back by the offset.
    spec = parse_when(text, deps.now + offset, "UTC")
    if not isinstance(spec, AtSpec):
        return None
    if spec.tz != "UTC":  # the phrase named a zone ("... Europe/Berlin"): it wins
        named = parse_when(text, deps.now, deps.tz)
        return named.at if isinstance(named, AtSpec) else None
    return spec.at - offset


async def schedule_recall(
    ctx: RunContext[ToolDeps],
    call_type: Literal["once", "recurring", "immediate"],
    additional_context_message: str,
    when: str | None = None,
    timezone_offset: str | None = None,
    interval_seconds: int | None = None,
    internal_comment: str | None = None,
) -> str:
    """Schedule a follow-up turn for yourself in this session (a recall). One per session.

    Args:
        call_type: once (at `when`), recurring (every `interval_seconds`, first at `when` or
            after one interval), or immediate (right after this turn).
        additional_context_message: your self-instruction, written as a todo naming the tools,
            files or URLs to use ("Read /tmp/build.log; if errors, report the last 50 lines").
        when: relative preferred: "30m", "in 2 hours", "tomorrow at 09:00"; ISO 8601 only
            with a known offset.
        timezone_offset: ±HH:MM, for an absolute `when` without an offset.
        interval_seconds: repeat interval for recurring recalls.
        internal_comment: a human-readable note shown with the recall.
    """
    deps = ctx.deps
    try:
        if deps.session_key is None:
            raise ToolError("cannot schedule a recall: this turn has no session")
        if not additional_context_message.strip():
            raise ToolError("additional_context_message must say what to do")
        spec: AtSpec | CronSpec | EverySpec
        if call_type == "immediate":
            spec = AtSpec(at=deps.now + timedelta(milliseconds=1), tz=deps.tz)
        elif call_type == "once":
            if not when:
                raise ToolError("a once recall needs `when`")
            at = _recall_time(deps, when, timezone_offset)
            if at is None:
                raise ToolError("a once recall needs a single time; use call_type=recurring")
            spec = AtSpec(at=at, tz=deps.tz)
        else:
            if not interval_seconds or interval_seconds < 60:
                raise ToolError("a recurring recall needs interval_seconds >= 60")
            # Its first fire is `when` (else one interval from now): the anchor of the grid.
            first = deps.now
            if when:
                at = _recall_time(deps, when, timezone_offset)
                if at is None:
                    raise ToolError("`when` of a recurring recall is its first time")
                first = at
            spec = EverySpec(seconds=interval_seconds, anchor=first, tz=deps.tz)
        job = await deps.jobs.create(
            name=(internal_comment or additional_context_message)[:80],
            spec=spec,
            message=additional_context_message,
            session_key=deps.session_key,
            kind=JobKind.RECALL,
            created_by=CreatedBy.AGENT,
            delete_after_run=call_type != "recurring",
        )
        return (
            f"Recall scheduled (id {job.id}): {describe(job.spec)}; "
            f"next {_at(job.next_fire_at, job.spec.tz)}."
        )
    except ConflictError:
        return (
            "Error: this session already has a pending recall. Use manage_recall(action='cancel') "
            "first, or keep the existing one."
        )
    except (ToolError, ScheduleError, StoreError) as exc:
        return f"Error: {exc}"


async def manage_recall(
    ctx: RunContext[ToolDeps], action: Literal["cancel", "skip", "list"]
) -> str:
    """Cancel this session's pending recall, skip its next occurrence, or list its recalls.

    Args:
        action: cancel, skip (recurring only; never into the past) or list (pending, fired
            and cancelled ones, with their times).
    """
    deps = ctx.deps
    if action == "list":
        if deps.session_key is None:
            return "No recalls: this turn has no session."
        listed = await deps.jobs.recalls(deps.session_key, limit=_RECALLS_LISTED)
        if not listed:
            return "No recalls in this session."
        return "Recalls in this session:\n" + "\n".join(_recall_line(r) for r in listed)
    recalls = await _session_jobs(deps, JobKind.RECALL)
    if not recalls:
        return "Error: there is no pending recall in this session."
    recall = recalls[0]
    try:
        if action == "cancel":
            await deps.jobs.delete(recall.id)
            return f"Cancelled the recall “{recall.name}”."
        if not isinstance(recall.spec, EverySpec):
            return "Error: only a recurring recall can skip; cancel a one-time recall instead."
        skipped = await deps.jobs.skip_next(recall.id)
        return f"Skipped one occurrence; next at {_at(skipped.next_fire_at, skipped.spec.tz)}."
    except (ScheduleError, StoreError) as exc:
        return f"Error: {exc}"


def scheduling_tools() -> list[Tool[ToolDeps]]:
    """The tools to register on the agent (with `ToolDeps` as the run's deps)."""
    return [
        Tool(cron, takes_ctx=True),
        Tool(schedule_recall, takes_ctx=True),
        Tool(manage_recall, takes_ctx=True),
    ]
