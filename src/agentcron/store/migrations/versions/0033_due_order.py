"""due order: the jobs' due index holds the job id after the due time (`ix_jobs_due`), so that
jobs due at one instant are claimed in the order they were made (ids grow with time), on
PostgreSQL as on SQLite, without a sort of every job due at that instant

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_due", "jobs", ["next_run_at", "id"])
    # The new index serves every read the old one did (its first column is the same).
    op.drop_index("ix_jobs_next_run_at", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_next_run_at", "jobs", ["next_run_at"])
    op.drop_index("ix_jobs_due", table_name="jobs")
