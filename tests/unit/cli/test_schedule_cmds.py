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


def test_usage_says_unpriced_and_never_shows_an_unknown_cost_as_zero() -> None:
    from agentcron.cli.render import usage

    assert usage(None) == "-"
    run = {"input_tokens": 1200, "output_tokens": 80, "cost_usd": None, "model": "ollama:x"}
    assert usage(run) == "1,200 in / 80 out tokens, unpriced (ollama:x)"
    priced = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0012, "model": "openai:gpt-4o"}
    assert usage(priced) == "10 in / 5 out tokens, $0.001200 (openai:gpt-4o)"
    mixed = {"counted": 3, "input_tokens": 30, "output_tokens": 9, "cost_usd": 0.5, "unpriced": 1}
    assert usage(mixed) == "3 counted, 30 in / 9 out tokens, $0.500000 + 1 unpriced"
    none_priced = {"counted": 2, "input_tokens": 2, "output_tokens": 2, "cost_usd": 0.0,
                   "unpriced": 2}  # fmt: skip
    assert usage(none_priced) == "2 counted, 2 in / 2 out tokens, 2 unpriced"


def test_a_note_from_the_cli_starts_no_turn_and_send_needs_the_server(tmp_path: object) -> None:
    import json
    from pathlib import Path

    db = str(Path(str(tmp_path)) / "cron.db")
    assert CliRunner().invoke(main, ["sessions", "add", "api:ops", "--db", db]).exit_code == 0
    noted = CliRunner().invoke(main, ["sessions", "note", "api:ops", "backup moved to 3am",
                                      "--db", db, "--json"])  # fmt: skip
    assert noted.exit_code == 0, noted.output
    answer = json.loads(noted.output)
    assert answer["turn_id"] is None
    assert answer["message"]["content"] == "backup moved to 3am"
    shown = CliRunner().invoke(main, ["sessions", "show", "api:ops", "--db", db, "--json"])
    data = json.loads(shown.output)
    assert [m["content"] for m in data["messages"]] == ["backup moved to 3am"]
    missing = CliRunner().invoke(main, ["sessions", "note", "api:nobody", "x", "--db", db])
    assert missing.exit_code == 1
    assert "api:nobody" in missing.output
    # the channels run in the server: sending without one says so (nothing to reach here)
    sent = CliRunner().invoke(main, ["sessions", "send", "api:ops", "hello",
                                     "--api", "http://127.0.0.1:9"])  # fmt: skip
    assert sent.exit_code == 1
    assert "cannot reach the agentcron API at http://127.0.0.1:9" in sent.output
