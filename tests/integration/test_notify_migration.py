"""Migration 0024: the jobs kept so far deliver every outcome (`notify` = always), on SQLite
and PostgreSQL; it goes down and up again.
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


def test_kept_jobs_deliver_always_and_the_column_goes_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0023")
            assert "notify" not in columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0024")
            assert current_revision(conn) == "0024"
            notify = conn.execute(sa.text("SELECT notify FROM jobs WHERE id = 'J1'")).scalar()
            assert notify == "always"
            conn.execute(sa.text("UPDATE jobs SET notify = 'changes' WHERE id = 'J1'"))
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0023")
            assert current_revision(conn) == "0023"
            assert "notify" not in columns(conn, "jobs")
            upgrade_connection(conn, "0024")
            assert "notify" in columns(conn, "jobs")
            notify = conn.execute(sa.text("SELECT notify FROM jobs WHERE id = 'J1'")).scalar()
            assert notify == "always"
    finally:
        engine.dispose()
