"""quiet hours: a session's quiet hours in its zone (`sessions.quiet_hours`, "HH:MM-HH:MM";
null: none) and what a job's fire due in them does (`jobs.quiet`: hold | silent | wait)

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every session kept so far has no quiet hours; every job holds its delivery (the default).
    op.add_column("sessions", sa.Column("quiet_hours", sa.String(11)))
    op.add_column("jobs", sa.Column("quiet", sa.String(8), nullable=False, server_default="hold"))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    op.drop_column("jobs", "quiet")
    op.drop_column("sessions", "quiet_hours")
