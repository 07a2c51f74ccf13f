"""The README's run command: `agentcron demo`, on the real clock (a short, bounded smoke test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcron.demo import run_demo


@pytest.mark.slow
@pytest.mark.timeout(20)
async def test_the_demo_reminder_arrives_as_a_turn_of_the_session(tmp_path: Path) -> None:
    lines: list[str] = []

    def echo(text: str = "", nl: bool = True) -> None:
        lines.append(text + ("\n" if nl else ""))

    code = await run_demo(tmp_path / "demo.db", "remind me in 1 second to stretch", echo, wps=0)
    out = "".join(lines)
    assert code == 0, out
    assert "[calls cron {'action': 'add'" in out
    assert "a scheduled turn starts" in out
    assert "2 tool      cron -> Scheduled “stretch”" in out
    assert "4 user      Scheduled automation triggered: stretch …" in out
    assert "5 assistant (offline model) Reminder: stretch." in out
    assert ": succeeded, prompt {'id': 'cron.agent_turn.reminder'" in out


@pytest.mark.timeout(20)
async def test_the_demo_says_so_when_nothing_was_scheduled(tmp_path: Path) -> None:
    lines: list[str] = []
    code = await run_demo(
        tmp_path / "demo.db", "hello", lambda text="", nl=True: lines.append(text), wps=0
    )
    assert code == 1
    assert any("scheduled nothing" in line for line in lines)
