"""fired and cancelled recalls stay readable (seed 003)

Revision ID: 0011
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recall_history",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("spec", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True)),
        sa.Column("last_status", sa.String(length=16)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_recall_history_session", "recall_history", ["session_key", "ended_at"])


def downgrade() -> None:
    op.drop_index("ix_recall_history_session", table_name="recall_history")
    op.drop_table("recall_history")
