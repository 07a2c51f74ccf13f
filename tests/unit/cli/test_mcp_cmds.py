"""`agentcron mcp` refuses what it cannot serve before it speaks MCP; `agentcron token --mcp`
prints a token bound to one session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentcron.cli import app as main
from agentcron.tokens import mcp_session_of


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTCRON_HOME", str(tmp_path))
    monkeypatch.delenv("AGENTCRON_TOKEN", raising=False)
    return tmp_path


def test_mcp_needs_an_existing_database_and_session(home: Path) -> None:
    db = str(home / "cron.db")
    missing_db = CliRunner().invoke(main, ["mcp", "--session", "api:ops", "--db", db])
    assert missing_db.exit_code == 1
    assert "no database" in missing_db.output
    assert CliRunner().invoke(main, ["sessions", "add", "api:ops", "--db", db]).exit_code == 0
    unknown = CliRunner().invoke(main, ["mcp", "--session", "api:nobody", "--db", db])
    assert unknown.exit_code == 1
    assert "api:nobody" in unknown.output
    no_session = CliRunner().invoke(main, ["mcp", "--db", db])
    assert no_session.exit_code == 2


def test_token_mcp_is_bound_to_the_session_it_names(home: Path) -> None:
    api = CliRunner().invoke(main, ["token"])
    assert api.exit_code == 0
    made = CliRunner().invoke(main, ["token", "--mcp", "--session", "api:ops"])
    assert made.exit_code == 0, made.output
    assert mcp_session_of(api.output.strip(), made.output.strip()) == "api:ops"
    for args in (["--mcp"], ["--session", "api:ops"], ["--hook", "--mcp", "--session", "api:o"]):
        refused = CliRunner().invoke(main, ["token", *args])
        assert refused.exit_code == 2, args
    bad = CliRunner().invoke(main, ["token", "--mcp", "--session", "no key"])
    assert bad.exit_code == 2
