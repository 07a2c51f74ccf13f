"""Migration 0025: the grants table and the approvals' job, grant and reminder columns (the
approvals kept so far have none), on SQLite and PostgreSQL; it goes down and up again.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from tests.conftest import T0
from tests.helpers.migrations import columns

pytestmark = pytest.mark.fresh_db

_INSERT = sa.text(
    "INSERT INTO approvals (id, session_key, turn_id, tool, args, requested_at, expires_at, "
    "state) VALUES ('A1', 'api:x', 'T1', 'touch', '{}', :at, :at, 'pending')"
)


def test_grants_come_and_go_and_kept_approvals_have_no_job(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0024")
            assert "job_grants" not in sa.inspect(conn).get_table_names()
            conn.execute(_INSERT, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0025")
            assert current_revision(conn) == "0025"
            assert {"job_id", "grant_id", "reminded_at"} <= columns(conn, "approvals")
            assert "job_grants" in sa.inspect(conn).get_table_names()
            kept = conn.execute(
                sa.text("SELECT job_id, grant_id, reminded_at FROM approvals WHERE id = 'A1'")
            ).one()
            assert tuple(kept) == (None, None, None)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0024")
            assert current_revision(conn) == "0024"
            assert "job_grants" not in sa.inspect(conn).get_table_names()
            assert "job_id" not in columns(conn, "approvals")
            upgrade_connection(conn, "0025")
            assert "job_grants" in sa.inspect(conn).get_table_names()
            assert "reminded_at" in columns(conn, "approvals")
    finally:
        engine.dispose()
