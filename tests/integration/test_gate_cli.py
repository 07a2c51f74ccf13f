"""`agentcron jobs update` with a job's cadence bounds and its gate (set, replaced, removed),
through the database and through a running server; `agentcron jobs show` says the gate in
words.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_cli_commands import cli, home, server  # noqa: F401 (fixtures)

HTTP_GATE = json.dumps({"kind": "http", "target": "https://shop.example/new", "notice": True})


def updated(*args: str) -> dict[str, object]:
    result = cli("jobs", "update", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["policy"]  # type: ignore[no-any-return]


def test_jobs_update_sets_and_clears_cadence_and_gate_in_the_database(tmp_path: Path) -> None:
    update_cadence_and_gate("--db", str(tmp_path / "cli.db"))


def test_jobs_update_sets_and_clears_cadence_and_gate_through_the_server(
    server: str,  # noqa: F811 (the fixture)
) -> None:
    update_cadence_and_gate("--api", server)


def update_cadence_and_gate(*where: str) -> None:
    assert cli("sessions", "add", "api:ops", *where).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "orders", "--message", "sum up",
                "--when", "every day at 9", *where, "--json")  # fmt: skip
    job_id = json.loads(added.stdout)["id"]
    policy = updated(job_id, "--cadence-min", "30m", "--cadence-max", "6h",
                     "--allowed-hours", "08:00-20:00", *where)  # fmt: skip
    assert policy["cadence"] == {"min": "30m", "max": "6h", "allowed_hours": "08:00-20:00"}
    # The bounds given replace the bounds as a whole.
    narrowed = updated(job_id, "--cadence-max", "2h", *where)["cadence"]
    assert narrowed == {"min": None, "max": "2h", "allowed_hours": None}
    assert updated(job_id, "--no-cadence", *where)["cadence"] is None
    both = cli("jobs", "update", job_id, "--no-cadence", "--cadence-min", "1h", *where)
    assert both.exit_code == 2
    assert "--no-cadence" in both.output

    gate = updated(job_id, "--gate", HTTP_GATE, *where)["gate"]
    assert gate == {"kind": "http", "target": "https://shop.example/new", "timeout_s": 10.0,
                    "max_output": 16384, "notice": True, "no_llm": False}  # fmt: skip
    shown = cli("jobs", "show", job_id, *where)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.replace("│", " ").split())  # the table wraps long lines
    assert "gate: before each fire it sends a GET to https://shop.example/new" in text
    assert "a skipped fire leaves a notice in the chat" in text
    assert cli("jobs", "update", job_id, "--gate", "{not json", *where).exit_code == 2
    code = json.dumps({"kind": "command", "target": ["true"]})
    refused = cli("jobs", "update", job_id, "--gate", code, *where)  # code gates are off
    assert refused.exit_code == 1
    assert "[engine] gates" in refused.output
    out_of_bounds = json.dumps({"kind": "http", "target": "file:///etc/passwd"})
    assert cli("jobs", "update", job_id, "--gate", out_of_bounds, *where).exit_code == 1
    assert cli("jobs", "update", job_id, "--gate", HTTP_GATE, "--no-gate", *where).exit_code == 2
    assert updated(job_id, "--no-gate", *where)["gate"] is None
    assert "gate:" not in cli("jobs", "show", job_id, *where).stdout
