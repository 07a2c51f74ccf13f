"""`agentcron config show` says each setting's real default."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from agentcron.cli import app as main


def test_config_show_says_the_cli_talks_to_the_local_server_by_default(tmp_path: Path) -> None:
    env = {"AGENTCRON_HOME": str(tmp_path), "AGENTCRON_URL": "", "TZ": ""}
    shown = CliRunner().invoke(main, ["config", "show"], env=env)
    assert shown.exit_code == 0, shown.output
    (line,) = [row for row in shown.output.splitlines() if row.startswith("cli.url ")]
    assert line.split() == ["cli.url", "default", "http://127.0.0.1:8321"]
    assert "the local database" not in shown.output
    (zone,) = [row for row in shown.output.splitlines() if row.startswith("cli.tz ")]
    assert zone.split(None, 2) == ["cli.tz", "default", "the machine's zone"]
