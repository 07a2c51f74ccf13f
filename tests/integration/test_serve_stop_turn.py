"""Over HTTP against a real `agentcron serve`: stopping a scheduled turn is not a failure.

Five stops of a job's turns (more than its max_failures) leave five `cancelled` runs with a
"stopped" closure each, and the job enabled, with no failure counted and no backoff.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_serve_stop import Serve

KEY = "api:stop-me"
STOPS = 5

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def wait_for(what: str, check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_stopping_scheduled_turns_over_http_cancels_them_and_keeps_the_job(
    tmp_path: Path,
) -> None:
    # offline model, paced: a scheduled turn streams for seconds; a job every second allowed
    serve = Serve(tmp_path, settings={"AGENTCRON_MIN_INTERVAL": "1"})
    try:
        http = serve.client
        assert http.post("/api/sessions", json={"key": KEY}).status_code == 201
        created = http.post("/api/jobs", json={
            "session_key": KEY, "name": "digest", "message": "summarise the day",
            "when": "every 1 seconds",  # (its "max_failures": 3 was never read: not an API field)
        })  # fmt: skip
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        stopped: set[str] = set()
        for _ in range(STOPS):
            turn_id = wait_for(
                "a scheduled turn to run",
                lambda: (
                    (t := http.get(f"/api/sessions/{KEY}").json().get("running_turn"))
                    and t not in stopped
                    and t
                ),
            )
            answer = http.post(f"/api/sessions/{KEY}/stop").json()
            assert answer["stopped"] is True, answer
            stopped.add(turn_id)
            turn = http.get(f"/api/turns/{turn_id}", params={"wait": 10}).json()
            assert turn["state"] == "cancelled", turn
            assert turn["error"] == "stopped by the user"
        http.post(f"/api/jobs/{job_id}/pause")
        job = http.get(f"/api/jobs/{job_id}").json()
        runs = http.get(f"/api/jobs/{job_id}/runs").json()["runs"]
        states = [r["state"] for r in runs]
        assert states.count("cancelled") == STOPS, states
        assert "failed" not in states, states
        assert job["consecutive_failures"] == 0
        assert job["paused_reason"] == "paused by user"  # ours, not an auto-pause
        closures = [
            m["content"]
            for m in http.get(f"/api/sessions/{KEY}/messages").json()["messages"]
            if m["meta"].get("status") == "cancelled"
        ]
        assert closures == ["Scheduled automation “digest” was stopped."] * STOPS
    finally:
        serve.close()
