"""a per-session message counter, so appending to a transcript needs no max(seq) read

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("last_seq", sa.Integer(), server_default="0", nullable=False))
    op.execute(
        "UPDATE sessions SET last_seq = COALESCE("
        "(SELECT MAX(seq) FROM messages WHERE messages.session_key = sessions.session_key), 0)"
    )
    # Finding a session's open turns (is it busy?) and a fire's turn (run_id) stay indexed.
    op.create_index("ix_turns_run_id", "turns", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_turns_run_id", table_name="turns")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("last_seq")
