"""The policy hook's words: what the agent proposes to do to a job (`PolicyRequest`, with the
proposal), and what the hook answers (`Allow`, `Change` with a changed proposal, or `Refuse`
with a reason for the model). Plain records, no I/O; the hooks themselves are in
`agent/policy_hook.py`.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any


class PolicyAction(enum.StrEnum):
    """What the agent asks for through the cron tool."""

    CREATE = "create"
    UPDATE = "update"
    RESCHEDULE = "reschedule"


@dataclass(frozen=True, slots=True)
class JobProposal:
    """The job as the agent proposes it: for `create` the new job, for `update` the fields it
    changes (the others None), for `reschedule` the job and its new next fire. A hook's
    `Change` returns one of these; it is then checked by the same rules as the agent's own.
    """

    name: str | None = None
    when: str | None = None  # the schedule in the agent's words ("every 2h", a cron expression)
    message: str | None = None
    timezone: str | None = None
    notify: str | None = None
    job_id: str | None = None  # update / reschedule: the job acted on
    next_fire_at: datetime | None = None  # reschedule: the new next fire
    reason: str | None = None  # reschedule: the agent's why

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        if self.next_fire_at is not None:
            data["next_fire_at"] = self.next_fire_at.isoformat()
        return data

    @classmethod
    def of_data(cls, data: dict[str, Any]) -> JobProposal:
        """A proposal from JSON (an HTTP hook's `change`); ValueError / TypeError when it is
        not one.
        """
        if not isinstance(data, dict):
            raise TypeError("a proposal is a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown proposal fields: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is not None and not isinstance(value, str):
                raise TypeError(f"proposal field {name!r} must be a string or null")
            values[name] = value
        at = values.get("next_fire_at")
        if at is not None:
            parsed = datetime.fromisoformat(at)
            if parsed.tzinfo is None:
                raise ValueError("next_fire_at needs a UTC offset")
            values["next_fire_at"] = parsed
        return cls(**values)


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """What the hook is asked: who (the session and the turn), what (the action) and the
    proposal; `scheduled` when the asking turn is a fire's.
    """

    session_key: str | None
    turn_id: str | None
    action: PolicyAction
    proposal: JobProposal
    scheduled: bool = False

    def to_data(self) -> dict[str, Any]:
        """The JSON body an HTTP hook receives."""
        return {
            "type": "job.policy",
            "session_key": self.session_key,
            "turn_id": self.turn_id,
            "action": self.action.value,
            "scheduled": self.scheduled,
            "proposal": self.proposal.to_data(),
        }


@dataclass(frozen=True, slots=True)
class Allow:
    """Go ahead with the proposal as it is."""


@dataclass(frozen=True, slots=True)
class Change:
    """Go ahead with `proposal` instead (checked again by the normal rules)."""

    proposal: JobProposal


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not do it; `reason` is what the model is told."""

    reason: str


PolicyDecision = Allow | Change | Refuse
