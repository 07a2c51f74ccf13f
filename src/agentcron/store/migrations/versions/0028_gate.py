"""a job's pre-check gate (domain/gates.py): a command, an HTTP GET or a Python entry point run
before the agent; NULL: none

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every job kept so far has no gate.
    op.add_column("jobs", sa.Column("gate", sa.JSON(none_as_null=True)))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    op.drop_column("jobs", "gate")
