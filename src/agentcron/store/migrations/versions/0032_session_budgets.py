"""session budgets: a session's caps of tokens and money across its jobs' fires (`budget`),
its running figures (`spend`, kept only for a session with a budget) and the UTC day a fire
skipped for them was last told (`budget_noticed`)

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

_JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    # Every session kept so far has no budget: its jobs fire as before.
    op.add_column("sessions", sa.Column("budget", _JSON))
    op.add_column("sessions", sa.Column("spend", _JSON))
    op.add_column("sessions", sa.Column("budget_noticed", sa.String(10)))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), as 0030's downgrade.
    for column in ("budget_noticed", "spend", "budget"):
        op.drop_column("sessions", column)
