"""`agentcron jobs list` in pages (--limit, --cursor, --all)."""

from __future__ import annotations

import json

from typer.testing import CliRunner, Result

from agentcron.cli import app


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_the_job_list_pages(tmp_path: object) -> None:
    db = f"{tmp_path}/cli.db"
    assert cli("sessions", "add", "api:a", "--db", db).exit_code == 0
    names = [f"job {i}" for i in range(3)]
    for name in names:
        added = cli("jobs", "add", "--session", "api:a", "--name", name, "--message", "m",
                    "--when", "every day at 9", "--db", db)  # fmt: skip
        assert added.exit_code == 0, added.output
    first = cli("jobs", "list", "--db", db, "--limit", "2", "--json")
    assert [j["name"] for j in json.loads(first.stdout)] == names[:2]  # oldest first
    every = cli("jobs", "list", "--db", db, "--limit", "2", "--all", "--json")
    assert [j["name"] for j in json.loads(every.stdout)] == names
    assert every.stderr == ""
    bad = cli("jobs", "list", "--db", db, "--cursor", "nope")
    assert bad.exit_code == 1
    assert "cursor is not one this list gave" in bad.stderr
