"""approvals of gated tool calls survive a restart; a run keeps its turn's tool calls (issue 15)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(length=36), primary_key=True),
        sa.Column("session_key", sa.Text()),
        sa.Column("turn_id", sa.String(length=32)),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("args", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decision", sa.String(length=16)),
        sa.Column("decided_by", sa.Text()),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
    )
    op.create_index(
        "ix_approvals_session_state", "approvals", ["session_key", "state", "requested_at"]
    )
    op.create_index("ix_approvals_state", "approvals", ["state", "requested_at"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("tool_calls", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("tool_calls")
    op.drop_index("ix_approvals_state", table_name="approvals")
    op.drop_index("ix_approvals_session_state", table_name="approvals")
    op.drop_table("approvals")
