"""Sessions: create, list, read the transcript, send messages, stop, delete; their recall."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status
from fastapi.responses import JSONResponse

from agentcron.domain.jobs import RecallState
from agentcron.errors import InvalidInputError
from agentcron.limits import check_text
from agentcron.server.deps import Cron, Cursor, Limit
from agentcron.server.errors import CHANGE, answers
from agentcron.server.middleware import key_from_path
from agentcron.service.job_requests import BudgetIn
from agentcron.service.paging import DEFAULT_PAGE
from agentcron.service.sessions import (
    MAX_SEARCH,
    MessageCreate,
    MessageOut,
    SessionCreate,
    SessionPatch,
)
from agentcron.session_keys import MAX_SESSION_KEY, SESSION_KEY_HELP
from agentcron.views import (
    CancelledRecallOut,
    DeletionOut,
    JobOut,
    MessagesOut,
    NoteOut,
    PendingRecallOut,
    RecallOut,
    RecallsOut,
    RunsOut,
    SentOut,
    SessionDetailOut,
    SessionOut,
    SessionsOut,
    SessionSpendOut,
    SkippedRecallOut,
    StopOut,
    TurnOut,
    TurnsOut,
    TurnStartedOut,
    UsageOut,
)

router = APIRouter(prefix="/api/sessions", tags=["sessions"])


async def key_param(
    key: Annotated[str, Path(description=f"the session key, percent-encoded; {SESSION_KEY_HELP}")],
) -> str:
    """The session key of the path (`/` and `%` percent-encoded, see SessionKeyPath)."""
    decoded = key_from_path(key)
    if len(decoded) > MAX_SESSION_KEY:
        raise InvalidInputError(f"session key too long (at most {MAX_SESSION_KEY} characters)")
    return check_text(decoded, "the session key")


Key = Annotated[str, Depends(key_param)]


@router.post("", status_code=status.HTTP_201_CREATED, responses=answers(*CHANGE))
async def create_session(body: SessionCreate, cron: Cron) -> SessionOut:
    session = await cron.sessions.create(
        body.key,
        title=body.title,
        tz=body.tz,
        channel_meta=body.channel_meta,
        runner_url=body.runner_url,
    )
    return SessionOut.of(session)


@router.get("")
async def list_sessions(
    cron: Cron,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
    q: str | None = Query(
        default=None, max_length=MAX_SEARCH, description="title or key holds it (any case)"
    ),
) -> SessionsOut:
    """The sessions, most recently updated first, with their automation count, pending
    recall and running turn; `next_cursor` is null on the last page.
    """
    return SessionsOut.of_page(await cron.sessions.page(limit=limit, cursor=cursor, search=q))


@router.get("/{key}", responses=answers(404))
async def get_session(key: Key, cron: Cron) -> SessionDetailOut:
    """A session with its automations (and their state), its recall and its usage."""
    return SessionDetailOut.of_detail(await cron.sessions.detail(key))


@router.patch("/{key}", responses=answers(404, *CHANGE))
async def update_session(key: Key, body: SessionPatch, cron: Cron) -> SessionOut:
    """Set or clear the session's quiet hours (`quiet_hours`: HH:MM-HH:MM in its zone, or
    null).
    """
    return SessionOut.of(await cron.sessions.set_quiet_hours(key, body.quiet_hours))


@router.get("/{key}/messages", responses=answers(404))
async def list_messages(
    key: Key,
    cron: Cron,
    after: int | None = Query(default=None, ge=0, le=2**53, description="a seq: entries after it"),
    before: int | None = Query(
        default=None,
        ge=0,
        le=2**53,
        description="a seq: the newest entries before it (2**53: the newest of all)",
    ),
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> MessagesOut:
    """A page of the transcript, in order. Reading on: from the start or the entries after
    seq `after`. Reading back: the newest entries before seq `before` (`before=2**53`, i.e.
    9007199254740992: the newest page, where a chat opens); `next_cursor` goes on the same way.
    """
    page = await cron.sessions.transcript_page(
        key, after=after, before=before, limit=limit, cursor=cursor
    )
    return MessagesOut.of_transcript(key, page, after)


@router.post(
    "/{key}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TurnStartedOut,
    responses={
        201: {"model": NoteOut, "description": "a note (`trigger: false`): stored, no turn"},
        **answers(404, *CHANGE),
    },
)
async def send_message(key: Key, body: MessageCreate, cron: Cron) -> TurnStartedOut | JSONResponse:
    """A message from the user: it runs as a turn (202). With `trigger: false` it is a note
    (seed 004 `triggerAgent=false`): stored in the transcript, no turn (201).
    """
    if not body.trigger:
        note = NoteOut.of_note(await cron.sessions.note(key, body.content))
        return JSONResponse(note.json_dict(), status.HTTP_201_CREATED)
    return TurnStartedOut.of_turn(await cron.sessions.send(key, body.content, create=False))


@router.post("/{key}/send", status_code=status.HTTP_201_CREATED, responses=answers(404, *CHANGE))
async def send_out(key: Key, body: MessageOut, cron: Cron) -> SentOut:
    """Send a message out through the session's channel without the agent (seed 004 `send`):
    stored as an assistant entry (`sent_by: operator`) and delivered like a reply; its
    delivery shows in `GET /api/deliveries`.
    """
    return SentOut.of_sent(await cron.sessions.deliver(key, body.content))


@router.get("/{key}/turns", responses=answers(404))
async def list_turns(
    key: Key, cron: Cron, limit: int | None = Query(default=None, ge=1, le=10_000)
) -> TurnsOut:
    return TurnsOut(turns=[TurnOut.of(t) for t in await cron.sessions.turn_list(key, limit=limit)])


@router.post("/{key}/stop", responses=answers(404, *CHANGE))
async def stop_turn(key: Key, cron: Cron) -> StopOut:
    stopped, turn_id = await cron.sessions.stop_running(key)
    return StopOut(stopped=stopped, turn_id=turn_id)


@router.delete("/{key}", responses=answers(404, 409))
async def delete_session(
    key: Key,
    cron: Cron,
    confirm: bool = Query(default=False, description="also delete the session's bound automations"),
) -> DeletionOut:
    """Two-step when it has automations: without `confirm` they are listed, nothing goes."""
    return DeletionOut.of_deletion(await cron.sessions.delete(key, confirm=confirm))


@router.get("/{key}/runs", responses=answers(404))
async def session_runs(
    key: Key, cron: Cron, limit: Limit = DEFAULT_PAGE, cursor: Cursor = None
) -> RunsOut:
    """The runs of the session's jobs, newest first."""
    return RunsOut.of_page(await cron.runs.page(session_key=key, limit=limit, cursor=cursor))


@router.get("/{key}/usage", responses=answers(404))
async def session_usage(key: Key, cron: Cron) -> UsageOut:
    return UsageOut.model_validate(await cron.sessions.usage_of(key))


@router.put("/{key}/budget", responses=answers(404, *CHANGE))
async def set_session_budget(key: Key, body: BudgetIn, cron: Cron) -> SessionSpendOut:
    """Give the session a budget across its jobs' fires (caps of tokens and money per run,
    UTC day and month). A fire of any of its jobs that would pass it is skipped; no job is
    paused. A budget given to a session that had none starts from what its jobs spent this
    UTC day and month. Answers its spend as `GET .../spend` does (7 days).
    """
    await cron.sessions.set_budget(key, body.budget())
    return SessionSpendOut.of_spend(await cron.sessions.spend(key, 7))


@router.delete("/{key}/budget", responses=answers(404))
async def clear_session_budget(key: Key, cron: Cron) -> SessionSpendOut:
    """Remove the session's budget (its running figures go with it)."""
    await cron.sessions.set_budget(key, None)
    return SessionSpendOut.of_spend(await cron.sessions.spend(key, 7))


@router.get("/{key}/spend", responses=answers(404))
async def session_spend(
    key: Key,
    cron: Cron,
    days: int = Query(default=30, ge=1, le=366, description="UTC days back, today included"),
) -> SessionSpendOut:
    """The session's spend against its budget: its caps, what its jobs' fires spent today
    and this month (UTC) with the estimate of one run, and their tokens and cost per UTC day.
    """
    return SessionSpendOut.of_spend(await cron.sessions.spend(key, days))


@router.get("/{key}/recalls", responses=answers(404))
async def list_recalls(
    key: Key,
    cron: Cron,
    state: Annotated[
        list[RecallState] | None,
        Query(description="pending, fired or cancelled; repeat for several (default all)"),
    ] = None,
    limit: int = Query(default=100, ge=1, le=1000),
) -> RecallsOut:
    """The session's recalls (seed 003): the pending one, then those that fired or were
    cancelled, newest first, with their times.
    """
    recalls = await cron.sessions.recalls(key, states=state, limit=limit)
    return RecallsOut(recalls=[RecallOut.of_recall(r) for r in recalls])


@router.get("/{key}/recall", responses=answers(404))
async def get_recall(key: Key, cron: Cron) -> PendingRecallOut:
    recall = await cron.sessions.recall(key)
    return PendingRecallOut(recall=None if recall is None else JobOut.of_job(recall))


@router.delete("/{key}/recall", responses=answers(404, 409))
async def cancel_recall(key: Key, cron: Cron) -> CancelledRecallOut:
    return CancelledRecallOut(cancelled=(await cron.sessions.cancel_recall(key)).id)


@router.post("/{key}/recall/skip", responses=answers(404, *CHANGE))
async def skip_recall(key: Key, cron: Cron) -> SkippedRecallOut:
    return SkippedRecallOut(recall=JobOut.of_job(await cron.sessions.skip_recall(key)))
