"""adaptive cadence: a job's bounds within which the agent may move its next fire
(cadence_min_s, cadence_max_s, allowed_hours), its last move (rescheduled), and the moves a
run's turn made (runs.reschedules)

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every job kept so far has no bounds: the agent may not move it, as before.
    op.add_column("jobs", sa.Column("cadence_min_s", sa.Integer, nullable=True))
    op.add_column("jobs", sa.Column("cadence_max_s", sa.Integer, nullable=True))
    op.add_column("jobs", sa.Column("allowed_hours", sa.String(16), nullable=True))
    op.add_column("jobs", sa.Column("rescheduled", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("runs", sa.Column("reschedules", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    op.drop_column("runs", "reschedules")
    op.drop_column("jobs", "rescheduled")
    op.drop_column("jobs", "allowed_hours")
    op.drop_column("jobs", "cadence_max_s")
    op.drop_column("jobs", "cadence_min_s")
