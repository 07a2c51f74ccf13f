"""The help of `agentcron serve` and its neighbours says what the commands are."""

from __future__ import annotations

from typer.testing import CliRunner

from agentcron.cli import app as main


def test_serve_help_keeps_the_tools_table_in_its_text() -> None:
    shown = CliRunner().invoke(main, ["serve", "-h"], env={"COLUMNS": "240"})
    assert shown.exit_code == 0, shown.output
    assert "A TOML file whose `tools` table gives the agent's tools" in shown.output
    assert "else the `tools` table of the configuration file" in shown.output
    assert "whose  table" not in shown.output  # what rich made of "[tools]"


def test_jobs_help_names_the_commands_as_typed() -> None:
    shown = CliRunner().invoke(main, ["jobs", "-h"], env={"COLUMNS": "240"})
    assert "add, list, show, update, run now, pause, resume, renew, rm, trigger." in shown.output
    assert "resume, remove" not in shown.output
