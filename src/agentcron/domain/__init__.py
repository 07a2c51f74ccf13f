"""Internal: the domain: jobs, runs, sessions and turns, approvals, deliveries, their states and
events. Plain records and pure rules, no I/O: every other layer speaks these types.

Public names: the records, their states and the events are re-exported from `agentcron`
(`agentcron.Job`, `agentcron.Run`, `agentcron.RunState`, `agentcron.Approval`,
`agentcron.StreamEnd`, ...).
"""

from agentcron.domain.approvals import Approval, ApprovalState, Decision
from agentcron.domain.deliveries import Delivery, DeliveryState
from agentcron.domain.jobs import Catchup, CreatedBy, Job, JobKind, JobPolicy, NewJob, Overlap
from agentcron.domain.runs import ClaimedFire, Run
from agentcron.domain.sessions import Entry, Message, Role, Session, Turn, TurnSource
from agentcron.domain.states import ACTIVE_STATES, TERMINAL_STATES, RunState, TurnState

__all__ = [
    "ACTIVE_STATES",
    "TERMINAL_STATES",
    "Approval",
    "ApprovalState",
    "Catchup",
    "ClaimedFire",
    "CreatedBy",
    "Decision",
    "Delivery",
    "DeliveryState",
    "Entry",
    "Job",
    "JobKind",
    "JobPolicy",
    "Message",
    "NewJob",
    "Overlap",
    "Role",
    "Run",
    "RunState",
    "Session",
    "Turn",
    "TurnSource",
    "TurnState",
]
