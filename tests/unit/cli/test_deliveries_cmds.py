"""`agentcron deliveries list | retry` on the database: a failed delivery is pending again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from agentcron.app import AgentCron
from agentcron.cli import app as main
from tests.conftest import T0


async def _no_turns(_trigger: object) -> None:
    return None


def _failed_delivery(db: str) -> None:
    async def record() -> None:
        async with AgentCron(db=db, runner=_no_turns) as cron:
            await cron.store.deliveries.record_failed(
                "telegram", "m1", "telegram:99", {"text": "hi"}, error="chat 99 is not on the "
                "telegram allow-list", now=T0,
            )  # fmt: skip

    asyncio.run(record())


def test_a_failed_delivery_is_listed_and_re_sent_from_the_cli(tmp_path: Path) -> None:
    db = str(tmp_path / "cron.db")
    _failed_delivery(db)
    listed = CliRunner().invoke(main, ["deliveries", "list", "--state", "failed", "--db", db,
                                       "--json"])  # fmt: skip
    assert listed.exit_code == 0, listed.output
    (shown,) = json.loads(listed.output)
    assert (shown["id"], shown["state"], shown["attempts"]) == ("telegram:m1", "failed", 0)
    assert shown["last_error"] == "chat 99 is not on the telegram allow-list"
    table = CliRunner().invoke(main, ["deliveries", "list", "--db", db])
    assert "telegram:m1" in table.output
    assert "1 deliveries" in table.output

    retried = CliRunner().invoke(main, ["deliveries", "retry", "telegram:m1", "--db", db])
    assert retried.exit_code == 0, retried.output
    assert retried.output.strip() == "pending telegram:m1 (attempts so far: 0)"
    again = CliRunner().invoke(main, ["deliveries", "retry", "telegram:m1", "--db", db])
    assert again.exit_code == 1
    assert "is pending, not failed: only a failed delivery can be re-sent" in again.output
    unknown = CliRunner().invoke(main, ["deliveries", "retry", "telegram:nope", "--db", db])
    assert unknown.exit_code == 1
    assert "no delivery of message 'nope' on channel 'telegram'" in unknown.output
    pending = CliRunner().invoke(main, ["deliveries", "list", "--state", "pending", "--db", db,
                                        "--json"])  # fmt: skip
    (record,) = json.loads(pending.output)
    assert record["retried_at"] is not None
