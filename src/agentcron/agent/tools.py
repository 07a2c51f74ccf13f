"""The scheduling tools the agent gets: `cron`, `schedule_recall` and `manage_recall`.

They bind every new job to the current session from the turn's context, never create unbound
jobs, read times through `parse_when` on the server, and return errors to the model as text.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic_ai import RunContext, Tool

from agentcron.agent.gate import call_log
from agentcron.agent.tool_deps import JobsAPI, ToolDeps, ToolLimits
from agentcron.domain.budgets import ContextMode
from agentcron.domain.cadence import parse_duration
from agentcron.domain.jobs import (
    AnySpec,
    CreatedBy,
    Job,
    JobKind,
    JobStatus,
    Recall,
    RecallCallType,
    RecallState,
)
from agentcron.domain.notify import Notify
from agentcron.domain.policy import Change, JobProposal, PolicyAction, PolicyRequest, Refuse
from agentcron.domain.quiet import QuietMode
from agentcron.errors import AgentcronError, InvalidInputError
from agentcron.schedule import (
    AtSpec,
    EverySpec,
    ScheduleError,
    carry_dst,
    describe,
    parse_when,
    with_dst,
)
from agentcron.schedule.zones import get_zone
from agentcron.session_keys import check_session_key
from agentcron.store.errors import ConflictError, SessionNotFoundError, StoreError

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


def _failed(ctx: RunContext[ToolDeps], exc: Exception) -> str:
    """The answer to a call that did not do what it was asked ("Error: ..."), the call
    recorded as failed (not `ok`) in the run's log: the transcript and the run show it so.
    """
    log = call_log.get()
    if log is not None and ctx.tool_call_id is not None:
        log.failed.add(ctx.tool_call_id)
    return f"Error: {exc}"


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
    quiet = "" if job.policy.quiet is QuietMode.HOLD else f"; in quiet hours: {job.policy.quiet}"
    return (
        f"- “{job.name}”: {describe(job.spec)}; next {nxt}; last {last}; {state}{quiet}; "
        f"id {job.id}"
    )


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
    elif recall.state is RecallState.PAUSED:
        when = f"paused {_at(recall.paused_at, tz)}: {recall.paused_reason or 'no reason given'}"
    elif recall.state is RecallState.FIRED:
        status = f" ({recall.last_status.value})" if recall.last_status else ""
        when = f"fired {_at(recall.last_run_at or recall.ended_at, tz)}{status}"
        fired = ""
    else:
        when = f"cancelled {_at(recall.ended_at, tz)}"
    asked = f"call type {recall.call_type.value}" if recall.call_type else ""
    note = f"comment: {recall.internal_comment}" if recall.internal_comment else ""
    parts = [describe(recall.spec), when, fired, f"created {_at(recall.created_at, tz)}", asked]
    detail = "; ".join(p for p in [*parts, note] if p)
    return f"- {recall.state.value}: {recall.name}: {detail}"


_PAUSED_HINT = (
    "A paused recall does not fire: resume it with manage_recall(action='resume'), cancel it, "
    "or schedule a new recall, which replaces it."
)


async def _session_jobs(deps: ToolDeps) -> list[Job]:
    """This session's automations, also those of the unified owner it binds to."""
    found: list[Job] = []
    for key in dict.fromkeys(k for k in [deps.owner, deps.session_key] if k is not None):
        found.extend(
            j for j in await deps.jobs.list(session_key=key) if j.kind is JobKind.AGENT_TURN
        )
    return found


_MIN_ID_PREFIX = 6  # a shortened id ("01M89G…") names a job when no other starts the same


def _by_id(jobs: list[Job], text: str) -> list[Job]:
    """The jobs `text` names by id: the whole id, or a unique start of it (any case, a
    trailing "…" or "..." dropped)."""
    wanted = text.strip().rstrip(".…").upper()
    exact = [j for j in jobs if j.id.upper() == wanted]
    if exact or len(wanted) < _MIN_ID_PREFIX:
        return exact
    return [j for j in jobs if j.id.upper().startswith(wanted)]


def _by_name(jobs: list[Job], text: str) -> list[Job]:
    wanted = text.strip().lower()
    return [j for j in jobs if j.name.lower() == wanted] or [
        j for j in jobs if wanted in j.name.lower()
    ]


async def _find(deps: ToolDeps, name: str | None, job_id: str | None) -> Job:
    """The one automation of this session `job_id` or `name` names. A name may also be an id
    (whole or its start); a name several automations match is answered with the choice.
    """
    jobs = await _session_jobs(deps)
    if job_id:
        found = _by_id(jobs, job_id)
    elif name:
        found = _by_id(jobs, name) or _by_name(jobs, name)
    else:
        raise ToolError("give the automation's name or job_id")
    if not found:
        names = ", ".join(f"“{j.name}”" for j in jobs) or "none"
        raise ToolError(f"no automation {name or job_id!r} in this session (automations: {names})")
    if len(found) > 1:
        choices = "\n".join(f"- “{j.name}”: {describe(j.spec)}, job_id {j.id}" for j in found)
        raise ToolError(
            f"{name or job_id!r} matches {len(found)} automations; say which one by its "
            f"job_id (or its exact name):\n{choices}"
        )
    return found[0]


async def cron(
    ctx: RunContext[ToolDeps],
    action: Literal["add", "list", "update", "pause", "resume", "remove", "reschedule"],
    name: str | None = None,
    when: str | None = None,
    message: str | None = None,
    timezone: str | None = None,
    job_id: str | None = None,
    notify: Literal["always", "changes", "never-empty"] | None = None,
    dst_gap: Literal["shift", "skip"] | None = None,
    dst_fold: Literal["first", "last", "both"] | None = None,
    quiet: Literal["hold", "silent", "wait"] | None = None,
    next_fire_at: str | None = None,
    delay: str | None = None,
    reason: str | None = None,
    context: Literal["continue", "summary", "fresh"] | None = None,
) -> str:
    """Manage this session's scheduled automations.

    Args:
        action: add, list, update, pause, resume, remove, or reschedule (move the next run
            of an automation, within the bounds a person set on it; without a name or
            job_id: the automation this scheduled run belongs to. After that run it goes on
            at its usual schedule).
        name: a short name for the automation (add), or the one to act on.
        when: when it runs, in plain words or cron: "in 10 minutes", "tomorrow at 9",
            "every weekday at 9", "every 2h", "every other tuesday at 10am",
            "first monday of every month at 9", "9am PST", "0 9 * * 1-5". Pass the
            person's words as they are; never compute dates yourself.
        message: what to do when it runs (a task for yourself).
        timezone: an IANA zone such as Europe/Berlin (defaults to the session's zone).
        job_id: the automation's id, instead of its name.
        notify: when its results reach the person (add): "always" (the default),
            "changes" (not a result equal to the last one sent), "never-empty" (not an
            empty one). In a scheduled run, start your reply with [SILENT] when there is
            nothing worth saying: it is recorded, not sent.
        dst_gap: (add, update) on a day daylight saving time skips its time of day: "shift"
            (the default: it runs at the first time after) or "skip" (not that day). Only
            for schedules at a time of day, not intervals or one-time runs.
        dst_fold: (add, update) on a day daylight saving time repeats its time of day:
            "first" (the default: the first time), "last" (the second) or "both".
        quiet: (add, update) what a run due in the session's quiet hours does, when the
            person asks: "hold" (the default: it runs, its result is sent when they end),
            "silent" (it runs, its result is never sent) or "wait" (it runs when they end).
        next_fire_at: reschedule: the new time of the next run ("2026-12-01T09:00+01:00",
            "tomorrow at 9").
        delay: reschedule: instead of next_fire_at, how long from now ("3h", "45m", "1h30m").
        reason: reschedule: why it moves (kept on the run and shown to the person).
        context: what history its runs get (add): "continue" (the conversation, the
            default), "summary" (only the latest summary), "fresh" (none: a heartbeat
            that needs no history should use this).
    """
    deps = ctx.deps
    try:
        if action == "reschedule":
            return await _reschedule(deps, name, job_id, next_fire_at, delay, reason)
        if action == "list":
            jobs = await _session_jobs(deps)
            if not jobs:
                return "No automations in this session."
            return "Automations in this session:\n" + "\n".join(_line(j) for j in jobs)
        if action == "add":
            asked = JobProposal(
                name=name, when=when, message=message, timezone=timezone, notify=notify
            )
            asked = await _asked(deps, PolicyAction.CREATE, asked)
            return await _add(
                deps,
                asked.name,
                asked.when,
                asked.message,
                asked.timezone,
                Notify(asked.notify or "always"),
                (dst_gap, dst_fold),
                ContextMode(context or "continue"),
                QuietMode(quiet or "hold"),
            )
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
        if when or message or dst_gap or dst_fold:
            asked = JobProposal(
                name=job.name, when=when, message=message, timezone=timezone, job_id=job.id
            )
            asked = await _asked(deps, PolicyAction.UPDATE, asked)
            when, message, timezone = asked.when, asked.message, asked.timezone
        # The guard rails of `add` apply to a new schedule given by `update` too.
        if (when or dst_gap or dst_fold) and (
            deps.in_scheduled_turn and not deps.limits.allow_add_from_scheduled_turn
        ):
            raise ToolError("schedules cannot be changed from inside a scheduled turn")
        if when:  # a new time of day keeps the automation's DST policy
            changes["spec"] = carry_dst(
                job.spec, _checked_spec(deps, when, timezone or job.spec.tz)
            )
        if dst_gap or dst_fold:
            changes["spec"] = with_dst(changes.get("spec", job.spec), dst_gap, dst_fold)
        if message:
            changes["message"] = message
        if quiet:  # the person's convenience, not a guard rail: any turn may change it
            changes["quiet"] = QuietMode(quiet)
        if not changes:
            raise ToolError("update needs `when`, `message`, `dst_gap`, `dst_fold` or `quiet`")
        job = await deps.jobs.update(job.id, **changes)
        return (
            f"Updated “{job.name}”: {describe(job.spec)}; "
            f"next run {_at(job.next_fire_at, job.spec.tz)}."
        )
    except (ToolError, ScheduleError, StoreError, InvalidInputError) as exc:
        return _failed(ctx, exc)


async def _asked(deps: ToolDeps, action: PolicyAction, proposal: JobProposal) -> JobProposal:
    """`proposal` as the policy hook lets it go ahead (as it is, or as it changed it; the
    normal rules check it after); ToolError with the hook's reason when it refuses.
    """
    if deps.policy is None:
        return proposal
    request = PolicyRequest(
        session_key=deps.session_key,
        turn_id=deps.turn_id,
        action=action,
        proposal=proposal,
        scheduled=deps.in_scheduled_turn,
    )
    decision = await deps.policy.decide(request)
    if isinstance(decision, Refuse):
        raise ToolError(f"refused by the job policy: {decision.reason}")
    if isinstance(decision, Change):
        changed = decision.proposal
        if changed.job_id != proposal.job_id:
            raise ToolError("refused by the job policy: it changed which job this is about")
        return changed
    return proposal


async def _reschedule(
    deps: ToolDeps,
    name: str | None,
    job_id: str | None,
    next_fire_at: str | None,
    delay: str | None,
    reason: str | None,
) -> str:
    """Move the next run of the named automation, or of this fire's own, within its bounds."""
    if name or job_id:
        job = await _find(deps, name, job_id)
    elif deps.job_id is not None:
        job = await deps.jobs.get(deps.job_id)
    else:
        raise ToolError("say which automation to reschedule (its name or job_id)")
    if (next_fire_at is None) == (delay is None):
        raise ToolError("reschedule needs one of `next_fire_at` or `delay`")
    if not reason or not reason.strip():
        raise ToolError("reschedule needs a `reason`: the person sees why the run moved")
    if delay is not None:
        at = deps.now + parse_duration(delay, "delay")
    else:
        spec = parse_when(next_fire_at or "", deps.now, job.spec.tz)
        if not isinstance(spec, AtSpec):
            raise ToolError("next_fire_at must be one time, not a repeating schedule")
        at = spec.at
    asked = JobProposal(name=job.name, job_id=job.id, next_fire_at=at, reason=reason)
    asked = await _asked(deps, PolicyAction.RESCHEDULE, asked)
    if asked.next_fire_at is None:
        raise ToolError("refused by the job policy: it left no time for the next run")
    before = job.next_fire_at
    moved = await deps.jobs.reschedule(
        job.id, asked.next_fire_at, reason=asked.reason or reason, run_id=deps.run_id
    )
    tz = moved.spec.tz
    return (
        f"Moved the next run of “{moved.name}” from {_at(before, tz)} to "
        f"{_at(moved.next_fire_at, tz)}; after it, it runs on its usual schedule "
        f"({describe(moved.spec)})."
    )


def _checked_spec(deps: ToolDeps, when: str, zone: str) -> AnySpec:
    """`when` read in `zone`, refused when it recurs more often than the setting
    `[engine] min_interval` allows (the rule of every surface: the jobs service's).
    """
    spec = parse_when(when, deps.now, zone)
    deps.jobs.check_interval(spec)
    return spec


async def _add(
    deps: ToolDeps,
    name: str | None,
    when: str | None,
    message: str | None,
    tz: str | None,
    notify: Notify = Notify.ALWAYS,
    dst: tuple[str | None, str | None] = (None, None),
    context: ContextMode = ContextMode.CONTINUE,
    quiet: QuietMode = QuietMode.HOLD,
) -> str:
    if deps.owner is None:
        raise ToolError("cannot add an automation here: this turn has no session to bind it to")
    if deps.in_scheduled_turn and not deps.limits.allow_add_from_scheduled_turn:
        raise ToolError("automations cannot be created from inside a scheduled turn")
    if not when or not message:
        raise ToolError("add needs `when` and `message`")
    zone = tz or deps.tz
    spec = with_dst(_checked_spec(deps, when, zone), *dst)
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
    asked = f"{title}\n{when}\n{message}\n{zone}" + (f"\n{dst}" if any(dst) else "")
    asked += f"\n{quiet}" if quiet is not QuietMode.HOLD else ""
    key = hashlib.sha256(asked.encode()).hexdigest()[:32]
    job = await deps.jobs.create(
        name=title,
        spec=spec,
        message=message,
        session_key=deps.owner,
        kind=JobKind.AGENT_TURN,
        created_by=CreatedBy.AGENT,
        idempotency_key=key,
        delete_after_run=isinstance(spec, AtSpec),
        notify=notify,
        quiet=quiet,
        context=context,
    )
    return (
        f"Scheduled “{job.name}”: {describe(job.spec)}; "
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
    """Schedule a follow-up turn for yourself in this session (a recall). One per session;
    a new one replaces a paused one.

    Args:
        call_type: once (at `when`), recurring (every `interval_seconds`, first at `when` or
            after one interval), or immediate (right after this turn).
        additional_context_message: your self-instruction, written as a todo naming the tools,
            files or URLs to use ("Read /tmp/build.log; if errors, report the last 50 lines").
        when: relative preferred: "30m", "in 2 hours", "tomorrow at 09:00"; ISO 8601 only
            with a known offset.
        timezone_offset: ±HH:MM, for an absolute `when` without an offset.
        interval_seconds: repeat interval for recurring recalls.
        internal_comment: a human-readable note kept (whole) and shown with the recall.
    """
    deps = ctx.deps
    try:
        if deps.session_key is None:
            raise ToolError("cannot schedule a recall: this turn has no session")
        if not additional_context_message.strip():
            raise ToolError("additional_context_message must say what to do")
        kind = RecallCallType(call_type)
        spec = _recall_spec(deps, kind, when, timezone_offset, interval_seconds)
        job, replaced = await _create_recall(
            deps, deps.session_key, spec, kind, additional_context_message, internal_comment
        )
        said = f"Recall scheduled: {describe(job.spec)}; next {_at(job.next_fire_at, job.spec.tz)}."
        if replaced is not None:
            said += f" It replaces the paused recall “{replaced.name}” (now cancelled)."
        return said
    except ConflictError:
        return _failed(
            ctx,
            ToolError(
                "this session already has a pending recall. Use manage_recall(action='cancel') "
                "first, or keep the existing one."
            ),
        )
    except (ToolError, ScheduleError, StoreError, InvalidInputError) as exc:
        return _failed(ctx, exc)


def _recall_spec(
    deps: ToolDeps,
    kind: RecallCallType,
    when: str | None,
    offset: str | None,
    interval_seconds: int | None,
) -> AtSpec | EverySpec:
    """The schedule of a recall of call type `kind` (ToolError / ScheduleError when none)."""
    if kind is RecallCallType.IMMEDIATE:
        return AtSpec(at=deps.now + timedelta(milliseconds=1), tz=deps.tz)
    if kind is RecallCallType.ONCE:
        if not when:
            raise ToolError("a once recall needs `when`")
        at = _recall_time(deps, when, offset)
        if at is None:
            raise ToolError("a once recall needs a single time; use call_type=recurring")
        return AtSpec(at=at, tz=deps.tz)
    if not interval_seconds or interval_seconds < 60:
        raise ToolError("a recurring recall needs interval_seconds >= 60")
    # Its first fire is `when` (else one interval from now): the anchor of the grid.
    first = deps.now
    if when:
        at = _recall_time(deps, when, offset)
        if at is None:
            raise ToolError("`when` of a recurring recall is its first time")
        first = at
    return EverySpec(seconds=interval_seconds, anchor=first, tz=deps.tz)


async def _create_recall(
    deps: ToolDeps,
    key: str,
    spec: AtSpec | EverySpec,
    kind: RecallCallType,
    message: str,
    comment: str | None,
) -> tuple[Job, Job | None]:
    """The new recall, and the paused one it replaced, if any. A paused recall (e.g. after
    failures) does not block a new one: it is cancelled (kept readable) once the new one was
    checked and only the one-per-session rule stands in the way.
    """

    async def create() -> Job:
        return await deps.jobs.create(
            name=(comment or message)[:80],
            spec=spec,
            message=message,
            session_key=key,
            kind=JobKind.RECALL,
            created_by=CreatedBy.AGENT,
            delete_after_run=kind is not RecallCallType.RECURRING,
            call_type=kind,
            internal_comment=comment,
        )

    try:
        return await create(), None
    except ConflictError:
        paused = [j for j in await _recalls_of(deps, key) if not j.enabled]
        if not paused:
            raise
    await deps.jobs.delete(paused[0].id)
    return await create(), paused[0]


async def _recalls_of(deps: ToolDeps, key: str) -> list[Job]:
    """The recall job of session `key` (at most one: pending or paused)."""
    return [j for j in await deps.jobs.list(session_key=key) if j.kind is JobKind.RECALL]


async def _recall_session(deps: ToolDeps, session_id: str | None) -> str:
    """The session whose recalls `manage_recall` acts on: this one, or `session_id` when it
    shares this session's memory (unified mode: the same person's web chats) and exists.
    """
    if deps.session_key is None:
        raise ToolError("this turn has no session")
    if session_id is None or session_id.strip() == deps.session_key:
        return deps.session_key
    key = check_session_key(session_id.strip())
    scope = deps.recall_scope
    if scope is None or not scope.includes(deps.session_key) or not scope.includes(key):
        raise ToolError(
            f"session {key!r} is not one you may manage: only this session's recalls "
            f"({deps.session_key!r}) and those of sessions sharing its memory"
        )
    if deps.sessions is None:
        raise ToolError("other sessions cannot be reached from this turn")
    try:
        await deps.sessions.get(key)
    except SessionNotFoundError:
        raise ToolError(f"there is no session {key!r}") from None
    return key


async def manage_recall(
    ctx: RunContext[ToolDeps],
    action: Literal["cancel", "skip", "list", "resume"],
    session_id: str | None = None,
) -> str:
    """Cancel a session's recall, skip its next occurrence, resume it when paused, or list
    its recalls.

    Args:
        action: cancel, skip (recurring only; never into the past), resume (a paused recall,
            e.g. one auto-paused after failures) or list (pending, paused, fired and
            cancelled ones, with their times and why one is paused).
        session_id: the session to act on (defaults to this one); only sessions sharing
            this one's memory.
    """
    deps = ctx.deps
    try:
        key = await _recall_session(deps, session_id)
        where = "this session" if key == deps.session_key else f"session {key!r}"
        if action == "list":
            listed = await deps.jobs.recalls(key, limit=_RECALLS_LISTED)
            if not listed:
                return f"No recalls in {where}."
            lines = [f"Recalls in {where}:", *(_recall_line(r) for r in listed)]
            if any(r.state is RecallState.PAUSED for r in listed):
                lines.append(_PAUSED_HINT)
            return "\n".join(lines)
        recalls = await _recalls_of(deps, key)
        if not recalls:
            raise ToolError(f"there is no pending recall in {where}.")
        recall = recalls[0]
        if action == "cancel":
            await deps.jobs.delete(recall.id)
            return f"Cancelled the recall “{recall.name}”."
        if action == "resume":
            return await _resume_recall(deps, recall)
        if not recall.enabled:
            raise ToolError(
                "the recall is paused; resume it first (manage_recall(action='resume'))."
            )
        if not isinstance(recall.spec, EverySpec):
            raise ToolError("only a recurring recall can skip; cancel a one-time recall instead.")
        skipped = await deps.jobs.skip_next(recall.id)
        return f"Skipped one occurrence; next at {_at(skipped.next_fire_at, skipped.spec.tz)}."
    except (ToolError, ScheduleError, StoreError, InvalidInputError) as exc:
        return _failed(ctx, exc)


async def _resume_recall(deps: ToolDeps, recall: Job) -> str:
    """Resume a paused recall from now on (its failure count starts again)."""
    if recall.enabled:
        raise ToolError(f"the recall “{recall.name}” is not paused.")
    if isinstance(recall.spec, AtSpec) and recall.spec.at <= deps.now:
        raise ToolError(
            f"the recall “{recall.name}” was for {_at(recall.spec.at, recall.spec.tz)}, "
            "which has passed; schedule a new recall instead (it replaces this one)."
        )
    resumed = await deps.jobs.resume(recall.id)
    return (
        f"Resumed the recall “{resumed.name}”: next {_at(resumed.next_fire_at, resumed.spec.tz)}."
    )


def scheduling_tools() -> list[Tool[ToolDeps]]:
    """The tools to register on the agent (with `ToolDeps` as the run's deps)."""
    return [
        Tool(cron, takes_ctx=True),
        Tool(schedule_recall, takes_ctx=True),
        Tool(manage_recall, takes_ctx=True),
    ]
