"""Migration 0033: the jobs' due index holds the id after the due time (`ix_jobs_due`) in place
of the due time alone, on SQLite and PostgreSQL; a kept job is untouched; it goes down and up.
"""

from __future__ import annotations

import warnings

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from tests.conftest import T0
from tests.helpers.migrations import INSERT_JOB

pytestmark = pytest.mark.fresh_db


def _indexes(conn: sa.Connection) -> dict[str, list[str]]:
    """The jobs table's indexes on its due time: name -> columns."""
    with warnings.catch_warnings():
        # SQLite cannot reflect the expression index on idempotency keys: it says so and skips it
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        found = sa.inspect(conn).get_indexes("jobs")
    return {
        str(ix["name"]): [str(c) for c in ix["column_names"]]
        for ix in found
        if "next_run_at" in ix["column_names"]
    }


def test_the_due_index_holds_the_id_and_goes_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0032")
            assert _indexes(conn) == {"ix_jobs_next_run_at": ["next_run_at"]}
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0033")
            assert current_revision(conn) == "0033"
            assert _indexes(conn) == {"ix_jobs_due": ["next_run_at", "id"]}
            assert conn.execute(sa.text("SELECT name FROM jobs")).scalars().all() == ["ping"]
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0032")
            assert _indexes(conn) == {"ix_jobs_next_run_at": ["next_run_at"]}
            upgrade_connection(conn, "0033")
            assert _indexes(conn) == {"ix_jobs_due": ["next_run_at", "id"]}
    finally:
        engine.dispose()
