"""store/rows.py: the claim's due read walks one index in due order (due time, then id) and
sorts nothing, so a herd of jobs due at one instant is read a page at a time, not sorted whole.
"""

from __future__ import annotations

import sqlalchemy as sa

from agentcron.store.rows import _DUE
from agentcron.store.schema import metadata


def test_the_due_read_uses_the_due_index_and_no_sort() -> None:
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            metadata.create_all(conn)
            compiled = _DUE.compile(dialect=conn.dialect)
            params = compiled.construct_params({"now": "2026-01-01 00:00:00.000000", "limit": 500})
            plan = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled.string}",
                tuple(params[name] for name in compiled.positiontup or ()),
            ).all()
    finally:
        engine.dispose()
    details = [row[-1] for row in plan]
    assert any("ix_jobs_due" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details
