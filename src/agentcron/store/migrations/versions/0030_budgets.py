"""budgets and per-job context: a job's caps of tokens and money (`budget`) and its running
figures (`spend`, kept only for a job with a budget); what history its turns get (`context`:
continue | summary | fresh), its own history budget (`history_tokens`) and the tools its turns
may use (`tools`, null: every tool)

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

_JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    # Every job kept so far has no budget and continues its conversation, as before.
    op.add_column("jobs", sa.Column("budget", _JSON))
    op.add_column("jobs", sa.Column("spend", _JSON))
    op.add_column(
        "jobs", sa.Column("context", sa.String(16), nullable=False, server_default="continue")
    )
    op.add_column("jobs", sa.Column("history_tokens", sa.Integer))
    op.add_column("jobs", sa.Column("tools", _JSON))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0024's downgrade.
    for column in ("tools", "history_tokens", "context", "spend", "budget"):
        op.drop_column("jobs", column)
