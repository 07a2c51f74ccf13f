"""a session or a job may name its own runner URL (issue 27)

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_TABLES = ("jobs", "sessions")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("runner_url", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): no table copy that could lose the
    # partial indexes of `jobs`.
    for table in _TABLES:
        op.drop_column(table, "runner_url")
