"""a recall keeps its call type and its whole internal comment (seed 003), also once it ended

Revision ID: 0021
Revises: 0017
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_TABLES = ("jobs", "recall_history")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("call_type", sa.String(length=16), nullable=True))
        op.add_column(table, sa.Column("internal_comment", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): no table copy that could lose the
    # partial indexes of `jobs`.
    for table in _TABLES:
        op.drop_column(table, "internal_comment")
        op.drop_column(table, "call_type")
