"""The SQLAlchemy Core store: the only package that speaks SQL (SQLite default, PostgreSQL).

`SqlStore` is its parts joined: jobs (`job_store`), the fire ledger (claims in `fire_store`,
recovery in `fire_recovery`), the group commit (`commit_store`), run records (`run_store`),
owner liveness (`owners`), the alert sweep's reads (`alert_store`) over one database
(`sql_base`); rows become models in `rows`. Its users are typed against `store/interface.py`.
"""

from __future__ import annotations

from agentcron.store.alert_store import AlertsMixin
from agentcron.store.commit_store import GroupCommitMixin
from agentcron.store.fire_recovery import FireLedgerMixin
from agentcron.store.owners import OwnersMixin
from agentcron.store.rows import (
    FINISH_COLUMNS,
    USAGE_COLUMNS,
    job_after_claim,
    job_with,
    sqlite_url,
    usage_numbers,
)
from agentcron.store.run_store import RunsMixin

__all__ = [
    "FINISH_COLUMNS",
    "USAGE_COLUMNS",
    "SqlStore",
    "job_after_claim",
    "job_with",
    "sqlite_url",
    "upgrade_and_count",
    "usage_numbers",
]


class SqlStore(GroupCommitMixin, FireLedgerMixin, RunsMixin, OwnersMixin, AlertsMixin):
    """Jobs and runs in one SQL database, behind a narrow async interface.

    SQLite: one writer connection (every write transaction is `BEGIN IMMEDIATE`, so writers
    queue in-process instead of failing with "database is locked"), WAL, a busy timeout for
    other processes, and a small pool of readers.
    """


async def upgrade_and_count(url: str) -> tuple[str | None, int, int]:
    """Open (creating or upgrading the schema of) the database at `url`: its schema revision,
    and how many jobs and runs it holds. For `agentcron db upgrade`.
    """
    store = SqlStore(url)
    try:
        await store.open()
        return await store.schema_revision(), await store.count_jobs(), await store.count_runs()
    finally:
        await store.close()
