"""`agentcron sessions note` writes without a turn; `sessions send` needs the server."""

from __future__ import annotations

from typer.testing import CliRunner

from agentcron.cli import app as main


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
