"""turn owner (restart recovery of turns) and the delivery record of legacy runs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner", sa.Text(), nullable=True))
    op.create_index("ix_turns_state", "turns", ["state"], unique=False)
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delivery", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("delivery")
    op.drop_index("ix_turns_state", table_name="turns")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_column("owner")
