"""run history across jobs, cursors on every list (issue 28): a run keeps its job's name, and
the indexes the newest-first pages read

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_INDEXES = (
    ("ix_runs_fire", "runs", ["fire_at", "id"]),
    ("ix_runs_session_fire", "runs", ["session_key", "fire_at", "id"]),
    ("ix_sessions_updated", "sessions", ["updated_at", "session_key"]),
    ("ix_approvals_requested", "approvals", ["requested_at", "id"]),
)


def upgrade() -> None:
    op.add_column("runs", sa.Column("job_name", sa.Text(), nullable=True))
    # The runs kept so far get their job's name; those of a job already deleted keep NULL
    # (shown as unknown): the name is gone with the job.
    op.execute(
        "UPDATE runs SET job_name = (SELECT jobs.name FROM jobs WHERE jobs.id = runs.job_id)"
    )
    op.drop_index("ix_runs_session_key", table_name="runs")
    for name, table, columns in _INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in reversed(_INDEXES):
        op.drop_index(name, table_name=table)
    op.create_index("ix_runs_session_key", "runs", ["session_key"])
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): no table copy that could lose the
    # partial indexes of `runs`.
    op.drop_column("runs", "job_name")
