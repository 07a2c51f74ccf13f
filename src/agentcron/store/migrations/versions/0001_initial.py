"""initial schema: jobs, runs, sessions, messages

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=True),
        sa.Column("spec", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("message", sa.Text(), server_default="", nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_by", sa.String(length=16), nullable=False),
        sa.Column("overlap", sa.String(length=16), nullable=False),
        sa.Column("catchup", sa.String(length=16), nullable=False),
        sa.Column("catchup_window_s", sa.Integer(), nullable=False),
        sa.Column("max_failures", sa.Integer(), nullable=False),
        sa.Column("max_runs", sa.Integer(), nullable=True),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delete_after_run", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("jitter", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("next_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.String(length=16), nullable=True),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("run_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("remaining_runs", sa.Integer(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deliver", sa.Boolean(), nullable=True),
        sa.Column("channel", sa.Text(), nullable=True),
        sa.Column("to", sa.Text(), nullable=True),
        sa.Column("channel_meta", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_next_run_at", ["next_run_at"], unique=False)
        batch_op.create_index("ix_jobs_session_key", ["session_key"], unique=False)
    # idempotency keys are unique per session (legacy unbound jobs share the '' session)
    op.create_index(
        "ux_jobs_session_idempotency",
        "jobs",
        [sa.text("coalesce(session_key, '')"), "idempotency_key"],
        unique=True,
    )

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=True),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deferred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("prompt_ref", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("prompt_vars", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_details", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("message_id", sa.Text(), nullable=True),
        sa.Column("usage", sa.JSON(none_as_null=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "fire_at", name="uq_runs_job_fire"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_finished_at", ["finished_at"], unique=False)
        batch_op.create_index("ix_runs_session_key", ["session_key"], unique=False)
        batch_op.create_index("ix_runs_state", ["state"], unique=False)

    op.create_table(
        "sessions",
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("chat_id", sa.Text(), nullable=False),
        sa.Column("channel_meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_key"),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("meta", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["session_key"], ["sessions.session_key"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_key", "seq", name="uq_messages_session_seq"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_table("sessions")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_state")
        batch_op.drop_index("ix_runs_session_key")
        batch_op.drop_index("ix_runs_finished_at")

    op.drop_table("runs")
    op.drop_index("ux_jobs_session_idempotency", table_name="jobs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_session_key")
        batch_op.drop_index("ix_jobs_next_run_at")

    op.drop_table("jobs")
