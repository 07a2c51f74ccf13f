"""The CLI edge: `agentcron next` and `agentcron examples` print specs and fires, errors clearly."""

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


def test_db_upgrade_creates_and_reports_the_schema(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "sub" / "cron.db"
    for _ in range(2):  # creating, then upgrading an up-to-date database
        result = CliRunner().invoke(main, ["db", "upgrade", "--db", str(path)])
        assert result.exit_code == 0, result.output
        assert f"{path}: schema at revision 0012 (0 jobs, 0 runs)" in result.output
    assert path.exists()


def test_db_path_comes_from_the_environment(tmp_path: object, monkeypatch: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "env.db"
    monkeypatch.setenv("AGENTCRON_DB", str(path))  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert path.exists()
