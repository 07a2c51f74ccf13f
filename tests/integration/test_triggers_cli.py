"""`agentcron jobs trigger enable|rotate|disable ID`, through the database and through a
running server, and a signed event posted to that server: it runs the job once.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from tests.integration.test_cli_commands import cli, home, server  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def no_pacing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline model answers at once (its reply echoes the whole event prompt)."""
    monkeypatch.setenv("AGENTCRON_OFFLINE_WPS", "0")


def post_event(url: str, secret: str, event_id: str, body: str) -> httpx.Response:
    at = datetime.now(UTC)
    headers = {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, at, body),
        "content-type": "application/json",
    }
    return httpx.post(url, content=body, headers=headers)


def test_trigger_commands_and_an_event_to_the_server(
    server: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    api = ("--api", server)
    db = ("--db", str(tmp_path / "srv.db"))
    token = cli("token").stdout.strip()
    assert cli("sessions", "add", "api:ops", *api).exit_code == 0
    added = cli("jobs", "add", "--session", "api:ops", "--name", "deploys", "--message", "sum up",
                "--when", "in 2 days", *api, "--json")  # fmt: skip
    job = json.loads(added.stdout)
    # Through the database: the path (no server known there) and the secret, once.
    enabled = cli("jobs", "trigger", "enable", job["id"], *db)
    assert enabled.exit_code == 0, enabled.output
    lines = enabled.stdout.splitlines()
    assert lines[0] == (
        f"the trigger of “deploys” is on: POST its events to /hooks/jobs/{job['id']} on the "
        "server's address"
    )
    secret = lines[1].removeprefix("secret (shown this once; keep it): ")
    assert secret.startswith("whsec_")
    again = cli("jobs", "trigger", "enable", job["id"], *api)
    assert again.exit_code == 1
    assert "has a trigger already: rotate it" in again.stderr
    shown = cli("jobs", "show", job["id"], *api)
    assert f"on: POST /hooks/jobs/{job['id']}" in shown.stdout
    assert secret not in shown.stdout
    # The server verifies with the secret the CLI made, and runs the job.
    url = f"{server}/hooks/jobs/{job['id']}"
    posted = post_event(url, secret, "evt_1", '{"sha": "abc"}')
    assert posted.status_code == 202, posted.text
    headers = {"Authorization": f"Bearer {token}"}
    run_id = posted.json()["run_id"]
    done = httpx.get(
        f"{server}/api/runs/{run_id}", params={"wait": 30}, headers=headers, timeout=40
    ).json()
    assert (done["state"], done["trigger"], done["event"]) == (
        "succeeded",
        "event",
        '{"sha": "abc"}',
    )
    # Rotated through the API: the URL, the new secret; the old one is refused.
    rotated = json.loads(cli("jobs", "trigger", "rotate", job["id"], *api, "--json").stdout)
    assert (rotated["enabled"], rotated["url"]) == (True, url)
    assert rotated["secret"] != secret
    assert post_event(url, secret, "evt_2", "{}").status_code == 401
    assert post_event(url, rotated["secret"], "evt_1", "{}").status_code == 200  # seen: the first
    off = cli("jobs", "trigger", "disable", job["id"], *api)
    assert off.stdout.strip() == "the trigger of “deploys” is off"
    assert post_event(url, rotated["secret"], "evt_3", "{}").status_code == 404
    missing = cli("jobs", "trigger", "rotate", "01NOSUCHJOB", *api)
    assert missing.exit_code == 1
