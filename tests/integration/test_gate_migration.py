"""Migration 0028: the jobs kept so far have no gate, on SQLite and PostgreSQL; it goes down
and up again.
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


def test_kept_jobs_have_no_gate_and_the_column_goes_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0027")
            assert "gate" not in columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0028")
            assert current_revision(conn) == "0028"
            gate = conn.execute(sa.text("SELECT gate FROM jobs WHERE id = 'J1'")).scalar()
            assert gate is None
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0027")
            assert current_revision(conn) == "0027"
            assert "gate" not in columns(conn, "jobs")
            upgrade_connection(conn, "0028")
            assert "gate" in columns(conn, "jobs")
    finally:
        engine.dispose()
