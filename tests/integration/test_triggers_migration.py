"""Migration 0029: jobs kept so far have no trigger, runs no event, and no event id is seen; it
goes down and up again, on SQLite and PostgreSQL.
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


def _has_events_table(conn: sa.Connection) -> bool:
    return "trigger_events" in sa.inspect(conn).get_table_names()


def test_kept_jobs_have_no_trigger_and_the_migration_goes_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0028")
            assert "trigger_secret" not in columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0029")
            assert current_revision(conn) == "0029"
            secret = conn.execute(sa.text("SELECT trigger_secret FROM jobs WHERE id = 'J1'"))
            assert secret.scalar() is None
            assert {"event_id", "event"} <= columns(conn, "runs")
            assert _has_events_table(conn)
            row = {"at": T0}
            conn.execute(
                sa.text(
                    "INSERT INTO trigger_events (job_id, event_id, run_id, received_at, "
                    "expires_at) VALUES ('J1', 'e1', 'R1', :at, :at)"
                ),
                row,
            )
            with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
                conn.execute(
                    sa.text(
                        "INSERT INTO trigger_events (job_id, event_id, run_id, received_at, "
                        "expires_at) VALUES ('J1', 'e1', 'R2', :at, :at)"
                    ),
                    row,
                )
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0028")
            assert current_revision(conn) == "0028"
            assert "trigger_secret" not in columns(conn, "jobs")
            assert not ({"event_id", "event"} & columns(conn, "runs"))
            assert not _has_events_table(conn)
            upgrade_connection(conn, "0029")
            assert "trigger_secret" in columns(conn, "jobs")
            assert _has_events_table(conn)
    finally:
        engine.dispose()
