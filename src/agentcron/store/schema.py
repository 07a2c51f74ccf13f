"""Table definitions (SQLAlchemy Core), shared by the store and the Alembic migrations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every backend.

    SQLite keeps them as fixed-width naive UTC text (`YYYY-MM-DD HH:MM:SS.ffffff`, the format
    SQLAlchemy's SQLite DATETIME writes), so comparisons and indexes order correctly. The text
    is made and read here directly: one conversion per value instead of two on the hot path.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        # One plain function per value on SQLite's hot paths (every run, turn and message
        # carries several times): the same conversion as process_bind_param, one call less.
        # A batch stamps many rows with the same few instants (a claim's `now` and lease,
        # a group commit's times): their text is made once (a small cache, emptied when
        # full; a dict's get and set are atomic for the database threads).
        made: dict[datetime, str] = {}

        def bind_sqlite(value: datetime | None) -> str | None:
            if value is None:
                return None
            text = made.get(value)
            if text is not None and value.tzinfo is UTC:
                return text
            if value.tzinfo is not UTC:
                if value.tzinfo is None:
                    raise ValueError(f"naive datetime {value!r} given to the store; use aware UTC")
                value = value.astimezone(UTC)
            text = value.isoformat(sep=" ", timespec="microseconds")[:-6]
            if len(made) >= 4096:
                made.clear()
            made[value] = text
            return text

        return bind_sqlite

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        # One plain function per value, as for binding; a batch reads many rows stamped
        # with the same few instants (a claim's due times, a session's last entry): each text
        # is parsed once (datetimes are immutable; a small cache, emptied when full).
        read: dict[str, datetime] = {}

        def result_sqlite(value: Any) -> datetime | None:
            if value is None:
                return None
            found = read.get(value) if isinstance(value, str) else None
            if found is not None:
                return found
            parsed = self.process_result_value(value, dialect)
            if isinstance(value, str) and parsed is not None:
                if len(read) >= 4096:
                    read.clear()
                read[value] = parsed
            return parsed

        return result_sqlite

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given to the store; use aware UTC")
        if value.tzinfo is not UTC:
            value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            # "YYYY-MM-DD HH:MM:SS.ffffff+00:00" without its offset
            return value.isoformat(sep=" ", timespec="microseconds")[:-6]
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if not isinstance(value, datetime):
            raise TypeError(f"a stored time is {type(value).__name__}, not a datetime")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JSONText(TypeDecorator[Any]):
    """JSON values (SQLAlchemy's JSON type; Python None is SQL NULL, not the JSON text
    'null', so COALESCE and IS NULL work). On SQLite a value is read by one plain function
    (SQLAlchemy's reader is two calls per column per row, NULL or not, and a claim reads
    several JSON columns of every job and session it touches).
    """

    impl = sa.JSON(none_as_null=True)
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)
        loads = getattr(dialect, "_json_deserializer", None) or json.loads

        def json_sqlite(value: Any) -> Any:
            if value is None:
                return None
            # a bare JSON number comes back as one: the JSON column's numeric affinity
            return loads(value) if isinstance(value, str) else value

        return json_sqlite


JSONValue = JSONText()

metadata = sa.MetaData()

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("session_key", sa.Text, nullable=True),  # NULL = unbound (a delivery job)
    sa.Column("spec", JSONValue, nullable=False),
    sa.Column("message", sa.Text, nullable=False, server_default=""),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("paused_reason", sa.Text),
    sa.Column("paused_at", UTCDateTime),
    sa.Column("created_by", sa.String(16), nullable=False),
    # policies
    sa.Column("overlap", sa.String(16), nullable=False),
    sa.Column("catchup", sa.String(16), nullable=False),
    sa.Column("catchup_window_s", sa.Integer, nullable=False),
    sa.Column("max_failures", sa.Integer, nullable=False),
    sa.Column("max_runs", sa.Integer),
    sa.Column("end_at", UTCDateTime),
    sa.Column("delete_after_run", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("jitter", sa.Boolean, nullable=False, server_default=sa.false()),
    # when its outcomes are delivered (domain/notify.py): always | changes | never-empty
    sa.Column("notify", sa.String(16), nullable=False, server_default="always"),
    # what a fire due in its session's quiet hours does (domain/quiet.py): hold | silent | wait
    sa.Column("quiet", sa.String(8), nullable=False, server_default="hold"),
    # how far the agent may move its next fire (domain/cadence.py; all NULL: it may not)
    sa.Column("cadence_min_s", sa.Integer),
    sa.Column("cadence_max_s", sa.Integer),
    sa.Column("allowed_hours", sa.String(16)),
    # its pre-check gate (domain/gates.py `Gate.as_dict`); NULL: none
    sa.Column("gate", JSONValue),
    # its caps of tokens and money, and (only with caps) its running figures
    # (domain/budgets.py: Budget, Spend)
    sa.Column("budget", JSONValue),
    sa.Column("spend", JSONValue),
    # what history its turns get (continue | summary | fresh), their history budget in
    # tokens (None: the runner's), the tools they may use (None: every tool)
    sa.Column("context", sa.String(16), nullable=False, server_default="continue"),
    sa.Column("history_tokens", sa.Integer),
    sa.Column("tools", JSONValue),
    # schedule state
    sa.Column("next_fire_at", UTCDateTime),
    sa.Column("next_run_at", UTCDateTime),
    sa.Column("last_run_at", UTCDateTime),
    sa.Column("last_status", sa.String(16)),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("run_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("remaining_runs", sa.Integer),
    sa.Column("idempotency_key", sa.Text),
    sa.Column("model", sa.Text),  # the model of its turns; None = the runner's default
    sa.Column("runner_url", sa.Text),  # its fires' own runner URL; None = the session's
    # A recall the agent scheduled: its call type (once | recurring | immediate) and its
    # whole note (the name is the note cut to 80 characters).
    sa.Column("call_type", sa.String(16)),
    sa.Column("internal_comment", sa.Text),
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_expires_at", UTCDateTime),
    sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # delivery fields (delivery jobs only: engine/isolated.py)
    sa.Column("deliver", sa.Boolean),
    sa.Column("channel", sa.Text),
    sa.Column("to", sa.Text),
    sa.Column("channel_meta", JSONValue),
    # set when its last fire ended with no fire left (done); removed `retention_age` later
    sa.Column("finished_at", UTCDateTime),
    # alerts, once per episode (service/alerts.py): since when it is overdue / failing (NULL:
    # not), and when its end was announced (NULL: not yet, or renewed since)
    sa.Column("overdue_since", UTCDateTime),
    sa.Column("failing_since", UTCDateTime),
    sa.Column("ending_warned_at", UTCDateTime),
    # the agent's last move of its next fire (domain/cadence.py `Reschedule`), NULL: none
    sa.Column("rescheduled", JSONValue),
    # its trigger's Standard Webhooks secret (`whsec_...`); NULL: no trigger (migration 0029)
    sa.Column("trigger_secret", sa.Text),
)
# Only armed jobs are in the due index: paused / finished jobs have next_run_at NULL.
# Due order: by due time, then by id (creation order) for jobs due at the same instant.
sa.Index("ix_jobs_due", jobs.c.next_run_at, jobs.c.id)
sa.Index("ix_jobs_session_key", jobs.c.session_key)
# The alert sweep's candidates (store/alert_store.py): each question reads an index range, not
# every job (failing: a failure count past N; ending: an end or a last run near; alerted: the
# jobs with an open episode).
sa.Index("ix_jobs_failures", jobs.c.consecutive_failures)
sa.Index("ix_jobs_end_at", jobs.c.end_at)
sa.Index("ix_jobs_remaining_runs", jobs.c.remaining_runs)
sa.Index("ix_jobs_overdue_since", jobs.c.overdue_since)
sa.Index("ix_jobs_failing_since", jobs.c.failing_since)
# At most one pending recall per session (a fired one-shot recall is deleted after its run).
sa.Index(
    "ux_jobs_one_recall_per_session",
    jobs.c.session_key,
    unique=True,
    sqlite_where=jobs.c.kind == "recall",
    postgresql_where=jobs.c.kind == "recall",
)
sa.Index(
    "ux_jobs_session_idempotency",
    sa.func.coalesce(jobs.c.session_key, ""),
    jobs.c.idempotency_key,
    unique=True,
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    # no foreign key: run history outlives a deleted job until retention prunes it
    sa.Column("job_id", sa.String(32), nullable=False),
    # the job's name when it fired: the history of a deleted job keeps it (migration 0023)
    sa.Column("job_name", sa.Text),
    sa.Column("session_key", sa.Text),
    sa.Column("fire_at", UTCDateTime, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("owner", sa.Text),
    sa.Column("lease_expires_at", UTCDateTime),
    sa.Column("claimed_at", UTCDateTime),
    sa.Column("queued_at", UTCDateTime),
    sa.Column("deferred_at", UTCDateTime),
    sa.Column("started_at", UTCDateTime),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("prompt_ref", JSONValue),
    sa.Column("prompt", sa.Text),
    sa.Column("prompt_vars", JSONValue),
    sa.Column("output", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("error_details", JSONValue),
    sa.Column("message_id", sa.Text),
    sa.Column("usage", JSONValue),
    # usage as numbers too, so totals per job / session are one SUM on every backend
    sa.Column("input_tokens", sa.Integer),
    sa.Column("output_tokens", sa.Integer),
    sa.Column("cost_usd", sa.Float),
    # delivery jobs' runs: the evaluate step's verdict and where the result went
    sa.Column("delivery", JSONValue),
    # a scheduled turn's tool calls (name, args, result, ok, duration_ms; truncated), NULL: none
    sa.Column("tool_calls", JSONValue),
    # a person's "run now", not the schedule (migration 0019)
    sa.Column("manual", sa.Boolean, nullable=False, server_default=sa.false()),
    # the agent's moves of a job's next fire during this run's turn (migration 0027)
    sa.Column("reschedules", JSONValue),
    # an event posted to the job's trigger: its webhook-id and JSON body (migration 0029)
    sa.Column("event_id", sa.Text),
    sa.Column("event", sa.Text),
    sa.UniqueConstraint("job_id", "fire_at", name="uq_runs_job_fire"),
)
# The runs in some states (recovery, leases) and, for the prune by age, the terminal ones that
# finished before a time: a range per state, not every terminal run ever kept.
sa.Index("ix_runs_state_finished", runs.c.state, runs.c.finished_at)
# A few jobs' active fires (the claim's overlap check): their open runs only, not every run
# a job keeps (up to `retention_runs_per_job`).
sa.Index("ix_runs_job_state", runs.c.job_id, runs.c.state)
# The history pages, newest first with ties broken by id: across jobs, and of one session
# (one job's: the (job_id, fire_at) unique index).
sa.Index("ix_runs_fire", runs.c.fire_at, runs.c.id)
sa.Index("ix_runs_session_fire", runs.c.session_key, runs.c.fire_at, runs.c.id)
# At most one manual run of a job not ended yet: a second "run now" loses, in any process.
_MANUAL_PENDING = sa.text("manual AND state IN ('claimed', 'queued', 'deferred', 'running')")
sa.Index(
    "ux_runs_one_manual_pending",
    runs.c.job_id,
    unique=True,
    sqlite_where=_MANUAL_PENDING,
    postgresql_where=_MANUAL_PENDING,
)

# The event ids a job's trigger has seen (migration 0029): the primary key is the authority
# that an id fires once, in any process; kept until `expires_at` (pruned with the runs).
trigger_events = sa.Table(
    "trigger_events",
    metadata,
    sa.Column("job_id", sa.String(32), primary_key=True),
    sa.Column("event_id", sa.Text, primary_key=True),
    sa.Column("run_id", sa.String(32), nullable=False),
    sa.Column("received_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
)
sa.Index("ix_trigger_events_expires", trigger_events.c.expires_at)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("session_key", sa.Text, primary_key=True),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("chat_id", sa.Text, nullable=False),
    sa.Column("channel_meta", JSONValue),
    sa.Column("title", sa.Text),
    sa.Column("tz", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("runner_url", sa.Text),  # its turns' own runner URL; None = the process's runner
    # its quiet hours in its zone, "HH:MM-HH:MM" (schedule/quiet.py); None: none
    sa.Column("quiet_hours", sa.String(11)),
    # which turn owns the session now (a lease, so that several processes share sessions)
    sa.Column("turn_owner", sa.Text),
    sa.Column("turn_id", sa.String(32)),
    sa.Column("turn_lease_expires_at", UTCDateTime),
    # the seq of the newest transcript entry: the next append takes last_seq + 1
    sa.Column("last_seq", sa.Integer, nullable=False, server_default="0"),
    # its caps across its jobs' fires and (only with caps) its running figures
    # (domain/budgets.py: Budget, Spend); `budget_noticed`: the UTC day (YYYY-MM-DD) a fire
    # skipped for them was last told (told at most once a day; a new budget starts over)
    sa.Column("budget", JSONValue),
    sa.Column("spend", JSONValue),
    sa.Column("budget_noticed", sa.String(10)),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)
# The session list's pages: most recently updated first, ties broken by key (migration 0023).
sa.Index("ix_sessions_updated", sessions.c.updated_at, sessions.c.session_key)

turns = sa.Table(
    "turns",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column(
        "session_key",
        sa.Text,
        sa.ForeignKey("sessions.session_key", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("source", sa.String(16), nullable=False),  # user | automation | recall | hook
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(32)),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("started_at", UTCDateTime),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("error", sa.Text),
    sa.Column("error_details", JSONValue),
    sa.Column("usage", JSONValue),
    sa.Column("input_tokens", sa.Integer),
    sa.Column("output_tokens", sa.Integer),
    sa.Column("cost_usd", sa.Float),
    sa.Column("reply_message_id", sa.String(32)),
    # the process that will run (or runs) this turn; NULL = released for another to adopt
    sa.Column("owner", sa.Text),
)
# A session's turns, and its open ones (the claim's busy check) without reading its finished
# ones: a session's turns are never pruned.
sa.Index("ix_turns_session_state", turns.c.session_key, turns.c.state)
sa.Index("ix_turns_state", turns.c.state)
sa.Index("ix_turns_run_id", turns.c.run_id)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column(
        "session_key",
        sa.Text,
        sa.ForeignKey("sessions.session_key", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("meta", JSONValue),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("session_key", "seq", name="uq_messages_session_seq"),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    # one record per (channel, transcript message): a channel never sends a message twice
    sa.Column("channel", sa.Text, primary_key=True),
    sa.Column("message_id", sa.String(32), primary_key=True),
    sa.Column("session_key", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # pending | delivered | failed
    # what to send, kept so that a restart can resume a pending delivery without the event
    sa.Column("payload", JSONValue, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_error", sa.Text),
    sa.Column("next_attempt_at", UTCDateTime),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("delivered_at", UTCDateTime),
    # what the far end answered, kept for a follow-up any process can make (Telegram: the chat
    # and message id of a sent message, which the edit after an approval's decision needs;
    # the parts of a long reply already sent, so a retry elsewhere does not send them again)
    sa.Column("result", JSONValue),
    # the far end's id of the delivered message, and when a failed delivery was last re-sent
    # (its deadline counts from then); migration 0020
    sa.Column("external_id", sa.Text),
    sa.Column("retried_at", UTCDateTime),
)
# Resuming on start reads the pending records of one channel.
sa.Index("ix_deliveries_state", deliveries.c.state, deliveries.c.channel)
# GET /api/deliveries: a session's records, or all, newest first.
sa.Index("ix_deliveries_session", deliveries.c.session_key, deliveries.c.created_at)
sa.Index("ix_deliveries_created", deliveries.c.created_at)

recall_history = sa.Table(
    "recall_history",
    metadata,
    # A recall that ended (fired once, or cancelled), kept readable (seed 003: pending, fired,
    # cancelled); the pending one is the `jobs` row. Pruned with the runs (`retention_age`).
    sa.Column("id", sa.String(32), primary_key=True),  # the recall job's id
    sa.Column("session_key", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("spec", JSONValue, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # fired | cancelled
    sa.Column("run_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_run_at", UTCDateTime),
    sa.Column("last_status", sa.String(16)),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime, nullable=False),
    sa.Column("call_type", sa.String(16)),
    sa.Column("internal_comment", sa.Text),
)
sa.Index("ix_recall_history_session", recall_history.c.session_key, recall_history.c.ended_at)
# The prune (with the runs, every minute): the recalls that ended before a time, not all kept.
sa.Index("ix_recall_history_ended", recall_history.c.ended_at)

approvals = sa.Table(
    "approvals",
    metadata,
    # A gated tool call's approval: pending -> approved | denied | expired (issue 15). No
    # foreign keys: the record outlives its turn and session, as an account of who decided.
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("session_key", sa.Text),
    sa.Column("turn_id", sa.String(32)),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("args", JSONValue, nullable=False),  # bounded by the broker before it is stored
    sa.Column("requested_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # pending | approved | denied | expired
    sa.Column("decision", sa.String(16)),  # approve | deny
    sa.Column("decided_by", sa.Text),
    sa.Column("decided_at", UTCDateTime),
    # the job of the scheduled run that made the call; NULL: a message's turn (migration 0025)
    sa.Column("job_id", sa.String(32)),
    # the standing grant (`job_grants`) that approved it; NULL: a person, or no approval
    sa.Column("grant_id", sa.String(32)),
    # when the session's channel was reminded that a scheduled run waits (at most once)
    sa.Column("reminded_at", UTCDateTime),
)
# GET /api/approvals: the pending ones of a session (or of all), oldest first; reaping.
sa.Index(
    "ix_approvals_session_state",
    approvals.c.session_key,
    approvals.c.state,
    approvals.c.requested_at,
)
sa.Index("ix_approvals_state", approvals.c.state, approvals.c.requested_at)
# GET /api/approvals?all=true: every record, newest first, ties broken by id (migration 0023).
sa.Index("ix_approvals_requested", approvals.c.requested_at, approvals.c.id)
# A job's scheduled run waiting for a person (the job's view), migration 0025.
sa.Index("ix_approvals_job_state", approvals.c.job_id, approvals.c.state)

job_grants = sa.Table(
    "job_grants",
    metadata,
    # A standing approval a person gave a job (domain/grants.py); revoking deletes it, and it
    # goes with its job. The approvals it decided keep its id.
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column(
        "job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("args", JSONValue, nullable=False),  # the argument pattern, checked
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("granted_by", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)
sa.Index("ix_job_grants_job", job_grants.c.job_id, job_grants.c.created_at)


owners = sa.Table(
    "owners",
    metadata,
    # One row per live process that takes leases (an engine: a server, a replica, the relay),
    # renewed by its heartbeat. An owner whose heartbeat is older than the takeover time is
    # dead wherever it ran: its fires, turns, session leases and locks are taken over.
    sa.Column("owner", sa.Text, primary_key=True),  # host:pid:ulid, as in every lease
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),  # engine | relay
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("heartbeat_at", UTCDateTime, nullable=False),
    sa.Index("ix_owners_heartbeat", "heartbeat_at"),
)
