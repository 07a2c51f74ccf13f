"""`agentcron sessions list` in pages (--limit, --cursor, --all) and searched (--search)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner, Result

from agentcron.cli import app
from agentcron.service.paging import MAX_PAGE
from tests.conftest import CronFactory


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_the_session_list_pages_and_searches(tmp_path: object) -> None:
    db = f"{tmp_path}/cli.db"
    for i in range(3):
        assert (
            cli("sessions", "add", f"api:s{i}", "--title", f"Chat {i}", "--db", db).exit_code == 0
        )
    first = cli("sessions", "list", "--db", db, "--limit", "2", "--json")
    assert len(json.loads(first.stdout)) == 2
    assert first.stderr.startswith("more: --cursor ")
    cursor = first.stderr.split()[2]
    rest = cli("sessions", "list", "--db", db, "--limit", "2", "--cursor", cursor, "--json")
    assert rest.stderr == ""  # the last page
    seen = [s["key"] for s in json.loads(first.stdout) + json.loads(rest.stdout)]
    assert sorted(seen) == ["api:s0", "api:s1", "api:s2"]
    every = cli("sessions", "list", "--db", db, "--limit", "1", "--all", "--json")
    assert [s["key"] for s in json.loads(every.stdout)] == seen
    found = cli("sessions", "list", "--db", db, "--search", "CHAT 1")
    assert "api:s1" in found.stdout
    assert "api:s0" not in found.stdout
    assert "1 session(s)" in found.stdout


async def test_show_reads_the_last_entries_back_page_by_page(
    tmp_path: Path, make_cron: CronFactory
) -> None:
    cron = await make_cron()  # on tests/conftest's db_path
    await cron.sessions.create("api:long")
    for i in range(MAX_PAGE + 5):
        await cron.sessions.note("api:long", f"note {i}")
    await cron.close()
    db = str(tmp_path / "agentcron.db")
    for last in (3, MAX_PAGE + 2, MAX_PAGE + 50):
        shown = await asyncio.to_thread(
            cli, "sessions", "show", "api:long", "--last", str(last), "--db", db, "--json"
        )
        seqs = [m["seq"] for m in json.loads(shown.stdout)["messages"]]
        assert seqs == list(range(max(MAX_PAGE + 5 - last, 0) + 1, MAX_PAGE + 6))
