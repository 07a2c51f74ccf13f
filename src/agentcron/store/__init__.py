"""Internal: the durable store: one narrow async interface over SQL (SQLite default, PostgreSQL).

Public names: the store protocols are in `agentcron.interfaces` (`agentcron.FireLedger`,
`agentcron.DeliveryLedger`, ...), the signals' `agentcron.Topic`, and the errors in `agentcron`
(`agentcron.StoreError`, `agentcron.JobNotFoundError`, ...); `agentcron.AgentCron` builds the
store (`cron.store`).
"""

from agentcron.store.errors import (
    ConflictError,
    JobLimitError,
    JobNotFoundError,
    ProtectedJobError,
    RecallNotFoundError,
    RunNotFoundError,
    SessionNotFoundError,
    StoreError,
    TurnNotFoundError,
    VersionConflictError,
)
from agentcron.store.ids import new_id
from agentcron.store.session_store import SessionStore
from agentcron.store.sql import SqlStore, sqlite_url
from agentcron.store.writes import ArmedJob, JobOutcome, Transition

__all__ = [
    "ArmedJob",
    "ConflictError",
    "JobLimitError",
    "JobNotFoundError",
    "JobOutcome",
    "ProtectedJobError",
    "RecallNotFoundError",
    "RunNotFoundError",
    "SessionNotFoundError",
    "SessionStore",
    "SqlStore",
    "StoreError",
    "Transition",
    "TurnNotFoundError",
    "VersionConflictError",
    "new_id",
    "sqlite_url",
]
