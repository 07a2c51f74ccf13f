"""Alembic environment: migrations run on a connection handed in by agentcron.store.migrate."""

from __future__ import annotations

from alembic import context

from agentcron.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "agentcron migrations run through agentcron.store.migrate (or `agentcron db upgrade`)"
    )
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
