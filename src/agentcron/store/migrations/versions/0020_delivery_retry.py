"""a delivery record keeps the far end's id of the delivered message, and when a failed
delivery was last re-sent by hand (its deadline counts from then)

Revision ID: 0020
Revises: 0021
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("external_id", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("retried_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("retried_at")
        batch_op.drop_column("external_id")
