"""Migration 0027: the jobs kept so far have no cadence bounds (the agent may not move them)
and no move, the runs none either, on SQLite and PostgreSQL; it goes down and up again.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from tests.conftest import T0
from tests.helpers.migrations import INSERT_JOB, columns

pytestmark = pytest.mark.fresh_db

_NEW_JOB_COLUMNS = {"cadence_min_s", "cadence_max_s", "allowed_hours", "rescheduled"}


def test_kept_jobs_have_no_bounds_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    read = sa.text(
        "SELECT cadence_min_s, cadence_max_s, allowed_hours, rescheduled FROM jobs WHERE id = 'J1'"
    )
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0026")
            assert not _NEW_JOB_COLUMNS & columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0027")
            assert current_revision(conn) == "0027"
            assert tuple(conn.execute(read).one()) == (None, None, None, None)
            assert "reschedules" in columns(conn, "runs")
            conn.execute(sa.text("UPDATE jobs SET cadence_min_s = 1800 WHERE id = 'J1'"))
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0026")
            assert current_revision(conn) == "0026"
            assert not _NEW_JOB_COLUMNS & columns(conn, "jobs")
            assert "reschedules" not in columns(conn, "runs")
            upgrade_connection(conn, "0027")
            assert tuple(conn.execute(read).one()) == (None, None, None, None)
    finally:
        engine.dispose()
