"""Migration 0031: the sessions kept so far have no quiet hours and the jobs kept so far hold
their delivery in them (the default), on SQLite and PostgreSQL; it goes down and up again.
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

_SESSION = sa.text(
    "INSERT INTO sessions (session_key, channel, chat_id, created_at, updated_at) "
    "VALUES ('telegram:1', 'telegram', '1', :at, :at)"
)
_READ = sa.text(
    "SELECT j.quiet, s.quiet_hours FROM jobs j, sessions s "
    "WHERE j.id = 'J1' AND s.session_key = 'telegram:1'"
)


def test_kept_sessions_are_never_quiet_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0030")
            assert "quiet" not in columns(conn, "jobs")
            assert "quiet_hours" not in columns(conn, "sessions")
            conn.execute(INSERT_JOB, {"at": T0})
            conn.execute(_SESSION, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0031")
            assert current_revision(conn) == "0031"
            assert tuple(conn.execute(_READ).one()) == ("hold", None)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0030")
            assert current_revision(conn) == "0030"
            assert "quiet" not in columns(conn, "jobs")
            assert "quiet_hours" not in columns(conn, "sessions")
            upgrade_connection(conn, "0031")
            assert tuple(conn.execute(_READ).one()) == ("hold", None)
    finally:
        engine.dispose()
