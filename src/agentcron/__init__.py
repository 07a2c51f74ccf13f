"""agentcron: cron for AI agent sessions.

The public API is what this module's `__all__` names, and the modules `agentcron.interfaces`
(the extension points: a runner, a channel, a wake service's client, the store protocols, the
clock, the signals; docs/extending.md), `agentcron.schedule` (the pure schedule math) and
`agentcron.testing` (a fake clock and `wait_settled` for tests of code built on agentcron).
Every other module is internal: its names may move between releases (import them from here).
Each subpackage says so: its docstring starts with "Internal:" (`agentcron.schedule`'s with
"Public:") and names, under "Public names:", where its public names are exported.

The names whose modules load a library `import agentcron` does not otherwise need (httpx for
the channels and the wake service's client, PyJWT, FastAPI, pydantic-ai) are imported on first
use (`__getattr__`), so a runner of your own never pays for the built-in agent or the server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentcron.agent.runner import (
    HistoryEntry,
    NullEvents,
    Outcome,
    OutcomeStatus,
    Runner,
    SessionInfo,
    ToolRecord,
    Trigger,
    TurnCallable,
    TurnEvents,
    TurnInput,
    paused,
    tool_ran,
)
from agentcron.agent.tool_deps import ToolLimits
from agentcron.app import AgentCron, Status
from agentcron.config import AgentSettings, ConfigError, EngineSettings
from agentcron.domain.approvals import (
    Approval,
    ApprovalError,
    ApprovalNotFoundError,
    ApprovalState,
    Approver,
    Decision,
    Policy,
)
from agentcron.domain.attachments import Attachment
from agentcron.domain.cadence import CadenceBounds, CadenceRefusedError, Reschedule
from agentcron.domain.deliveries import Delivery, DeliveryCursor, DeliveryState
from agentcron.domain.events import (
    ApprovalDecided,
    ApprovalRequested,
    DeliveryFailed,
    DeliverySucceeded,
    Event,
    EventBus,
    FireStarted,
    JobAction,
    JobAlert,
    JobBudgetReached,
    JobEnding,
    JobEvent,
    JobFailing,
    JobOverdue,
    JobRecovered,
    MessagePosted,
    RunnerEvent,
    SessionBudgetReached,
    SessionDeleted,
    SessionSync,
    StreamEnd,
    StreamStart,
    SystemEventFired,
    TextDelta,
    ThinkingDelta,
    ToolCalled,
    ToolStarted,
)
from agentcron.domain.jobs import (
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    JobStatus,
    NewJob,
    Overlap,
    Recall,
    RecallCallType,
    RecallState,
)
from agentcron.domain.notify import SILENT_SENTINEL, Notify
from agentcron.domain.policy import Allow, Change, JobProposal, PolicyAction, PolicyRequest, Refuse
from agentcron.domain.runs import Run, RunTrigger
from agentcron.domain.sessions import Message, Role, Session, Turn, TurnSource
from agentcron.domain.states import RunState, TurnState
from agentcron.domain.triggers import (
    EventAccepted,
    EventRequestError,
    EventTooLargeError,
    TriggerError,
    TriggerKey,
    TriggerNotFoundError,
    TriggerSignatureError,
    TriggerStateError,
)
from agentcron.errors import AgentcronError, InvalidInputError
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.schedule.errors import (
    InvalidCronError,
    InvalidSpecError,
    InvalidZoneError,
    PastInstantError,
    ScheduleError,
    WhenParseError,
)
from agentcron.store.errors import (
    ConflictError,
    DeliveryNotFoundError,
    JobLimitError,
    JobNotFoundError,
    ProtectedJobError,
    RecallNotFoundError,
    RunNotFoundError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
    TurnNotFoundError,
    VersionConflictError,
)
from agentcron.store.interface import (
    ApprovalRecords,
    DeliveryLedger,
    DeliveryRecords,
    EngineLedger,
    Finisher,
    FireLedger,
    GrantRecords,
    GroupCommit,
    JobCatalog,
    LaneStore,
    OwnerRegistry,
    Planner,
    RelayArmLedger,
    RunRecords,
    SessionRecords,
    Transcripts,
    WriteQueue,
)
from agentcron.store.signals import Listener, Topic
from agentcron.version import __version__

if TYPE_CHECKING:  # the names of _LAZY, for type checkers (keep the two in step)
    from agentcron.agent.builtin import BuiltinRunner
    from agentcron.agent.gate import UserTool
    from agentcron.agent.tools import scheduling_tools
    from agentcron.channels.webhook import standard_webhook_secret, verify_signature
    from agentcron.config.tools import ToolConfigError
    from agentcron.interfaces import (
        ApprovalBound,
        ApprovalDesk,
        ApprovalLinks,
        Arm,
        ArmClient,
        ArmError,
        Channel,
        ChannelError,
        ChannelManager,
        ChannelStartError,
        DeliveryAttemptError,
        FireClaims,
        FireRequestError,
        FireTokenError,
        FireVerifier,
        Inbound,
        JwksCache,
        ManagedWake,
        OutboundMessage,
        Outbox,
        RelayArms,
        RelayFireVerifier,
        RetryPolicy,
        Seed002Arms,
        Seed002FireVerifier,
        StoreBound,
        TelegramChannel,
        VerifierNotReadyError,
        WakeSettings,
        WebhookChannel,
        resolve_wake,
    )
    from agentcron.server import create_app

_SEAMS = "agentcron.interfaces"
# name -> the module it is imported from on first use.
_LAZY: dict[str, str] = {
    "ApprovalBound": _SEAMS,
    "ApprovalDesk": _SEAMS,
    "ApprovalLinks": _SEAMS,
    "Arm": _SEAMS,
    "ArmClient": _SEAMS,
    "ArmError": _SEAMS,
    "BuiltinRunner": "agentcron.agent.builtin",
    "Channel": _SEAMS,
    "ChannelError": _SEAMS,
    "ChannelManager": _SEAMS,
    "ChannelStartError": _SEAMS,
    "DeliveryAttemptError": _SEAMS,
    "FireClaims": _SEAMS,
    "FireRequestError": _SEAMS,
    "FireTokenError": _SEAMS,
    "FireVerifier": _SEAMS,
    "Inbound": _SEAMS,
    "JwksCache": _SEAMS,
    "ManagedWake": _SEAMS,
    "OutboundMessage": _SEAMS,
    "Outbox": _SEAMS,
    "RelayArms": _SEAMS,
    "RelayFireVerifier": _SEAMS,
    "RetryPolicy": _SEAMS,
    "Seed002Arms": _SEAMS,
    "Seed002FireVerifier": _SEAMS,
    "StoreBound": _SEAMS,
    "TelegramChannel": _SEAMS,
    "ToolConfigError": "agentcron.config.tools",
    "UserTool": "agentcron.agent.gate",
    "VerifierNotReadyError": _SEAMS,
    "WakeSettings": _SEAMS,
    "WebhookChannel": _SEAMS,
    "create_app": "agentcron.server",
    "resolve_wake": _SEAMS,
    "scheduling_tools": "agentcron.agent.tools",
    "standard_webhook_secret": "agentcron.channels.webhook",
    "verify_signature": "agentcron.channels.webhook",
}


def __getattr__(name: str) -> object:
    """A name of `_LAZY`, imported now (and kept, so this runs once per name)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentcron' has no attribute {name!r}")
    value: object = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# The library: the facade, its settings and its status.
__all__ = [
    "AgentCron",
    "AgentSettings",
    "EngineSettings",
    "Status",
    "ToolLimits",
    "__version__",
]
# The built-in agent, its tools, and the server around an AgentCron (loaded on first use).
__all__ += [
    "BuiltinRunner",
    "UserTool",
    "create_app",
    "scheduling_tools",
]
# The extension points (agentcron.interfaces: what each is for, and where it plugs in).
__all__ += [
    "ApprovalBound",
    "ApprovalDesk",
    "ApprovalLinks",
    "ApprovalRecords",
    "Approver",
    "Arm",
    "ArmClient",
    "Channel",
    "ChannelManager",
    "Clock",
    "DeliveryCursor",
    "DeliveryLedger",
    "DeliveryRecords",
    "EngineLedger",
    "Finisher",
    "FireClaims",
    "FireLedger",
    "FireVerifier",
    "GrantRecords",
    "GroupCommit",
    "HistoryEntry",
    "Inbound",
    "JobCatalog",
    "JwksCache",
    "LaneStore",
    "Listener",
    "ManagedWake",
    "NullEvents",
    "OutboundMessage",
    "Outbox",
    "Outcome",
    "OutcomeStatus",
    "OwnerRegistry",
    "Planner",
    "RelayArmLedger",
    "RelayArms",
    "RelayFireVerifier",
    "RetryPolicy",
    "RunRecords",
    "Runner",
    "Seed002Arms",
    "Seed002FireVerifier",
    "SessionInfo",
    "SessionRecords",
    "StoreBound",
    "SystemClock",
    "TelegramChannel",
    "ToolRecord",
    "Topic",
    "Transcripts",
    "Trigger",
    "TurnCallable",
    "TurnEvents",
    "TurnInput",
    "WakeSettings",
    "WebhookChannel",
    "WriteQueue",
    "paused",
    "resolve_wake",
    "tool_ran",
]
# For the receiver of the webhook channel: the secret its Standard Webhooks verifier takes; the
# deprecated X-Agentcron-Signature's check.
__all__ += [
    "standard_webhook_secret",
    "verify_signature",
]
# The domain: what the services answer with, and their states.
__all__ += [
    "SILENT_SENTINEL",
    "Allow",
    "Approval",
    "ApprovalState",
    "Attachment",
    "CadenceBounds",
    "CadenceRefusedError",
    "Catchup",
    "Change",
    "CreatedBy",
    "Decision",
    "Delivery",
    "DeliveryState",
    "EventAccepted",
    "Job",
    "JobKind",
    "JobPolicy",
    "JobProposal",
    "JobStatus",
    "Message",
    "NewJob",
    "Notify",
    "Overlap",
    "Policy",
    "PolicyAction",
    "PolicyRequest",
    "Recall",
    "RecallCallType",
    "RecallState",
    "Refuse",
    "Reschedule",
    "Role",
    "Run",
    "RunState",
    "RunTrigger",
    "Session",
    "TriggerKey",
    "Turn",
    "TurnSource",
    "TurnState",
]
# The events `cron.subscribe(callback, types=[...])` delivers.
__all__ += [
    "ApprovalDecided",
    "ApprovalRequested",
    "DeliveryFailed",
    "DeliverySucceeded",
    "Event",
    "EventBus",
    "FireStarted",
    "JobAction",
    "JobAlert",
    "JobBudgetReached",
    "JobEnding",
    "JobEvent",
    "JobFailing",
    "JobOverdue",
    "JobRecovered",
    "MessagePosted",
    "RunnerEvent",
    "SessionBudgetReached",
    "SessionDeleted",
    "SessionSync",
    "StreamEnd",
    "StreamStart",
    "SystemEventFired",
    "TextDelta",
    "ThinkingDelta",
    "ToolCalled",
    "ToolStarted",
]
# The errors: every one is an AgentcronError.
__all__ += [
    "AgentcronError",
    "ApprovalError",
    "ApprovalNotFoundError",
    "ArmError",
    "ChannelError",
    "ChannelStartError",
    "ConfigError",
    "ConflictError",
    "DeliveryAttemptError",
    "DeliveryNotFoundError",
    "EventRequestError",
    "EventTooLargeError",
    "FireRequestError",
    "FireTokenError",
    "InvalidCronError",
    "InvalidInputError",
    "InvalidSpecError",
    "InvalidZoneError",
    "JobLimitError",
    "JobNotFoundError",
    "PastInstantError",
    "ProtectedJobError",
    "RecallNotFoundError",
    "RunNotFoundError",
    "ScheduleError",
    "SessionNotFoundError",
    "StoreError",
    "StoreUnavailableError",
    "ToolConfigError",
    "TriggerError",
    "TriggerNotFoundError",
    "TriggerSignatureError",
    "TriggerStateError",
    "TurnNotFoundError",
    "VerifierNotReadyError",
    "VersionConflictError",
    "WhenParseError",
]
