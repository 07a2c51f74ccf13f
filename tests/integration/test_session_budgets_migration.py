"""Migration 0032: the sessions kept so far have no budget (their jobs fire as before), on
SQLite and PostgreSQL; it goes down and up again.
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
    "INSERT INTO sessions (session_key, channel, chat_id, created_at, updated_at) "
    "VALUES ('api:one', 'api', 'one', :at, :at)"
)
_NEW = {"budget", "spend", "budget_noticed"}
_READ = sa.text("SELECT budget, spend, budget_noticed FROM sessions WHERE session_key = 'api:one'")


def test_kept_sessions_have_no_budget_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0031")
            assert not _NEW & columns(conn, "sessions")
            conn.execute(_INSERT, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0032")
            assert current_revision(conn) == "0032"
            assert tuple(conn.execute(_READ).one()) == (None, None, None)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0031")
            assert current_revision(conn) == "0031"
            assert not _NEW & columns(conn, "sessions")
            upgrade_connection(conn, "0032")
            assert columns(conn, "sessions") >= _NEW
            assert tuple(conn.execute(_READ).one()) == (None, None, None)
    finally:
        engine.dispose()
