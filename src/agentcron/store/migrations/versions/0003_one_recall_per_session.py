"""at most one pending recall per session

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ux_jobs_one_recall_per_session",
        "jobs",
        ["session_key"],
        unique=True,
        sqlite_where=sa.text("kind = 'recall'"),
        postgresql_where=sa.text("kind = 'recall'"),
    )


def downgrade() -> None:
    op.drop_index("ux_jobs_one_recall_per_session", table_name="jobs")
