"""indexes that keep a claim and the prune flat as sessions and jobs grow: a session's open
turns and a job's active runs without reading their finished ones, and the terminal runs
finished (and the recalls ended) before a time without reading every one kept

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_turns_session_state", "turns", ["session_key", "state"])
    op.drop_index("ix_turns_session_key", table_name="turns")
    op.create_index("ix_runs_state_finished", "runs", ["state", "finished_at"])
    op.create_index("ix_runs_job_state", "runs", ["job_id", "state"])
    op.drop_index("ix_runs_state", table_name="runs")
    op.drop_index("ix_runs_finished_at", table_name="runs")
    op.create_index("ix_recall_history_ended", "recall_history", ["ended_at"])


def downgrade() -> None:
    op.drop_index("ix_recall_history_ended", table_name="recall_history")
    op.create_index("ix_runs_finished_at", "runs", ["finished_at"])
    op.create_index("ix_runs_state", "runs", ["state"])
    op.drop_index("ix_runs_job_state", table_name="runs")
    op.drop_index("ix_runs_state_finished", table_name="runs")
    op.create_index("ix_turns_session_key", "turns", ["session_key"])
    op.drop_index("ix_turns_session_state", table_name="turns")
