"""standing approvals: a job's grants (tool + argument pattern + expiry, made by a person);
an approval keeps the job of the scheduled run that asked, the grant that approved it, and
when its channel was reminded

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_grants",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "job_id",
            sa.String(32),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("tool", sa.Text, nullable=False),
        sa.Column("args", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted_by", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_job_grants_job", "job_grants", ["job_id", "created_at"])
    # Approvals kept so far: no job known, none approved by a grant, none reminded.
    op.add_column("approvals", sa.Column("job_id", sa.String(32)))
    op.add_column("approvals", sa.Column("grant_id", sa.String(32)))
    op.add_column("approvals", sa.Column("reminded_at", sa.DateTime(timezone=True)))
    op.create_index("ix_approvals_job_state", "approvals", ["job_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_approvals_job_state", table_name="approvals")
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    op.drop_column("approvals", "reminded_at")
    op.drop_column("approvals", "grant_id")
    op.drop_column("approvals", "job_id")
    op.drop_index("ix_job_grants_job", table_name="job_grants")
    op.drop_table("job_grants")
