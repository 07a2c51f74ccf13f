"""bench/bench_lists.py: its sessions, its verdicts and one small run end to end."""

from __future__ import annotations

from pathlib import Path

from bench.bench_lists import Row, build, first_paint, measure, session_rows, table


def test_the_sessions_are_distinct_and_some_share_an_update_time() -> None:
    rows = session_rows(7)
    assert len({r["session_key"] for r in rows}) == 7
    assert len({r["updated_at"] for r in rows}) == 3  # ties: the key breaks them


def test_a_row_passes_within_its_target_and_a_row_without_one_has_no_verdict() -> None:
    rows = [Row("a", 19.9, 20.0), Row("b", 20.1, 20.0), Row("c", 500.0, None)]
    assert [r.result for r in rows] == ["pass", "FAIL", "-"]
    shown = table(rows, 100_000, "sqlite")
    assert "100,000 sessions on sqlite;" in shown
    assert "| b | 20.1 ms | <= 20 ms | FAIL |" in shown
    assert "| c | 500.0 ms | - | - |" in shown


async def test_a_small_run_measures_every_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lists.db'}"
    await build(url, 120)
    rows = await measure(url, 2)
    assert [r.metric for r in rows] == [
        "GET /api/sessions, first page (50)",
        "GET /api/sessions, 101st page (cursor)",
        "GET /api/sessions?q= (search every title and key)",
        "GET /api/runs, first page (no runs)",
    ]
    assert all(r.measured_ms > 0 for r in rows)  # the verdicts depend on the machine: not here


async def test_the_first_paint_is_measured_in_chromium(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'paint.db'}"
    await build(url, 60)
    row = await first_paint(url, rounds=1)
    assert row.metric == "web UI: first chat painted in the list, Chromium"
    assert row.measured_ms > 0  # the verdict depends on the machine: not here
