"""Migration 0030: the jobs kept so far have no budget, continue their conversation and may
use every tool, on SQLite and PostgreSQL; it goes down and up again.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from tests.conftest import T0

pytestmark = pytest.mark.fresh_db

_INSERT = sa.text(
    "INSERT INTO jobs (id, name, kind, spec, created_by, overlap, catchup, catchup_window_s, "
    "max_failures, created_at, updated_at) VALUES ('J1', 'ping', 'agent_turn', '{}', 'user', "
    "'skip', 'skip', 0, 3, :at, :at)"
)
_NEW = {"budget", "spend", "context", "history_tokens", "tools"}
_READ = sa.text("SELECT budget, spend, context, history_tokens, tools FROM jobs WHERE id = 'J1'")


def _columns(conn: sa.Connection) -> set[str]:
    return {c["name"] for c in sa.inspect(conn).get_columns("jobs")}


def test_kept_jobs_have_no_budget_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0029")
            assert not _NEW & _columns(conn)
            conn.execute(_INSERT, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0030")
            assert current_revision(conn) == "0030"
            assert tuple(conn.execute(_READ).one()) == (None, None, "continue", None, None)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0029")
            assert current_revision(conn) == "0029"
            assert not _NEW & _columns(conn)
            upgrade_connection(conn, "0030")
            assert _columns(conn) >= _NEW
            assert tuple(conn.execute(_READ).one()) == (None, None, "continue", None, None)
    finally:
        engine.dispose()
