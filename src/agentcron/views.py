"""The API's answers as pydantic models: the JSON the HTTP API, the WebSocket events and the
CLI's --json output give (one shape whichever edge answers), and the OpenAPI document's schemas.

The services answer with domain records and read models; each model here is built from one
(`View.of` and the `of_*` constructors) and serialized by pydantic: instants as ISO 8601 ("...Z"
in UTC), enums as their values, fields in the order declared. The routes declare these models as
their response models, so the OpenAPI document describes exactly what is sent. The module sits
beside the services rather than in `server/` because the CLI's database mode prints the same JSON
without importing the server.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, NotRequired, Self

from pydantic import MISSING, BaseModel, Field, TypeAdapter
from typing_extensions import TypedDict

from agentcron.domain.alerts import AlertKind
from agentcron.domain.approvals import Approval, ApprovalState, Decision
from agentcron.domain.budgets import ContextMode
from agentcron.domain.cadence import CadenceBounds, Reschedule, duration_text
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.grants import Grant
from agentcron.domain.jobs import (
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobStatus,
    Overlap,
    Recall,
    RecallCallType,
    RecallState,
)
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.domain.runs import Run, RunTrigger
from agentcron.domain.sessions import Message, Role, Turn, TurnSource
from agentcron.domain.states import RunState, TurnState
from agentcron.domain.triggers import EventAccepted, TriggerKey
from agentcron.schedule import Spec, describe
from agentcron.service.jobs import JobDetail, JobSpend, JobState
from agentcron.service.paging import Page
from agentcron.service.runs import Usage
from agentcron.service.sessions import (
    Deletion,
    SessionDetail,
    SessionRow,
    SessionSpend,
    TurnDetail,
)

Dict = dict[str, Any]
_INSTANT: TypeAdapter[datetime] = TypeAdapter(datetime)
_ABSENT = object()


def iso(value: datetime | None) -> str | None:
    """An instant as the views write it ("...Z" in UTC)."""
    return None if value is None else _INSTANT.dump_python(value, mode="json")


class View(BaseModel):
    """An answer of the API, built from a record the services returned (never parsed from a
    client). A field that is `MISSING` (an answer that has it only sometimes) is left out.
    """

    @classmethod
    def of(cls, record: object, **shown: Any) -> Self:
        """The view of `record`: its attributes named like the fields, then `shown` (the fields
        it has no attribute for, or shows differently). A field neither gives is an error, or,
        where the field may be `MISSING`, absent.
        """
        fields: Dict = {}
        for name in cls.model_fields:
            if name not in shown and (value := getattr(record, name, _ABSENT)) is not _ABSENT:
                fields[name] = value
        return cls.model_validate(fields | shown)

    def json_dict(self) -> Dict:
        """The JSON-ready dict, as the API sends it (the CLI prints it, events embed it)."""
        return self.model_dump(mode="json")


# -- jobs and runs ----------------------------------------------------------------------------


class ActiveRunOut(View):
    id: str
    state: RunState


class CadenceOut(View):
    """A job's cadence bounds (domain/cadence.py): durations as 90s, 30m, 2h, 1d, 1h30m."""

    min: str | None
    max: str | None
    allowed_hours: str | None = Field(description="local hours of the job's zone, 08:00-20:00")


class MoveOut(View):
    """The agent's move of a job's next fire."""

    from_at: datetime | None = Field(description="the next fire it replaced")
    to_at: datetime
    reason: str
    at: datetime = Field(description="when the agent moved it")
    run_id: str | None = Field(description="the run whose turn moved it (null: a chat turn)")


class BudgetOut(View):
    """A job's caps (null: no cap of that kind); days and months are UTC."""

    usd_run: float | None = None
    usd_day: float | None = None
    usd_month: float | None = None
    tokens_run: int | None = None
    tokens_day: int | None = None
    tokens_month: int | None = None


class PolicyOut(View):
    overlap: Overlap
    catchup: Catchup
    catchup_window_s: int
    max_failures: int
    max_runs: int | None
    end_at: datetime | None
    delete_after_run: bool
    jitter: bool
    notify: Notify
    quiet: QuietMode = Field(description="what a fire in its session's quiet hours does")
    cadence: CadenceOut | None = Field(
        description="how far the agent may move its next fire (null: it may not)"
    )
    gate: dict[str, Any] | None = Field(
        description="its pre-check gate: {kind, target, timeout_s, max_output, notice, no_llm}; "
        "null: none"
    )
    budget: BudgetOut | None = Field(description="its caps (null: no budget)")


def _cadence_shown(bounds: CadenceBounds | None) -> Dict | None:
    if bounds is None:
        return None
    return {
        "min": None if bounds.min is None else duration_text(bounds.min),
        "max": None if bounds.max is None else duration_text(bounds.max),
        "allowed_hours": None if bounds.hours is None else str(bounds.hours),
    }


def _move_shown(move: Reschedule | None) -> Dict | None:
    if move is None:
        return None
    return {
        "from_at": move.from_at,
        "to_at": move.to_at,
        "reason": move.reason,
        "at": move.at,
        "run_id": move.run_id,
    }


def _job_shown(job: Job, active_run: Run | None) -> Dict:
    """The fields of a job's view that are not its record's attributes as they are (nested
    views as dicts: validated in the same pass as the job's, a job view is built often).
    """
    policy = job.policy
    return {
        "schedule": describe(job.spec),
        "tz": job.spec.tz,
        "policy": {
            "overlap": policy.overlap,
            "catchup": policy.catchup,
            "catchup_window_s": int(policy.catchup_window.total_seconds()),
            "max_failures": policy.max_failures,
            "max_runs": policy.max_runs,
            "end_at": policy.end_at,
            "delete_after_run": policy.delete_after_run,
            "jitter": policy.jitter,
            "notify": policy.notify,
            "quiet": policy.quiet,
            "cadence": _cadence_shown(policy.cadence),
            "gate": None if policy.gate is None else policy.gate.as_dict(),
            "budget": None if policy.budget is None else policy.budget.as_dict(),
        },
        "moved": _move_shown(job.moved),
        "state": job.status,
        "alerts": [
            kind
            for kind, since in (
                (AlertKind.OVERDUE, job.overdue_since),
                (AlertKind.FAILING, job.failing_since),
                (AlertKind.ENDING, job.ending_warned_at),
            )
            if since is not None
        ],
        "legacy": job.has_target_fields,  # wire key keeps its old name
        "trigger": job.trigger,
        "active_run": None
        if active_run is None
        else {"id": active_run.id, "state": active_run.state},
    }


class JobOut(View):
    id: str
    name: str
    kind: JobKind
    session_key: str | None
    message: str
    spec: Spec
    schedule: str = Field(description="the schedule in words, naming its time zone")
    tz: str
    enabled: bool
    state: JobStatus = Field(
        description="active, paused, or done: its schedule is spent (kept `retention_age`)"
    )
    finished_at: datetime | None = Field(description="when it became done")
    paused_reason: str | None
    paused_at: datetime | None
    created_by: CreatedBy
    next_run_at: datetime | None
    next_fire_at: datetime | None
    last_run_at: datetime | None
    last_status: RunState | None
    consecutive_failures: int
    run_count: int
    remaining_runs: int | None
    policy: PolicyOut
    idempotency_key: str | None
    model: str | None
    runner_url: str | None = Field(description="its fires' own runner URL (null: the session's)")
    context: ContextMode = Field(description="what history its turns get")
    history_tokens: int | None = Field(description="its turns' history budget (null: the runner's)")
    tools: list[str] | None = Field(description="the tools its turns may use (null: every tool)")
    call_type: RecallCallType | None = Field(
        description="a recall the agent scheduled: once, recurring or immediate"
    )
    internal_comment: str | None = Field(description="a recall's note, whole (the name is cut)")
    legacy: bool = Field(description="a delivery job with target fields (runs isolated)")
    trigger: bool = Field(
        description="its trigger is on: a signed event posted to /hooks/jobs/{id} runs it "
        "(the secret is shown only when made: enable, rotate)"
    )
    version: int
    created_at: datetime
    updated_at: datetime
    active_run: ActiveRunOut | None = Field(
        description="a fire of this job waiting (queued / deferred behind a turn) or running now"
    )
    alerts: list[AlertKind] = Field(
        description="its open alerts: overdue (a fire did not end within its grace), failing "
        "(its last runs failed), ending (its end was announced; renew it)"
    )
    overdue_since: datetime | None = Field(description="since when it is overdue")
    failing_since: datetime | None = Field(description="since when it is failing")
    ending_warned_at: datetime | None = Field(description="when its coming end was announced")
    moved: MoveOut | None = Field(
        default=None,
        description="the agent moved its next fire (`next_fire_at`) here; null: the schedule's",
    )

    @classmethod
    def of_job(cls, job: Job, active_run: Run | None = None) -> JobOut:
        return JobOut.of(job, **_job_shown(job, active_run))

    @classmethod
    def of_state(cls, state: JobState) -> JobOut:
        return JobOut.of_job(state.job, state.active_run)


class ToolCallOut(TypedDict):
    """A tool call a scheduled turn (or an isolated run) made, as its run keeps it."""

    call_id: str
    name: str
    args: Annotated[Dict, Field(description='the arguments (too long: {"_truncated": text})')]
    result: Annotated[str, Field(description="its result, or the error or denial text (truncated)")]
    ok: Annotated[bool, Field(description="false: the tool failed, or the call was denied")]
    duration_ms: int | None
    truncated: NotRequired[Annotated[bool, Field(description="present (true) when cut")]]


class RunOut(View):
    id: str
    job_id: str
    job_name: str | None = Field(
        description="its job's name when it fired (kept after the job is deleted)"
    )
    session_key: str | None
    fire_at: datetime
    state: RunState
    claimed_at: datetime | None
    queued_at: datetime | None
    deferred_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    prompt_ref: Dict | None
    output: str | None
    error: str | None
    message_id: str | None
    usage: Dict | None
    delivery: Dict | None
    tool_calls: list[ToolCallOut] | None = Field(
        description="a scheduled turn's tool calls, in order (null: none)"
    )
    manual: bool = Field(description='a person\'s "run now", not the schedule')
    reschedules: list[Dict] | None = Field(
        default=None,
        description="the agent's moves of a job's next fire during this run's turn: "
        "{job_id, from, to, reason, at, run_id} (null: none)",
    )
    trigger: RunTrigger = Field(
        description='what fired it: its schedule, a person\'s "run now" (manual), an event'
    )
    event_id: str | None = Field(description="the event's webhook-id (an event's run)")


class RunFullOut(RunOut):
    """A run record with the rendered prompt, its variables and the error details."""

    prompt: str | None
    prompt_vars: Dict | None
    event: str | None = Field(description="the event's JSON body, as posted (an event's run)")
    error_details: Dict | None
    owner: str | None
    lease_expires_at: datetime | None


class TriggerOut(View):
    """A job's trigger: whether it is on, where events are posted; its secret only when it was
    just made (enable, rotate), never again.
    """

    job_id: str
    enabled: bool
    path: str = Field(description="where events are posted (POST, outside the API token)")
    url: str | None = Field(description="the path on this server's address, when known")
    secret: str | None = Field(
        description="the Standard Webhooks secret (whsec_...) events are signed with: shown "
        "once, keep it (null: not shown here)"
    )

    @classmethod
    def of_key(cls, key: TriggerKey, base_url: str | None) -> TriggerOut:
        return TriggerOut(
            job_id=key.job_id,
            enabled=True,
            path=key.path,
            url=None if base_url is None else base_url.rstrip("/") + key.path,
            secret=key.secret,
        )


class EventOut(View):
    """An event a trigger took: the run it fired, or (a repeated id) the first delivery's."""

    job_id: str
    event_id: str
    run_id: str
    duplicate: bool = Field(description="this id was delivered before: nothing more fired")
    state: RunState | None = Field(description="the run's state now (null: no longer kept)")

    @classmethod
    def of_event(cls, accepted: EventAccepted) -> EventOut:
        run = accepted.run
        return EventOut.of(accepted, state=None if run is None else run.state)


class UsageOut(View):
    """Token and cost totals."""

    counted: int
    input_tokens: int
    output_tokens: int
    cost_usd: float = Field(description="of the priced ones")
    unpriced: int = Field(description="counted, but no price known for their model")


class WaitingApprovalOut(View):
    """A scheduled run of the job waiting for a person's decision."""

    id: str = Field(description="the approval's id: decide it with POST /api/approvals/{id}")
    tool: str
    args: Dict
    session_key: str | None
    turn_id: str | None
    since: datetime = Field(description="when the call began to wait (`requested_at`)")
    expires_at: datetime = Field(description="when it is denied (timeout) if nobody decides")
    reminded_at: datetime | None = Field(description="when its channel was reminded")

    @classmethod
    def of_approval(cls, approval: Approval) -> WaitingApprovalOut:
        return WaitingApprovalOut.of(approval, since=approval.requested_at)


class JobDetailOut(JobOut):
    upcoming: list[datetime]
    runs: list[RunOut]
    usage: UsageOut
    waiting_approval: WaitingApprovalOut | None = Field(
        default=None, description="a scheduled run of this job waiting for a person now"
    )

    @classmethod
    def of_detail(cls, detail: JobDetail) -> JobDetailOut:
        job = detail.state.job
        return JobDetailOut.of(
            job,
            **_job_shown(job, detail.state.active_run),
            upcoming=detail.upcoming,
            runs=[RunOut.of(r) for r in detail.runs],
            usage=UsageOut.model_validate(detail.usage),
            waiting_approval=None
            if detail.waiting is None
            else WaitingApprovalOut.of_approval(detail.waiting),
        )


class JobsOut(View):
    jobs: list[JobOut]
    next_cursor: str | None = Field(
        default=None, description="the next page's `cursor` (null on the last page)"
    )

    @classmethod
    def of_page(cls, page: Page[JobState]) -> JobsOut:
        return JobsOut(jobs=[JobOut.of_state(s) for s in page.items], next_cursor=page.next_cursor)


class RunsOut(View):
    runs: list[RunOut]
    next_cursor: str | None = Field(
        default=None, description="the next page's `cursor` (null on the last page)"
    )

    @classmethod
    def of_page(cls, page: Page[Run]) -> RunsOut:
        return RunsOut(runs=[RunOut.of(r) for r in page.items], next_cursor=page.next_cursor)


class UsageSumOut(View):
    """Runs, turns, tokens and cost summed."""

    runs: int = Field(description="runs of jobs (scheduled and manual) that ran")
    turns: int = Field(description="turns of the session (a person's and scheduled)")
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(description="null: no known price for any of them")


class UsageDayOut(View):
    """One day's usage of one session and one job (null: the person's own turns)."""

    day: date = Field(description="YYYY-MM-DD in the zone asked (default UTC)")
    session_key: str
    job_id: str | None
    job_name: str | None
    runs: int
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class DailyUsageOut(View):
    """Usage per day, per session and per job, and the sums over them."""

    days: list[UsageDayOut]
    total: UsageSumOut

    @classmethod
    def of_usage(cls, usage: Usage) -> DailyUsageOut:
        return DailyUsageOut(
            days=[UsageDayOut.of(d) for d in usage.days], total=UsageSumOut.of(usage.total)
        )


class SpentOut(View):
    """A budgeted job's running figures (UTC day and month) and its estimate of one run."""

    day: str = Field(description="YYYY-MM-DD (UTC)")
    day_usd: float
    day_tokens: int
    month: str = Field(description="YYYY-MM (UTC)")
    month_usd: float
    month_tokens: int
    est_usd: float = Field(description="the estimate of one run: the mean of its last runs")
    est_tokens: int
    est_runs: int = Field(description="how many runs the estimate is made of")


class SpendDayOut(View):
    """One UTC day of a job's use."""

    day: date
    runs: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class JobSpendOut(View):
    """A job's spend against its budget: the caps, the running figures, and per day."""

    job_id: str
    state: JobStatus
    paused_reason: str | None
    budget: BudgetOut | None
    spent: SpentOut | None = Field(description="null: no budget (nothing is kept running)")
    days: list[SpendDayOut] = Field(description="oldest first, every day of the range")

    @classmethod
    def of_spend(cls, spend: JobSpend) -> JobSpendOut:
        job = spend.job
        budget = job.policy.budget
        return JobSpendOut(
            job_id=job.id,
            state=job.status,
            paused_reason=job.paused_reason,
            budget=None if budget is None else BudgetOut.model_validate(budget.as_dict()),
            spent=None if spend.spend is None else SpentOut.model_validate(spend.spend.as_dict()),
            days=[SpendDayOut.of(use, day=day) for day, use in spend.days],
        )


class SessionSpendOut(View):
    """A session's spend against its budget (its jobs' fires): the caps, the running
    figures, and its jobs' use per UTC day (a person's own turns are not counted).
    """

    session_key: str
    budget: BudgetOut | None
    spent: SpentOut | None = Field(description="null: no budget (nothing is kept running)")
    days: list[SpendDayOut] = Field(description="oldest first, every day of the range")

    @classmethod
    def of_spend(cls, spend: SessionSpend) -> SessionSpendOut:
        budget = spend.session.budget
        return SessionSpendOut(
            session_key=spend.session.key,
            budget=None if budget is None else BudgetOut.model_validate(budget.as_dict()),
            spent=None if spend.spend is None else SpentOut.model_validate(spend.spend.as_dict()),
            days=[SpendDayOut.of(use, day=day) for day, use in spend.days],
        )


class DeletedJobOut(View):
    deleted: str = Field(description="the id of the deleted job")


class RecallOut(View):
    """A session's recall: pending (with its next fire), paused (why) or ended (fired /
    cancelled, when).
    """

    id: str
    session_key: str
    state: RecallState
    name: str
    message: str
    spec: Spec
    schedule: str
    tz: str
    run_count: int
    last_run_at: datetime | None
    last_status: RunState | None
    next_fire_at: datetime | None
    created_at: datetime
    ended_at: datetime | None
    call_type: RecallCallType | None
    internal_comment: str | None
    paused_reason: str | None = Field(
        description="paused: why (auto-paused after failures: with the last error)"
    )
    paused_at: datetime | None

    @classmethod
    def of_recall(cls, recall: Recall) -> RecallOut:
        return RecallOut.of(recall, schedule=describe(recall.spec), tz=recall.spec.tz)


class RecallsOut(View):
    recalls: list[RecallOut]


class PendingRecallOut(View):
    recall: JobOut | None


class SkippedRecallOut(View):
    recall: JobOut


class CancelledRecallOut(View):
    cancelled: str = Field(description="the id of the cancelled recall")


# -- sessions, transcripts and turns ----------------------------------------------------------


class SessionOut(View):
    key: str
    channel: str
    chat_id: str
    channel_meta: Dict | None
    title: str | None
    tz: str
    runner_url: str | None = Field(description="its turns' own runner URL (null: the server's)")
    quiet_hours: str | None = Field(
        description="its quiet hours in its zone, HH:MM-HH:MM (null: none)"
    )
    created_at: datetime
    updated_at: datetime


class SessionRowOut(SessionOut):
    automations: int = Field(description="enabled bound automations")
    has_recall: bool
    running_turn: str | None

    @classmethod
    def of_row(cls, row: SessionRow) -> SessionRowOut:
        return SessionRowOut.of(
            row.session,
            automations=row.automations,
            has_recall=row.has_recall,
            running_turn=row.running_turn,
        )


class SessionsOut(View):
    sessions: list[SessionRowOut]
    next_cursor: str | None = Field(
        default=None, description="the next page's `cursor` (null on the last page)"
    )

    @classmethod
    def of_page(cls, page: Page[SessionRow]) -> SessionsOut:
        return SessionsOut(
            sessions=[SessionRowOut.of_row(r) for r in page.items], next_cursor=page.next_cursor
        )


class SessionDetailOut(SessionOut):
    running_turn: str | None
    automations: list[JobOut]
    recall: JobOut | None
    usage: UsageOut

    @classmethod
    def of_detail(cls, detail: SessionDetail) -> SessionDetailOut:
        return SessionDetailOut.of(
            detail.session,
            running_turn=detail.running_turn,
            automations=[JobOut.of_state(s) for s in detail.automations],
            recall=None if detail.recall is None else JobOut.of_job(detail.recall),
            usage=UsageOut.model_validate(detail.usage),
        )


class EntryOut(View):
    """One transcript entry."""

    id: str
    seq: int
    role: Role
    content: str
    meta: Dict
    created_at: datetime


class MessagesOut(View):
    session_key: str
    messages: list[EntryOut]
    next_after: int | None = Field(description="the seq to read on from (`after`)")
    next_cursor: str | None = Field(
        default=None,
        description="the next page's `cursor`, the way this one was read (with `after`: the "
        "entries after it; else the older ones); null when there are no more",
    )

    @classmethod
    def of_page(cls, key: str, messages: list[Message], after: int | None) -> MessagesOut:
        return MessagesOut(
            session_key=key,
            messages=[EntryOut.of(m) for m in messages],
            next_after=messages[-1].seq if messages else after,
        )

    @classmethod
    def of_transcript(cls, key: str, page: Page[Message], after: int | None) -> MessagesOut:
        out = MessagesOut.of_page(key, page.items, after)
        return out.model_copy(update={"next_cursor": page.next_cursor})


class TurnStartedOut(View):
    """A message accepted as a turn (202)."""

    turn_id: str
    session_key: str
    state: TurnState

    @classmethod
    def of_turn(cls, turn: Turn) -> TurnStartedOut:
        return TurnStartedOut(turn_id=turn.id, session_key=turn.session_key, state=turn.state)


class NoteOut(View):
    """A note stored without a turn (201)."""

    session_key: str
    turn_id: None
    message: EntryOut

    @classmethod
    def of_note(cls, message: Message) -> NoteOut:
        return NoteOut(session_key=message.session_key, turn_id=None, message=EntryOut.of(message))


class SentOut(View):
    """A message sent out through the session's channel without the agent."""

    session_key: str
    message: EntryOut

    @classmethod
    def of_sent(cls, message: Message) -> SentOut:
        return SentOut(session_key=message.session_key, message=EntryOut.of(message))


class TurnOut(View):
    id: str
    session_key: str
    source: TurnSource
    state: TurnState
    run_id: str | None
    content: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    error_details: Dict | None
    usage: Dict | None
    reply_message_id: str | None


class TurnsOut(View):
    turns: list[TurnOut]


class TurnDetailOut(TurnOut):
    reply: str | MISSING | None = Field(
        default=MISSING, description="present once the turn has a reply"
    )

    @classmethod
    def of_detail(cls, detail: TurnDetail) -> TurnDetailOut:
        if detail.turn.reply_message_id is None:
            return TurnDetailOut.of(detail.turn)
        return TurnDetailOut.of(detail.turn, reply=detail.reply)


class StopOut(View):
    stopped: bool
    turn_id: str | None


class BlockingJobOut(View):
    id: str
    name: str
    enabled: bool


class DeletionOut(View):
    """What deleting a session did: while automations block it (without `confirm`) nothing
    goes and they are listed; the fields of the other outcome are absent.
    """

    deleted: bool
    blocked_by_automations: bool | MISSING = Field(default=MISSING, description="when not deleted")
    automations: list[BlockingJobOut] | MISSING = Field(
        default=MISSING, description="the blocking ones, when not deleted"
    )
    deleted_automations: list[str] | MISSING = Field(default=MISSING, description="when deleted")

    @classmethod
    def of_deletion(cls, deletion: Deletion) -> DeletionOut:
        if not deletion.deleted:
            blocking = [BlockingJobOut.of(j) for j in deletion.blocking]
            return DeletionOut(deleted=False, blocked_by_automations=True, automations=blocking)
        return DeletionOut(deleted=True, deleted_automations=deletion.deleted_automations)


class HookOut(View):
    """A message accepted through the inbound hook, as a turn (202)."""

    turn_id: str
    session_key: str


# -- deliveries, channels, approvals, health --------------------------------------------------


class DeliveryOut(View):
    """A delivery record, without its payload (the message is in the transcript)."""

    id: str = Field(
        description="`channel:message_id`: what `POST /api/deliveries/{id}/retry` takes"
    )
    channel: str
    message_id: str
    session_key: str
    state: DeliveryState
    attempts: int
    last_error: str | None = Field(description="a failed one's reason; else the last error")
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None
    external_id: str | None = Field(description="the far end's id of the delivered message")
    retried_at: datetime | None = Field(description="when it was last re-sent by hand")


class DeliveriesOut(View):
    deliveries: list[DeliveryOut]
    next_cursor: str | None = Field(default=None, description="null on the last page")


class ChannelOut(View):
    name: str
    kind: str
    running: bool
    connected: bool
    healthy: bool
    last_error: str | None
    last_error_at: datetime | None
    last_success_at: datetime | None
    failed: int = Field(description="deliveries given up since start")


class ChannelsOut(View):
    channels: list[ChannelOut]


class ApprovalOut(View):
    id: str
    session_key: str | None
    turn_id: str | None
    tool: str
    args: Dict
    state: ApprovalState
    requested_at: datetime
    expires_at: datetime
    decision: Decision | None = Field(description="approve or deny (an expired one: deny)")
    decided_by: str | None = Field(
        description='who decided (an expired one: timeout; a standing grant: "standing grant <id>")'
    )
    decided_at: datetime | None
    job_id: str | None = Field(
        default=None, description="the job whose scheduled run made the call (null: a message's)"
    )
    grant_id: str | None = Field(
        default=None, description="the job's standing grant that approved it without a person"
    )
    reminded_at: datetime | None = Field(
        default=None, description="when the session's channel was reminded that it waits"
    )


class GrantOut(View):
    """A standing approval of a job's scheduled runs (docs: safe-approvals)."""

    id: str
    job_id: str
    tool: str = Field(description="the one tool it allows, by its exact name")
    args: Dict = Field(description="the argument pattern: name -> glob or exact value")
    expires_at: datetime
    expired: bool = Field(description="past `expires_at`: it matches no call any more")
    granted_by: str
    created_at: datetime

    @classmethod
    def of_grant(cls, grant: Grant, now: datetime) -> GrantOut:
        return GrantOut.of(grant, expired=grant.expired(now))


class GrantsOut(View):
    grants: list[GrantOut]

    @classmethod
    def of_grants(cls, grants: list[Grant], now: datetime) -> GrantsOut:
        return GrantsOut(grants=[GrantOut.of_grant(g, now) for g in grants])


class RevokedGrantOut(View):
    revoked: str = Field(description="the grant's id")


class ApprovalsOut(View):
    approvals: list[ApprovalOut]
    next_cursor: str | None = Field(
        default=None, description="the next page's `cursor` (null on the last page)"
    )

    @classmethod
    def of_approvals(cls, approvals: list[Approval]) -> ApprovalsOut:
        return ApprovalsOut(approvals=[ApprovalOut.of(a) for a in approvals])

    @classmethod
    def of_page(cls, page: Page[Approval]) -> ApprovalsOut:
        return ApprovalsOut(
            approvals=[ApprovalOut.of(a) for a in page.items], next_cursor=page.next_cursor
        )


class RunnerSchemaOut(View):
    """The runner protocol's JSON Schema (`GET /api/schema/runner.json`)."""

    request: Dict = Field(description="the body agentcron POSTs for each turn")
    answer: Dict = Field(
        description="`json`: a JSON answer's body; `sse`: each event's data, by event name"
    )


class RunnerApprovalOut(View):
    """A person's decision on a remote agent's tool call (`POST /api/runner/approvals`)."""

    approved: bool = Field(description="true: run the tool; false: do not")
    message: str | None = Field(
        description="when not approved, what to tell the model (who denied it, or the timeout)"
    )
    approval: ApprovalOut | None = Field(description="the record (null: no one can be asked)")


class HealthOut(View):
    status: str


class FireAcceptedOut(View):
    """A managed wake's fire taken (`POST /api/cron/fire`, 202): it is claimed and run at once."""

    status: str = Field(description="accepted")
    job_id: str


class ReadyOut(View):
    status: str = Field(description="ready, or not ready (503)")
    problems: list[str]
    wake: Dict | None = Field(default=None, description="which provider wakes the engine, and why")


# -- JSON dicts for the edges that build their own frames -------------------------------------


def job_view(job: Job) -> Dict:
    """A job's JSON (the WebSocket's job updates embed it)."""
    return JobOut.of_job(job).json_dict()


def approval_view(approval: Approval) -> Dict:
    """An approval's JSON (the channels' approval messages carry it)."""
    return ApprovalOut.of(approval).json_dict()
