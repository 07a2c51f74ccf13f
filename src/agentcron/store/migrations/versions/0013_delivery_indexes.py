"""indexes for listing delivery records newest first, by session or all (GET /api/deliveries)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_deliveries_session", "deliveries", ["session_key", "created_at"], unique=False
    )
    op.create_index("ix_deliveries_created", "deliveries", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_deliveries_created", table_name="deliveries")
    op.drop_index("ix_deliveries_session", table_name="deliveries")
