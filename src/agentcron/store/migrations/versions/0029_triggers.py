"""event-fired jobs: a job's trigger secret, the event that fired a run, and the event ids a
trigger has seen (one run per id, in any process)

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("trigger_secret", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("event_id", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("event", sa.Text(), nullable=True))
    op.create_table(
        "trigger_events",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("event_id", sa.Text(), primary_key=True),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_trigger_events_expires", "trigger_events", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_trigger_events_expires", table_name="trigger_events")
    op.drop_table("trigger_events")
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    op.drop_column("runs", "event")
    op.drop_column("runs", "event_id")
    op.drop_column("jobs", "trigger_secret")
