"""Migration 0023: the runs kept so far get their job's name, on SQLite and PostgreSQL; it
goes down and up again.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from agentcron.store.database import sync_url
from agentcron.store.migrate import alembic_config, current_revision, upgrade_connection
from agentcron.store.schema import jobs, runs
from tests.conftest import T0

pytestmark = pytest.mark.fresh_db

_JOB = {
    "id": "J1", "name": "ping", "kind": "agent_turn", "spec": {}, "created_by": "user",
    "overlap": "skip", "catchup": "skip", "catchup_window_s": 0, "max_failures": 3,
    "created_at": T0, "updated_at": T0,
}  # fmt: skip


def test_kept_runs_get_their_job_name_and_a_deleted_job_s_stay_unnamed(store_url: str) -> None:
    engine = sa.create_engine(sync_url(store_url))
    try:
        with engine.begin() as conn:
            upgrade_connection(conn, "0022")
            conn.execute(jobs.insert(), _JOB)
            for run_id, job_id in (("R1", "J1"), ("R2", "GONE")):  # GONE: deleted before
                conn.execute(
                    runs.insert().values(id=run_id, job_id=job_id, fire_at=T0, state="succeeded")
                )
        with engine.begin() as conn:
            upgrade_connection(conn, "0023")
            assert current_revision(conn) == "0023"
            named = conn.execute(sa.text("SELECT id, job_name FROM runs ORDER BY id")).all()
            assert [tuple(r) for r in named] == [("R1", "ping"), ("R2", None)]
        with engine.begin() as conn:  # down and up again
            command.downgrade(alembic_config(conn), "0022")
            columns = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
            assert "job_name" not in columns
            upgrade_connection(conn, "0023")
            indexes = {i["name"] for i in sa.inspect(conn).get_indexes("runs")}
            assert {"ix_runs_fire", "ix_runs_session_fire"} <= indexes
    finally:
        engine.dispose()
