"""Where rows become models and models rows: the job, run, session, message, approval and turn
mappers, value builders and the statements and state lists the store modules share."""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Row, RowMapping

from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.budgets import Budget, ContextMode, Spend
from agentcron.domain.cadence import CadenceBounds, HourWindow, Reschedule
from agentcron.domain.gates import Gate
from agentcron.domain.grants import Grant
from agentcron.domain.jobs import (
    AnySpec,
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    Overlap,
    RecallCallType,
)
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.domain.runs import FirePlan, Run
from agentcron.domain.sessions import Message, Role, Session, Turn, TurnSource
from agentcron.domain.states import ACTIVE_STATES, TERMINAL_STATES, RunState, TurnState
from agentcron.schedule import spec_from_data, spec_to_data
from agentcron.store.ids import new_id
from agentcron.store.schema import jobs, runs, sessions, turns
from agentcron.store.writes import ArmedJob

ACTIVE = [s.value for s in ACTIVE_STATES]
WAITING = [RunState.CLAIMED.value, RunState.QUEUED.value, RunState.DEFERRED.value]
TERMINAL = [s.value for s in TERMINAL_STATES]
# executemany() cannot expand IN lists, so batched statements use inline literals.
_ACTIVE_INLINE = runs.c.state.in_([sa.literal_column(f"'{s}'") for s in sorted(ACTIVE)])
_STATE_TIME = {
    RunState.CLAIMED: "claimed_at",
    RunState.QUEUED: "queued_at",
    RunState.DEFERRED: "deferred_at",
    RunState.RUNNING: "started_at",
}
# SQLite caps bound parameters per statement; chunk IN (...) lists well below it.
_IN_CHUNK = 500

# The job columns a finisher may change, written back in one executemany.
FINISH_COLUMNS = (
    "enabled",
    "paused_reason",
    "paused_at",
    "next_fire_at",
    "next_run_at",
    "last_run_at",
    "last_status",
    "consecutive_failures",
    "lease_owner",
    "lease_expires_at",
    "finished_at",
    "spend",
)

_RUN_FIELDS = (
    "output",
    "error",
    "error_details",
    "message_id",
    "usage",
    "prompt_ref",
    "prompt",
    "prompt_vars",
    "delivery",
    "tool_calls",
)
USAGE_COLUMNS = ("input_tokens", "output_tokens", "cost_usd")


def usage_numbers(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The numeric usage columns from a runner's usage dict."""
    usage = usage or {}
    return {col: usage.get(col) for col in USAGE_COLUMNS}


@functools.cache
def _transition_stmt(columns: tuple[str, ...]) -> Any:
    """The run update that sets `columns` (from bind parameters of the same names), only on a
    run that is still active: a terminal state is final.
    """
    values = {c: sa.bindparam(c, type_=runs.c[c].type) for c in columns if c != "b_id"}
    return runs.update().where(runs.c.id == sa.bindparam("b_id"), _ACTIVE_INLINE).values(values)


# Statements on the hot path are built once (building costs more than running them).
# A due job with its session's budget, figures and the day a skip for it was last told (a
# primary-key lookup in the same statement: a session without a budget reads three nulls).
_DUE = (
    sa.select(
        jobs,
        sessions.c.budget.label("session_budget"),
        sessions.c.spend.label("session_spend"),
        sessions.c.budget_noticed.label("session_budget_noticed"),
    )
    .select_from(jobs.outerjoin(sessions, sessions.c.session_key == jobs.c.session_key))
    .where(jobs.c.next_run_at <= sa.bindparam("now", type_=jobs.c.next_run_at.type))
    # Jobs due at one instant in the order they were made (ids grow with time): the due
    # index holds both, so a herd due at one instant is read in pages, not sorted whole.
    .order_by(jobs.c.next_run_at, jobs.c.id)
    .limit(sa.bindparam("limit", type_=sa.Integer))
)
_DUE_LOCKED = _DUE.with_for_update(skip_locked=True, of=jobs)
_NEXT_DUE = sa.select(sa.func.min(jobs.c.next_run_at))
_CLAIM_COLUMNS = (
    "next_fire_at",
    "next_run_at",
    "remaining_runs",
    "run_count",
    "last_status",
    "lease_owner",
    "lease_expires_at",
    "version",
    "updated_at",
)
_CLAIM_UPDATE = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"), jobs.c.version == sa.bindparam("b_version"))
    .values({c: sa.bindparam(c, type_=jobs.c[c].type) for c in _CLAIM_COLUMNS})
)
_INSERT_TURNS = turns.insert()
_STAMPED_AT = sa.bindparam("last_run_at", type_=jobs.c.last_run_at.type)
# A job left with no fire (its claim took the last) ends: done, as `finish_job` makes it for
# a success (SET reads the row as it was before the update, on both backends).
_ENDS = jobs.c.next_fire_at.is_(None)
_STAMP_STMT = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"))
    .values(
        last_run_at=_STAMPED_AT,
        last_status=sa.bindparam("last_status"),
        consecutive_failures=0,
        lease_owner=None,
        lease_expires_at=None,
        enabled=sa.case((_ENDS, sa.false()), else_=jobs.c.enabled),
        next_run_at=sa.case((_ENDS, sa.null()), else_=jobs.c.next_run_at),
        finished_at=sa.case(
            (sa.and_(_ENDS, jobs.c.enabled.is_(sa.true())), _STAMPED_AT),
            else_=jobs.c.finished_at,
        ),
        version=jobs.c.version + 1,
    )
)

# The planner and finisher types are the interface's (store/interface.py).


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).expanduser()}"


def _chunks(items: Sequence[Any], size: int = _IN_CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _job_values(armed: ArmedJob, now: datetime) -> dict[str, Any]:
    new, policy = armed.new, armed.new.policy
    return {
        "id": armed.id,
        "name": new.name,
        "kind": new.kind.value,
        "session_key": new.session_key,
        "spec": spec_to_data(new.spec),
        "message": new.message,
        "enabled": new.enabled,
        "paused_reason": None if new.enabled else "created paused",
        "paused_at": None if new.enabled else now,
        "created_by": new.created_by.value,
        **_policy_values(policy),
        "next_fire_at": armed.next_fire_at if new.enabled else None,
        "next_run_at": armed.next_run_at if new.enabled else None,
        "last_run_at": None,
        "last_status": None,
        "consecutive_failures": 0,
        "run_count": 0,
        "remaining_runs": policy.max_runs,
        "idempotency_key": new.idempotency_key,
        "lease_owner": None,
        "lease_expires_at": None,
        "version": 1,
        "created_at": now,
        "updated_at": now,
        "deliver": new.deliver,
        "channel": new.channel,
        "to": new.to,
        "channel_meta": new.channel_meta,
        "model": new.model,
        "runner_url": new.runner_url,
        "context": new.context.value,
        "history_tokens": new.history_tokens,
        "tools": None if new.tools is None else list(new.tools),
        "spend": None,
        "call_type": None if new.call_type is None else new.call_type.value,
        "internal_comment": new.internal_comment,
        "finished_at": None,
        "rescheduled": None,
    }


def _policy_values(policy: JobPolicy) -> dict[str, Any]:
    return {
        "overlap": policy.overlap.value,
        "catchup": policy.catchup.value,
        "catchup_window_s": int(policy.catchup_window.total_seconds()),
        "max_failures": policy.max_failures,
        "max_runs": policy.max_runs,
        "end_at": policy.end_at,
        "delete_after_run": policy.delete_after_run,
        "jitter": policy.jitter,
        "notify": policy.notify.value,
        "quiet": policy.quiet.value,
        **cadence_values(policy.cadence),
        "gate": None if policy.gate is None else policy.gate.as_dict(),
        "budget": None if policy.budget is None else policy.budget.as_dict(),
    }


def cadence_values(bounds: CadenceBounds | None) -> dict[str, Any]:
    """A job's cadence bounds as its columns (all None: none)."""
    if bounds is None:
        return {"cadence_min_s": None, "cadence_max_s": None, "allowed_hours": None}
    return {
        "cadence_min_s": None if bounds.min is None else int(bounds.min.total_seconds()),
        "cadence_max_s": None if bounds.max is None else int(bounds.max.total_seconds()),
        "allowed_hours": None if bounds.hours is None else str(bounds.hours),
    }


def _cadence(m: RowMapping | Mapping[str, Any]) -> CadenceBounds | None:
    low, high, hours = m.get("cadence_min_s"), m.get("cadence_max_s"), m.get("allowed_hours")
    if low is None and high is None and hours is None:
        return None
    return CadenceBounds(
        min=None if low is None else timedelta(seconds=low),
        max=None if high is None else timedelta(seconds=high),
        hours=None if hours is None else HourWindow.parse(hours),
    )


@functools.lru_cache(maxsize=4096)
def _cached_spec(items: tuple[tuple[str, Any], ...]) -> AnySpec:
    # Specs are frozen models: one instance serves every job with the same schedule (a burst
    # of claims validates each distinct spec once, not once per row).
    return spec_from_data(dict(items))


def _spec(data: Any) -> AnySpec:
    if isinstance(data, dict):
        try:
            return _cached_spec(tuple(sorted(data.items())))
        except TypeError:  # an unhashable value: validate it as it is
            pass
    return spec_from_data(data)


E = TypeVar("E", bound=enum.Enum)


def _by_value(kind: type[E]) -> dict[Any, E]:
    """An enum's members by their stored value: a row's enum is a dict lookup (no call),
    where `Kind(value)` is two Python calls per column per row on the claim's path.
    """
    return {member.value: member for member in kind}


_KINDS = _by_value(JobKind)
_CREATED_BY = _by_value(CreatedBy)
_OVERLAPS = _by_value(Overlap)
_CATCHUPS = _by_value(Catchup)
_NOTIFY = _by_value(Notify)
_QUIET = _by_value(QuietMode)
_CONTEXTS = _by_value(ContextMode)
_RUN_STATES = _by_value(RunState)
_ROLES = _by_value(Role)


def _job(row: Row[Any] | Mapping[str, Any], keys: Sequence[str] | None = None) -> Job:
    """A job from its row; `keys`: the row's column names, read once for a whole result (a
    row's own `_fields` is built again at every call).
    """
    # A plain dict: its lookups (and `.get` for the columns later migrations added, which
    # insert values leave out) are single C calls, not RowMapping's Python `get`.
    m: Mapping[str, Any] = (
        dict(zip(row._fields if keys is None else keys, row, strict=True))
        if isinstance(row, Row)
        else row
    )
    return _job_of(
        m,
        kind=_KINDS[m["kind"]],
        spec=_spec(m["spec"]),
        created_by=_CREATED_BY[m["created_by"]],
        policy=JobPolicy(
            overlap=_OVERLAPS[m["overlap"]],
            catchup=_CATCHUPS[m["catchup"]],
            catchup_window=timedelta(seconds=m["catchup_window_s"]),
            max_failures=m["max_failures"],
            max_runs=m["max_runs"],
            end_at=m["end_at"],
            delete_after_run=bool(m["delete_after_run"]),
            jitter=bool(m["jitter"]),
            notify=_NOTIFY[m["notify"]],
            quiet=_QUIET[m["quiet"]],
            cadence=_cadence(m),
            gate=None if m["gate"] is None else Gate.of(m["gate"]),
            budget=None if not m["budget"] else Budget.of(m["budget"]),
        ),
        last_status=_RUN_STATES[m["last_status"]] if m["last_status"] else None,
    )


def _stored_job(armed: ArmedJob, values: Mapping[str, Any]) -> Job:
    """The job just inserted from `armed` (its typed parts as given, nothing parsed again)."""
    new = armed.new
    return _job_of(
        values,
        kind=new.kind,
        spec=new.spec,
        created_by=new.created_by,
        policy=new.policy,
        last_status=None,
    )


def _job_of(
    m: RowMapping | Mapping[str, Any],
    *,
    kind: JobKind,
    spec: AnySpec,
    created_by: CreatedBy,
    policy: JobPolicy,
    last_status: RunState | None,
) -> Job:
    """The one place a job's fields are written out: the columns of `m`, the typed parts given."""
    return Job(
        id=m["id"],
        name=m["name"],
        kind=kind,
        session_key=m["session_key"],
        spec=spec,
        message=m["message"],
        enabled=bool(m["enabled"]),
        paused_reason=m["paused_reason"],
        paused_at=m["paused_at"],
        created_by=created_by,
        policy=policy,
        next_fire_at=m["next_fire_at"],
        next_run_at=m["next_run_at"],
        last_run_at=m["last_run_at"],
        last_status=last_status,
        consecutive_failures=m["consecutive_failures"],
        run_count=m["run_count"],
        remaining_runs=m["remaining_runs"],
        idempotency_key=m["idempotency_key"],
        lease_owner=m["lease_owner"],
        lease_expires_at=m["lease_expires_at"],
        version=m["version"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        deliver=m["deliver"],
        channel=m["channel"],
        to=m["to"],
        channel_meta=m["channel_meta"],
        model=m["model"],
        runner_url=m.get("runner_url"),
        call_type=recall_call_type(m["call_type"]),
        internal_comment=m["internal_comment"],
        finished_at=m["finished_at"],
        overdue_since=m.get("overdue_since"),
        failing_since=m.get("failing_since"),
        ending_warned_at=m.get("ending_warned_at"),
        rescheduled=None if not m.get("rescheduled") else Reschedule.of_data(m["rescheduled"]),
        trigger_secret=m.get("trigger_secret"),
        context=_CONTEXTS.get(m.get("context"), ContextMode.CONTINUE),
        history_tokens=m.get("history_tokens"),
        tools=None if (tools := m.get("tools")) is None else tuple(tools),
        spend=None if not (spend := m.get("spend")) else Spend.of(spend),
        session_budget=None if not (sb := m.get("session_budget")) else Budget.of(sb),
        session_spend=None if not (ss := m.get("session_spend")) else Spend.of(ss),
    )


def recall_call_type(stored: str | None) -> RecallCallType | None:
    """A stored `call_type` (None for jobs that are no agent's recall)."""
    return None if stored is None else RecallCallType(stored)


def _run(row: Row[Any] | Mapping[str, Any]) -> Run:
    m = row._mapping if isinstance(row, Row) else row
    return Run(
        id=m["id"],
        job_id=m["job_id"],
        session_key=m["session_key"],
        fire_at=m["fire_at"],
        job_name=m.get("job_name"),
        state=_RUN_STATES[m["state"]],
        owner=m["owner"],
        lease_expires_at=m["lease_expires_at"],
        claimed_at=m["claimed_at"],
        queued_at=m["queued_at"],
        deferred_at=m["deferred_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        prompt_ref=m["prompt_ref"],
        prompt=m["prompt"],
        prompt_vars=m["prompt_vars"],
        output=m["output"],
        error=m["error"],
        error_details=m["error_details"],
        message_id=m["message_id"],
        usage=m["usage"],
        delivery=m["delivery"],
        tool_calls=m["tool_calls"],
        manual=bool(m["manual"]),
        reschedules=m.get("reschedules"),
        event_id=m.get("event_id"),
        event=m.get("event"),
    )


def _session(row: Row[Any] | Mapping[str, Any]) -> Session:
    m = row._mapping if isinstance(row, Row) else row
    return Session(
        key=m["session_key"],
        channel=m["channel"],
        chat_id=m["chat_id"],
        channel_meta=m["channel_meta"],
        title=m["title"],
        tz=m["tz"],
        turn_owner=m["turn_owner"],
        turn_id=m["turn_id"],
        turn_lease_expires_at=m["turn_lease_expires_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        runner_url=m.get("runner_url"),
        quiet_hours=m.get("quiet_hours"),
        budget=None if not (budget := m.get("budget")) else Budget.of(budget),
        spend=None if not (spend := m.get("spend")) else Spend.of(spend),
    )


def _message(row: Row[Any] | Mapping[str, Any]) -> Message:
    m = row._mapping if isinstance(row, Row) else row
    return Message(
        id=m["id"],
        session_key=m["session_key"],
        seq=m["seq"],
        role=_ROLES[m["role"]],
        content=m["content"],
        meta=m["meta"] or {},
        created_at=m["created_at"],
    )


def _approval(row: Row[Any] | Mapping[str, Any]) -> Approval:
    m = row._mapping if isinstance(row, Row) else row
    return Approval(
        id=m["id"],
        session_key=m["session_key"],
        turn_id=m["turn_id"],
        tool=m["tool"],
        args=m["args"] or {},
        requested_at=m["requested_at"],
        expires_at=m["expires_at"],
        state=ApprovalState(m["state"]),
        decision=m["decision"],
        decided_by=m["decided_by"],
        decided_at=m["decided_at"],
        job_id=m["job_id"],
        grant_id=m["grant_id"],
        reminded_at=m["reminded_at"],
    )


def _grant(row: Row[Any] | Mapping[str, Any]) -> Grant:
    m = row._mapping if isinstance(row, Row) else row
    return Grant(
        id=m["id"],
        job_id=m["job_id"],
        tool=m["tool"],
        args=m["args"] or {},
        expires_at=m["expires_at"],
        granted_by=m["granted_by"],
        created_at=m["created_at"],
    )


def _grant_values(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id,
        "job_id": grant.job_id,
        "tool": grant.tool,
        "args": grant.args,
        "expires_at": grant.expires_at,
        "granted_by": grant.granted_by,
        "created_at": grant.created_at,
    }


def _approval_values(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "session_key": approval.session_key,
        "turn_id": approval.turn_id,
        "tool": approval.tool,
        "args": approval.args,
        "requested_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "state": approval.state.value,
        "decision": approval.decision,
        "decided_by": approval.decided_by,
        "decided_at": approval.decided_at,
        "job_id": approval.job_id,
        "grant_id": approval.grant_id,
        "reminded_at": approval.reminded_at,
    }


def _turn(row: Row[Any] | Mapping[str, Any]) -> Turn:
    m = row._mapping if isinstance(row, Row) else row
    return Turn(
        id=m["id"],
        session_key=m["session_key"],
        source=TurnSource(m["source"]),
        state=TurnState(m["state"]),
        run_id=m["run_id"],
        content=m["content"],
        created_at=m["created_at"],
        started_at=m.get("started_at"),
        finished_at=m.get("finished_at"),
        error=m.get("error"),
        error_details=m.get("error_details"),
        usage=m.get("usage"),
        reply_message_id=m.get("reply_message_id"),
        owner=m.get("owner"),
    )


def _run_values(
    job: Job,
    fire_at: datetime,
    state: RunState,
    now: datetime,
    owner: str | None,
    lease: datetime | None,
) -> dict[str, Any]:
    """A new run row: only the columns that have a value (the rest default to NULL)."""
    row: dict[str, Any] = {
        "id": new_id(),
        "job_id": job.id,
        "job_name": job.name,  # kept with the run when the job is deleted
        "session_key": job.session_key,
        "fire_at": fire_at,
        "state": state.value,
        "claimed_at": now,
    }
    if state in TERMINAL_STATES:
        row["finished_at"] = now
    else:
        row.update(owner=owner, lease_expires_at=lease)
    return row


def job_after_claim(
    job: Job, plan: FirePlan, now: datetime, owner: str, lease_until: datetime
) -> Job:
    """The job as advanced by a claim: next fire, remaining runs, lease, version."""
    ran = len(plan.run)
    status = job.last_status
    if not ran and (plan.missed or plan.skipped or plan.over_budget):
        status = RunState.SKIPPED if plan.skipped or plan.over_budget else RunState.MISSED
    return job_with(
        job,
        {
            "next_fire_at": plan.next_fire_at,
            "next_run_at": plan.next_run_at,
            "remaining_runs": None if job.remaining_runs is None else job.remaining_runs - ran,
            "run_count": job.run_count + ran,
            "last_status": status,
            "lease_owner": owner if ran else job.lease_owner,
            "lease_expires_at": lease_until if ran else job.lease_expires_at,
            "version": job.version + 1,
            "updated_at": now,
        },
    )


# A job's fields in order, read in one call (a claim copies every claimed job once).
_JOB_FIELDS = tuple(Job.__dataclass_fields__)
_job_fields = operator.attrgetter(*_JOB_FIELDS)


def job_with(job: Job, values: Mapping[str, Any]) -> Job:
    """A copy of `job` with some fields replaced."""
    fields = dict(zip(_JOB_FIELDS, _job_fields(job), strict=True))
    fields.update(values)
    return Job(**fields)
