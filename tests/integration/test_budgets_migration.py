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
from tests.helpers.migrations import INSERT_JOB, columns

pytestmark = pytest.mark.fresh_db

_NEW = {"budget", "spend", "context", "history_tokens", "tools"}
_READ = sa.text("SELECT budget, spend, context, history_tokens, tools FROM jobs WHERE id = 'J1'")


def test_kept_jobs_have_no_budget_and_the_columns_go_down_and_up(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0029")
            assert not _NEW & columns(conn, "jobs")
            conn.execute(INSERT_JOB, {"at": T0})
        with engine.begin() as conn:
            upgrade_connection(conn, "0030")
            assert current_revision(conn) == "0030"
            assert tuple(conn.execute(_READ).one()) == (None, None, "continue", None, None)
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0029")
            assert current_revision(conn) == "0029"
            assert not _NEW & columns(conn, "jobs")
            upgrade_connection(conn, "0030")
            assert columns(conn, "jobs") >= _NEW
            assert tuple(conn.execute(_READ).one()) == (None, None, "continue", None, None)
    finally:
        engine.dispose()
