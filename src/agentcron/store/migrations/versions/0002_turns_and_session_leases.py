"""turns, session time zone and session leases

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tz", sa.Text(), server_default="UTC", nullable=False))
        batch_op.add_column(sa.Column("turn_owner", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("turn_id", sa.String(length=32), nullable=True))
        batch_op.add_column(
            sa.Column("turn_lease_expires_at", sa.DateTime(timezone=True), nullable=True)
        )
    op.create_table(
        "turns",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_details", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("usage", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("reply_message_id", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(["session_key"], ["sessions.session_key"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_turns_session_key", "turns", ["session_key"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_turns_session_key", table_name="turns")
    op.drop_table("turns")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("turn_lease_expires_at")
        batch_op.drop_column("turn_id")
        batch_op.drop_column("turn_owner")
        batch_op.drop_column("tz")
