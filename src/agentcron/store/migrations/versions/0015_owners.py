"""every process that takes leases heartbeats an owner row: a replica on any host that stops
heartbeating is dead, wherever it ran

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "owners",
        sa.Column("owner", sa.Text(), primary_key=True),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_owners_heartbeat", "owners", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_owners_heartbeat", table_name="owners")
    op.drop_table("owners")
