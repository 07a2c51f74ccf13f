"""manual runs: a person's "run now" recorded on its run, and at most one not ended per job

Revision ID: 0019
Revises: 0021
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_PENDING = "manual AND state IN ('claimed', 'queued', 'deferred', 'running')"


def upgrade() -> None:
    op.add_column(
        "runs", sa.Column("manual", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_index(
        "ux_runs_one_manual_pending",
        "runs",
        ["job_id"],
        unique=True,
        sqlite_where=sa.text(_PENDING),
        postgresql_where=sa.text(_PENDING),
    )


def downgrade() -> None:
    op.drop_index("ux_runs_one_manual_pending", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("manual")
