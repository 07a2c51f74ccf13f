"""`agentcron next` and `agentcron examples` print specs and fires, errors clearly."""

from __future__ import annotations

from typer.testing import CliRunner

from agentcron.cli import app as main


def test_next_prints_spec_description_and_fires() -> None:
    result = CliRunner().invoke(
        main, ["next", "every", "weekday", "at", "9", "--tz", "Europe/Berlin", "-n", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "every weekday at 09:00 (Europe/Berlin)" in result.output
    assert '"expr":"0 9 * * 1-5"' in result.output
    assert result.output.count("  -> ") == 2


def test_next_rejects_unreadable_phrase_with_usage_error() -> None:
    result = CliRunner().invoke(main, ["next", "whenever"])
    assert result.exit_code == 2
    assert "cannot read 'whenever' as a time; accepted forms" in result.output


def test_examples_runs_every_example() -> None:
    result = CliRunner().invoke(main, ["examples"])
    assert result.exit_code == 0, result.output
    assert "6 fields (a seconds or year field) are not supported" in result.output
    assert "every hour (Australia/Lord_Howe)" in result.output
