"""token and cost columns on runs and turns

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("runs", "turns"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("input_tokens", sa.Integer(), nullable=True))
            batch_op.add_column(sa.Column("output_tokens", sa.Integer(), nullable=True))
            batch_op.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    for table in ("runs", "turns"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("cost_usd")
            batch_op.drop_column("output_tokens")
            batch_op.drop_column("input_tokens")
