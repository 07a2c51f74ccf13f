"""Sessions: create, list, read, message, note, send out, stop, delete; their turns and
recalls; the session list and session detail read models.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agentcron.agent.runner import TurnSource
from agentcron.config import UNIFIED_SESSION_KEY
from agentcron.domain.attachments import Attachment, check_attachments
from agentcron.domain.budgets import ESTIMATE_RUNS, Budget, Spend, spend_at
from agentcron.domain.events import Event, SessionDeleted, SessionSync
from agentcron.domain.jobs import Job, JobKind, JobStatus, Recall, RecallState
from agentcron.domain.sessions import Message, Role, Session, Turn
from agentcron.errors import InvalidInputError
from agentcron.limits import (
    MAX_MESSAGE_CHARS,
    MessageText,
    MetaObject,
    NameText,
    RunnerUrl,
    ZoneText,
    check_meta,
    check_runner_url,
    check_text,
)
from agentcron.runtime.clock import Clock
from agentcron.runtime.waiters import Waiters
from agentcron.schedule import EverySpec, InvalidSpecError, parse_when
from agentcron.schedule.quiet import parse_quiet_hours
from agentcron.service.job_requests import check_budget
from agentcron.service.jobs import Jobs, JobState
from agentcron.service.paging import (
    BAD_CURSOR,
    DEFAULT_PAGE,
    Page,
    check_limit,
    decode_cursor,
    decode_time_key,
    encode_cursor,
    page_of,
)
from agentcron.service.runs import MAX_USAGE_DAYS, Runs, UsageSum
from agentcron.service.waiting import wait_for
from agentcron.session_keys import SessionKey, check_session_key
from agentcron.store.errors import ConflictError, RecallNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.interface import RunRecords, SessionRecords


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: SessionKey | None = Field(default=None, description="generated (`api:<id>`) if absent")
    title: NameText | None = None
    tz: ZoneText | None = Field(
        default=None,
        description="IANA time zone, e.g. Europe/Berlin (UTC if absent); creating an existing "
        "session with another zone is a conflict (409)",
    )
    channel_meta: MetaObject | None = Field(default=None, description="at most 16 KiB as JSON")
    runner_url: RunnerUrl | None = Field(
        default=None,
        description="the runner its turns run on: your own agent's http(s) URL, signed with the "
        "server's runner secret (the server's runner if absent); creating an existing session "
        "with another one is a conflict (409)",
    )


QUIET_HOURS_HELP = (
    "its quiet hours in its zone, HH:MM-HH:MM (24-hour; an end before the start spans "
    "midnight, e.g. 22:00-07:00); null: none. A fire due in them holds its delivery until "
    "they end, runs silently or waits: its job's `quiet`"
)


class SessionPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    quiet_hours: str | None = Field(max_length=32, description=QUIET_HOURS_HELP)


class MessageCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: MessageText = Field(description="what the user says")
    trigger: bool = Field(
        default=True,
        description="false: a note in the transcript that starts no turn (the agent sees it "
        "next turn); answered 201 with the message instead of 202 with the turn",
    )


class MessageOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: MessageText = Field(description="the text to send through the channel")


class TurnQueue(Protocol):
    """The lanes as the sessions service sees them: where messages become turns."""

    turn_waiters: Waiters  # notified when a turn ends

    async def submit_message(
        self,
        session_key: str,
        content: str,
        *,
        source: TurnSource,
        title: str | None = None,
        attachments: tuple[Attachment, ...] = (),
    ) -> Turn: ...

    def running_turn(self, session_key: str) -> str | None: ...

    def replay(self, session_key: str) -> list[Event]: ...

    async def stop(self, session_key: str) -> bool: ...


SESSIONS_CURSOR = "sessions"
MESSAGES_CURSOR = "messages"
MAX_SEARCH = 200  # characters of a session search

Post = Callable[[str, Role, str, dict[str, Any]], Awaitable[Message]]
"""(session key, role, text, meta) -> the entry written outside a turn, announced."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session as the session list shows it."""

    session: Session
    automations: int  # enabled bound automations (its own and, unified, the shared ones)
    has_recall: bool
    running_turn: str | None


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """A session with its automations (and their state), its recall and its usage."""

    session: Session
    running_turn: str | None
    automations: list[JobState]
    recall: Job | None
    usage: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Deletion:
    """What deleting a session did: nothing while automations block it (without confirm)."""

    deleted: bool
    blocking: list[Job] = field(default_factory=list)  # listed when not deleted
    deleted_automations: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TurnDetail:
    """A turn with the text of its closing reply (once it has one)."""

    turn: Turn
    reply: str | None


@dataclass(frozen=True, slots=True)
class SessionSpend:
    """A session's spend against its budget (its jobs' fires): the running figures (today
    and this month, UTC; None: no budget) and its jobs' use per UTC day, oldest first.
    """

    session: Session
    spend: Spend | None
    days: builtins.list[tuple[date, UsageSum]]


class Sessions:
    """Sessions, their transcripts and turns; messages go through the session's lane."""

    def __init__(
        self,
        records: SessionRecords,
        lanes: TurnQueue,
        jobs: Jobs,
        usage: RunRecords,
        clock: Clock,
        *,
        post: Post,
        publish: Callable[[Event], Awaitable[None]],
        jobs_per_session: Callable[[], Awaitable[dict[str, dict[str, int]]]],
        owner_of: Callable[[str], str] = lambda key: key,
        stopping: Callable[[], bool] = lambda: False,
        end_approvals: Callable[[str], Awaitable[object]] | None = None,
        runs: Runs | None = None,
    ) -> None:
        self._records = records
        self._lanes = lanes
        self._jobs = jobs
        self._usage = usage
        self._clock = clock
        self._post = post
        self._publish = publish
        self._jobs_per_session = jobs_per_session
        self._owner_of = owner_of
        self._stopping = stopping
        # Expires a session's pending approvals (and announces them) before it is deleted.
        self._end_approvals = end_approvals
        self._runs = runs  # the usage per day (a session's spend); None: no spend report

    async def create(
        self,
        key: str | None = None,
        *,
        title: str | None = None,
        tz: str | None = None,
        channel_meta: dict[str, Any] | None = None,
        runner_url: str | None = None,
    ) -> Session:
        """Create (or return) a session; a key `api:<id>` is generated when none is given.

        `tz` defaults to UTC for a new session; `runner_url` (None: the process's runner) is
        where its turns run. Asking for an existing one with another `tz` or `runner_url` is a
        ConflictError (the same values again return it unchanged).
        """
        if key is not None:
            check_session_key(key)
        if title is not None:
            check_text(title, "title")
        if channel_meta is not None:
            check_meta(channel_meta)
        if tz is not None and tz != "UTC":
            parse_when("in 1m", self._clock.now(), tz)  # validates the zone name
        check_runner_url(runner_url)
        session = await self._records.ensure_session(
            key or f"api:{new_id()}",
            self._clock.now(),
            title=title,
            tz=tz or "UTC",
            channel_meta=channel_meta,
            runner_url=runner_url,
        )
        if tz is not None and session.tz != tz:
            raise ConflictError(
                f"session {session.key!r} exists in time zone {session.tz!r}, not {tz!r}: "
                "omit tz to get it as it is (its zone cannot be changed)"
            )
        if runner_url is not None and session.runner_url != runner_url:
            raise ConflictError(
                f"session {session.key!r} exists with runner URL {session.runner_url!r}, not "
                f"{runner_url!r}: omit runner_url to get it as it is"
            )
        return session

    async def get(self, key: str) -> Session:
        return await self._records.get_session(key)

    async def set_quiet_hours(self, key: str, hours: str | None) -> Session:
        """Set the session's quiet hours ("22:00-07:00", in its zone) or clear them (None);
        kept in one form ("HH:MM-HH:MM"). InvalidInputError for another form.
        """
        window = None
        if hours is not None:
            try:
                window = str(parse_quiet_hours(hours))
            except InvalidSpecError as exc:
                raise InvalidInputError(str(exc)) from exc
        session = await self._records.set_quiet_hours(key, window, self._clock.now())
        await self._publish(SessionSync(session_key=key))
        return session

    async def list(self, *, limit: int | None = None) -> builtins.list[Session]:
        return await self._records.list_sessions(limit=limit)

    async def page(
        self, *, limit: int = DEFAULT_PAGE, cursor: str | None = None, search: str | None = None
    ) -> Page[SessionRow]:
        """One page of the sessions, most recently updated first, with their automation
        count, pending recall and running turn; `search`: those whose title or key holds it
        (case-insensitive). `next_cursor` reads on.
        """
        check_limit(limit)
        if search is not None:
            check_text(search, "the search")
            if len(search) > MAX_SEARCH:
                raise InvalidInputError(f"search too long (at most {MAX_SEARCH} characters)")
        before = None if cursor is None else decode_time_key(SESSIONS_CURSOR, cursor)
        found = await self._records.list_sessions(
            limit=limit + 1, before=before, search=search or None
        )
        page = page_of(found, limit, SESSIONS_CURSOR, lambda s: (s.updated_at, s.key))
        return Page(await self._rows(page.items), page.next_cursor)

    async def _rows(self, sessions: builtins.list[Session]) -> builtins.list[SessionRow]:
        summary = await self._jobs_per_session()
        unified = summary.get(UNIFIED_SESSION_KEY, {})
        rows = []
        for session in sessions:
            own = summary.get(session.key, {})
            shared = unified if self._owner_of(session.key) != session.key else {}
            rows.append(
                SessionRow(
                    session,
                    automations=own.get("automations", 0) + shared.get("automations", 0),
                    has_recall=own.get("recalls", 0) > 0,
                    running_turn=self.running_turn(session.key),
                )
            )
        return rows

    async def detail(self, key: str) -> SessionDetail:
        session = await self.get(key)
        jobs = await self._jobs.for_session(key)
        automations = [j for j in jobs if j.kind is JobKind.AGENT_TURN]
        recall = next((j for j in jobs if j.kind is JobKind.RECALL and j.session_key == key), None)
        return SessionDetail(
            session,
            running_turn=self.running_turn(key),
            automations=await self._jobs.with_state(automations),
            recall=recall,
            usage=await self.usage(key),
        )

    async def note(self, key: str, content: str) -> Message:
        """A message in the transcript that starts no turn (seed 004 `triggerAgent=false`): the
        agent sees it as history in the session's next turn.
        """
        _check_text(content)
        return await self._post(key, Role.USER, content, {"source": "note"})

    async def deliver(self, key: str, text: str) -> Message:
        """Send `text` out through the session's channel without the agent (seed 004 `send`):
        an assistant entry marked `sent_by: operator`, delivered by the channels like a reply.
        """
        _check_text(text)
        meta = {"source": "operator", "sent_by": "operator"}
        return await self._post(key, Role.ASSISTANT, text, meta)

    async def send(
        self,
        key: str,
        content: str,
        *,
        source: TurnSource = TurnSource.USER,
        create: bool = True,
        attachments: Sequence[Attachment] = (),
    ) -> Turn:
        """Submit a message (from the user, a hook or a channel): it runs as a turn after any
        turn in progress. A new session is created (in UTC, named after the message) unless
        `create=False`: then an unknown key is a SessionNotFoundError (the API's messages).
        `attachments` (at most MAX_ATTACHMENTS) reach the turn's runner.
        """
        _check_text(content)
        files = check_attachments(tuple(attachments))
        if create:
            check_session_key(key)
        else:
            await self.get(key)
        # A new chat is named after its first message.
        return await self._lanes.submit_message(
            key, content, source=source, title=_title(content), attachments=files
        )

    async def receive(
        self,
        channel: str,
        chat_id: str,
        content: str,
        meta: dict[str, Any],
        attachments: Sequence[Attachment] = (),
    ) -> Turn:
        """A message from a chat (a channel's inbound): its session `channel:chat_id` is made
        with the chat's context (channel, chat id, `meta` as its channel_meta) when it is new,
        then the message is sent like any user message (with its `attachments`).
        """
        key = check_session_key(f"{channel}:{chat_id}")  # before the session is made
        await self._records.ensure_session(
            key, self._clock.now(), channel=channel, chat_id=chat_id, channel_meta=meta
        )
        return await self.send(key, content, attachments=attachments)

    def running_turn(self, key: str) -> str | None:
        """The id of the session's turn running in this process now, if any."""
        return self._lanes.running_turn(key)

    def replay(self, key: str) -> builtins.list[Event]:
        """The events of the session's turn in progress (for a client that just subscribed)."""
        return self._lanes.replay(key)

    async def messages(
        self, key: str, *, after: int | None = None, limit: int | None = None
    ) -> builtins.list[Message]:
        """The transcript in order (entries after seq `after`); empty for an unknown key."""
        return await self._records.list_messages(key, after=after, limit=limit)

    async def transcript_page(
        self,
        key: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> Page[Message]:
        """One page of an existing session's transcript (SessionNotFoundError), in order.
        Reading on (from the start, or after seq `after`): the entries after it,
        `next_cursor` to the following ones. Reading back (`before` a seq; one past the
        newest, e.g. 2**53, reads the newest page): the newest entries below it,
        `next_cursor` to the older ones. A cursor goes on the way its page was read (the
        first page's `after`/`before` may be given with it: the cursor wins).
        """
        check_limit(limit)
        if after is not None and before is not None:
            raise InvalidInputError("give after or before, not both")
        if cursor is not None:  # it goes on where its page ended: after/before are the first's
            way, seq = decode_cursor(MESSAGES_CURSOR, cursor, (str, int))
            if way not in ("on", "back") or not isinstance(seq, int):
                raise InvalidInputError(BAD_CURSOR)
            after, before = (seq, None) if way == "on" else (None, seq)
        await self.get(key)
        if before is None:
            found = await self._records.list_messages(key, after=after, limit=limit + 1)
            return page_of(found, limit, MESSAGES_CURSOR, lambda m: ("on", m.seq))
        newest = await self._records.list_messages(key, before=before, limit=limit + 1)
        more = len(newest) > limit
        items = newest[1:] if more else newest
        cursor_back = encode_cursor(MESSAGES_CURSOR, ("back", items[0].seq)) if more else None
        return Page(items, cursor_back)

    async def turns(self, key: str, *, limit: int | None = None) -> builtins.list[Turn]:
        """The session's turns (user and scheduled), oldest first; empty for an unknown key."""
        return await self._records.list_turns(key, limit=limit)

    async def turn_list(self, key: str, *, limit: int | None = None) -> builtins.list[Turn]:
        """`turns` of an existing session (SessionNotFoundError): what the API answers."""
        await self.get(key)
        return await self.turns(key, limit=limit)

    async def usage(self, key: str) -> dict[str, Any]:
        """Tokens and cost summed over the session's turns, user and scheduled."""
        return await self._usage.usage_totals(session_key=key)

    async def set_budget(self, key: str, budget: Budget | None) -> Session:
        """Give session `key` a budget across its jobs' fires (None or an empty one: none).
        A budget given to a session that had none starts from what its jobs spent this UTC
        day and month; a changed one keeps the figures; removing it stops them.
        """
        budget = check_budget(budget)
        session = await self.get(key)
        if budget is None:
            spend = None
        elif session.budget is None or session.spend is None:
            spend = await self._spent_so_far(key)
        else:
            spend = session.spend
        return await self._records.set_session_budget(key, budget, spend)

    async def spend(self, key: str, days: int = 30) -> SessionSpend:
        """A session's spend against its budget: its running figures as of now, and its
        jobs' use per UTC day over the last `days` days (today included, zero days too).
        """
        if not 1 <= days <= MAX_USAGE_DAYS:
            raise InvalidInputError(f"days must be between 1 and {MAX_USAGE_DAYS} (got {days})")
        session = await self.get(key)
        now = self._clock.now()
        today = now.astimezone(UTC).date()
        first = today - timedelta(days=days - 1)
        per_day = {first + timedelta(days=i): UsageSum() for i in range(days)}
        for row in await self._jobs_usage(key, first, today):
            bucket = per_day.get(row[0])
            if bucket is not None:
                bucket.merge(row[1])
        spent = None if session.budget is None else spend_at(session.spend, now)
        return SessionSpend(session, spent, sorted(per_day.items()))

    async def _jobs_usage(
        self, key: str, first: date, last: date
    ) -> builtins.list[tuple[date, UsageSum]]:
        """The use of the session's jobs' fires per UTC day (a person's turns left out)."""
        if self._runs is None:
            return []
        found = await self._runs.usage(session_key=key, since=first, until=last, tz="UTC")
        return [(row.day, row) for row in found.days if row.job_id is not None]

    async def _spent_so_far(self, key: str) -> Spend:
        """What the session's jobs spent this UTC day and month, and an estimate of one run
        (the month's mean): where a budget given to it later starts.
        """
        now = self._clock.now()
        today = now.astimezone(UTC).date()
        day, month = UsageSum(), UsageSum()
        for at, row in await self._jobs_usage(key, today.replace(day=1), today):
            month.merge(row)
            if at == today:
                day.merge(row)
        runs = month.runs
        tokens = month.input_tokens + month.output_tokens
        return replace(
            spend_at(None, now),
            day_usd=round(day.cost_usd or 0.0, 6),
            day_tokens=day.input_tokens + day.output_tokens,
            month_usd=round(month.cost_usd or 0.0, 6),
            month_tokens=tokens,
            est_usd=round((month.cost_usd or 0.0) / runs, 6) if runs else 0.0,
            est_tokens=round(tokens / runs) if runs else 0,
            est_runs=min(runs, ESTIMATE_RUNS),
        )

    async def usage_of(self, key: str) -> dict[str, Any]:
        """`usage` of an existing session (SessionNotFoundError): what the API answers."""
        await self.get(key)
        return await self.usage(key)

    async def turn(self, turn_id: str) -> Turn:
        return await self._records.get_turn(turn_id)

    async def wait_turn(self, turn_id: str, seconds: float) -> Turn:
        """The turn once it has ended, or as it is after `seconds`."""
        with self._lanes.turn_waiters.watch(turn_id) as done:
            return await wait_for(
                lambda: self.turn(turn_id),
                lambda t: t.state.terminal,
                done,
                seconds,
                self._stopping,
            )

    async def turn_detail(self, turn_id: str, *, wait: float = 0.0) -> TurnDetail:
        """The turn (after waiting up to `wait` s for its end) with its reply's text."""
        turn = await self.wait_turn(turn_id, wait) if wait else await self.turn(turn_id)
        reply = None
        if turn.reply_message_id is not None:
            message = await self._records.get_message(turn.reply_message_id)
            reply = None if message is None else message.content
        return TurnDetail(turn, reply)

    async def stop(self, key: str) -> bool:
        """Stop the session's running turn (user or scheduled)."""
        return await self._lanes.stop(key)

    async def stop_running(self, key: str) -> tuple[bool, str | None]:
        """Stop the existing session's running turn: (stopped, the turn's id)."""
        await self.get(key)
        running = self.running_turn(key)
        return await self._lanes.stop(key), running

    async def delete(self, key: str, *, confirm: bool = False) -> Deletion:
        """Delete a session. With bound automations it is two-step: without `confirm` nothing
        is deleted and the blocking automations are listed; with it they go first. Done ones
        (their schedule spent) go with it without blocking; system jobs and delivery jobs
        (with target fields) never block; the session's recall is cancelled with it. Its
        pending approvals expire ("session deleted": nothing they asked for runs; the records
        stay, decided, until pruned like its runs) before its running turn is stopped. Live
        views are told (`SessionDeleted`).
        """
        await self._records.get_session(key)
        owned = await self._jobs.list(session_key=key)
        automations = [j for j in owned if j.kind is JobKind.AGENT_TURN and not j.has_target_fields]
        blocking = [j for j in automations if j.status is not JobStatus.DONE]
        if blocking and not confirm:
            return Deletion(False, blocking=blocking)
        for job in [*automations, *(j for j in owned if j.kind is JobKind.RECALL)]:
            await self._jobs.delete(job.id)
        if self._end_approvals is not None:
            await self._end_approvals(key)
        await self._lanes.stop(key)
        await self._records.delete_session(key)
        await self._publish(SessionDeleted(session_key=key))
        return Deletion(True, deleted_automations=[j.id for j in automations])

    # -- the session's recall (seed 003) ----------------------------------------------------

    async def recall(self, key: str) -> Job | None:
        """The session's pending recall, if any."""
        await self.get(key)
        recalls = await self._jobs.list(session_key=key, kind=JobKind.RECALL)
        return recalls[0] if recalls else None

    async def recalls(
        self, key: str, *, states: Iterable[RecallState] | None = None, limit: int = 100
    ) -> builtins.list[Recall]:
        """The existing session's recalls: pending, then fired or cancelled, newest first."""
        await self.get(key)
        return await self._jobs.recalls(key, states=states, limit=limit)

    async def cancel_recall(self, key: str) -> Job:
        recall = await self.recall(key)
        if recall is None:
            raise RecallNotFoundError(key)
        return await self._jobs.delete(recall.id)

    async def skip_recall(self, key: str) -> Job:
        """Skip the next occurrence of the session's recurring recall."""
        recall = await self.recall(key)
        if recall is None:
            raise RecallNotFoundError(key)
        if not isinstance(recall.spec, EverySpec):
            raise ConflictError(
                "only a recurring recall can skip an occurrence; cancel a one-time recall instead"
            )
        return await self._jobs.skip_next(recall.id)


def _check_text(text: str) -> None:
    if not text.strip():
        raise InvalidInputError("a message needs some content")
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidInputError(
            f"a message has at most {MAX_MESSAGE_CHARS} characters (this one has {len(text)})"
        )
    check_text(text, "the message")


def _title(content: str, words: int = 8, chars: int = 60) -> str:
    text = " ".join(content.split()[:words])
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"
