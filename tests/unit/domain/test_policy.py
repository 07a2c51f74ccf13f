"""domain/policy.py: a proposal and a request as an HTTP hook reads them, and a proposal read
back from a hook's `change` (refused when it is not one)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentcron.domain.policy import JobProposal, PolicyAction, PolicyRequest

AT = datetime(2026, 11, 22, 15, 0, tzinfo=UTC)


def test_a_request_as_json_and_a_proposal_read_back() -> None:
    proposal = JobProposal(name="inbox", job_id="J1", next_fire_at=AT, reason="quiet")
    data = PolicyRequest("websocket:a", "T1", PolicyAction.RESCHEDULE, proposal, True).to_data()
    assert data["action"] == "reschedule"
    assert data["scheduled"] is True
    assert data["proposal"]["next_fire_at"] == "2026-11-22T15:00:00+00:00"
    assert JobProposal.of_data(data["proposal"]) == proposal


@pytest.mark.parametrize(
    "data",
    [
        {"colour": "red"},
        {"name": 5},
        {"next_fire_at": "2026-11-22T15:00:00"},  # no offset
        {"next_fire_at": "tomorrow"},
        ["allow"],
    ],
)
def test_what_is_no_proposal_is_refused(data: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        JobProposal.of_data(data)  # type: ignore[arg-type]
