"""Migration 0026: the jobs kept so far have no alert open (their columns NULL, indexed), on
SQLite and PostgreSQL; it goes down and up again.
"""

from __future__ import annotations

import warnings

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from tests.conftest import T0
from tests.helpers.migrations import INSERT_JOB, columns

pytestmark = pytest.mark.fresh_db

_ALERTS = {"overdue_since", "failing_since", "ending_warned_at"}


def _indexes(conn: sa.Connection) -> set[str]:
    with warnings.catch_warnings():  # SQLite cannot reflect the expression index: skipped
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        return {str(i["name"]) for i in sa.inspect(conn).get_indexes("jobs")}


def test_kept_jobs_have_no_alert_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0025")
            assert not _ALERTS & columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0026")
            assert current_revision(conn) == "0026"
            row = conn.execute(
                sa.text("SELECT overdue_since, failing_since, ending_warned_at FROM jobs")
            ).one()
            assert tuple(row) == (None, None, None)
            assert {"ix_jobs_failures", "ix_jobs_overdue_since"} <= _indexes(conn)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0025")
            assert current_revision(conn) == "0025"
            assert not _ALERTS & columns(conn, "jobs")
            assert "ix_jobs_failures" not in _indexes(conn)
            upgrade_connection(conn, "0026")
            assert columns(conn, "jobs") >= _ALERTS
            assert conn.execute(sa.text("SELECT count(*) FROM jobs")).scalar() == 1
    finally:
        engine.dispose()
