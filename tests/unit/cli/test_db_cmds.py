"""`agentcron db upgrade`: creates and reports the schema, finds the database in the environment."""

from __future__ import annotations

from typer.testing import CliRunner

from agentcron.cli import app as main


def test_db_upgrade_creates_and_reports_the_schema(tmp_path: object) -> None:
    from pathlib import Path

    from alembic.script import ScriptDirectory

    from agentcron.store.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    path = Path(str(tmp_path)) / "sub" / "cron.db"
    for _ in range(2):  # creating, then upgrading an up-to-date database
        result = CliRunner().invoke(main, ["db", "upgrade", "--db", str(path)])
        assert result.exit_code == 0, result.output
        assert f"{path}: schema at revision {head} (0 jobs, 0 runs)" in result.output
    assert path.exists()


def test_db_path_comes_from_the_environment(tmp_path: object, monkeypatch: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "env.db"
    monkeypatch.setenv("AGENTCRON_DB", str(path))  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert path.exists()
