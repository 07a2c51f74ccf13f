"""safe to leave running: a job's alert state (overdue since, failing since, its end
announced), persisted so an alert is sent once per episode across restarts and replicas; the
indexes the alert sweep's candidate queries read

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

_COLUMNS = ("overdue_since", "failing_since", "ending_warned_at")
_INDEXES = {
    "ix_jobs_failures": "consecutive_failures",
    "ix_jobs_end_at": "end_at",
    "ix_jobs_remaining_runs": "remaining_runs",
    "ix_jobs_overdue_since": "overdue_since",
    "ix_jobs_failing_since": "failing_since",
}


def upgrade() -> None:
    for name in _COLUMNS:
        op.add_column("jobs", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    for index, column in _INDEXES.items():
        op.create_index(index, "jobs", [column])


def downgrade() -> None:
    for index in _INDEXES:
        op.drop_index(index, table_name="jobs")
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    for name in _COLUMNS:
        op.drop_column("jobs", name)
