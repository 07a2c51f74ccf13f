"""What the migration tests share: a job as every schema version can store it, and a table's
columns as the database has them.
"""

from __future__ import annotations

import sqlalchemy as sa

# A job kept from before a migration: only the columns every revision has (`:at` its times).
INSERT_JOB = sa.text(
    "INSERT INTO jobs (id, name, kind, spec, created_by, overlap, catchup, catchup_window_s, "
    "max_failures, created_at, updated_at) VALUES ('J1', 'ping', 'agent_turn', '{}', 'user', "
    "'skip', 'skip', 0, 3, :at, :at)"
)


def columns(conn: sa.Connection, table: str) -> set[str]:
    """The names of `table`'s columns."""
    return {c["name"] for c in sa.inspect(conn).get_columns(table)}
