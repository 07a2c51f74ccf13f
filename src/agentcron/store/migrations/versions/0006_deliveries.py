"""durable delivery records of outbound channels (webhook, Telegram)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("channel", "message_id"),
    )
    op.create_index("ix_deliveries_state", "deliveries", ["state", "channel"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_deliveries_state", table_name="deliveries")
    op.drop_table("deliveries")
