"""speak only when it matters (issue 29): a job's notify policy (always | changes |
never-empty); the runs keep why an outcome was not delivered in their `delivery` record

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every job kept so far delivers every outcome, as before.
    op.add_column(
        "jobs",
        sa.Column("notify", sa.String(16), nullable=False, server_default="always"),
    )


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0023's downgrade.
    op.drop_column("jobs", "notify")
