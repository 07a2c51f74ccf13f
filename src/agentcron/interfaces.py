"""The extension points of agentcron in one place: what you implement (or call) to plug in a part
of your own, and where it plugs in. docs/extending.md shows each one with a tested example.

- **Runner**: what executes a turn. `AgentCron(runner=...)` takes a `Runner` (an object with
  `async run_turn(session, turn, events) -> Outcome`) or a plain `async def fn(trigger)` for
  scheduled turns only. Optional attributes it may have: `history_window`, `history_budget`,
  and `async summarize(entries, *, previous, max_tokens) -> str` (the compaction of older
  history). Inside a turn, `paused()` gives the turn's slot back for a wait on the outside world;
  `tool_ran(record)` reports a tool call as it happens (kept if the turn is stopped, times out
  or is cut); an `Approver` (`cron.approvals.broker`) asks a person.
- **Clock**: the only way the engine, the lanes and the approvals read time or wait.
  `AgentCron(clock=...)`; `SystemClock` is the default, `agentcron.testing.FakeClock` the one
  tests move by hand.
- **Store protocols**: each part of agentcron is typed against a narrow protocol of the store
  (the engine a `FireLedger` / `EngineLedger`, a channel's outbox a `DeliveryLedger`, a managed
  wake a `JobCatalog` and `RunRecords`, ...). `SqlStore` (SQLite, PostgreSQL) implements all of
  them and is what `AgentCron` builds; the contract tests in tests/integration hold them.
- **Channel**: an edge that carries a session's messages in and out. `ChannelManager(cron,
  [channel])` joins channels to an `AgentCron`: a channel that is `StoreBound` gets the
  delivery ledger (for an `Outbox`: durable delivery with retries), one that is
  `ApprovalBound` (and says `carries_approvals = True`) gets the approval desk and the
  gated calls' requests and decisions.
- **ArmClient**: the client of a wake service (`agentcron relay`, a seed-002 managed-cron
  service, or a hosted scheduler): provision, cancel and list one arm per job.
  `resolve_wake(settings, ..., arms=client)` or `ManagedWake(...)` keeps its arms equal to the
  jobs. `RelayArms` and `Seed002Arms` are the built-in ones (`wake.service`).
- **FireVerifier**: what accepts a fire at `POST /api/cron/fire` (`ready()`, `verify(token,
  body) -> FireClaims`, raising `FireTokenError` for a 401 and `FireRequestError` for a 400).
  `RelayFireVerifier` (the default) and `Seed002FireVerifier` are built in (`wake.verifier`);
  `resolve_wake(..., verifier=mine)` or `ServeOptions(fire_verifier=mine)` takes your own.
- **Signals**: changes another process made on the database (`Topic`), heard through
  `cron.store.signals.subscribe(topic, listener)`; a `Listener` gets the topic and the keys
  (None: re-read everything).
- **Errors** an implementation raises or handles: `AgentcronError` is the root of all of them.

Everything here is also re-exported from `agentcron`; it is defined in internal modules, whose
names may move between releases: import it from here (or from `agentcron`).
"""

from __future__ import annotations

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
from agentcron.approval_links import ApprovalLinks
from agentcron.channels.manager import (
    ApprovalBound,
    ApprovalDesk,
    Channel,
    ChannelError,
    ChannelManager,
    ChannelStartError,
    Inbound,
    OutboundMessage,
    StoreBound,
)
from agentcron.channels.outbox import DeliveryAttemptError, Outbox, RetryPolicy
from agentcron.channels.telegram import TelegramChannel
from agentcron.channels.webhook import WebhookChannel
from agentcron.config.wake import WakeSettings
from agentcron.domain.approvals import (
    Approval,
    ApprovalError,
    ApprovalNotFoundError,
    Approver,
    Decision,
)
from agentcron.domain.attachments import Attachment
from agentcron.domain.deliveries import DeliveryCursor
from agentcron.domain.sessions import TurnSource
from agentcron.errors import AgentcronError
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.store.errors import (
    ConflictError,
    DeliveryNotFoundError,
    JobNotFoundError,
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
from agentcron.wake.arms import Arm, ArmClient, ArmError, RelayArms
from agentcron.wake.provider import ManagedWake
from agentcron.wake.provider import resolve as resolve_wake
from agentcron.wake.seed002 import Seed002Arms, Seed002FireVerifier
from agentcron.wake.verify import (
    FireClaims,
    FireRequestError,
    FireTokenError,
    FireVerifier,
    JwksCache,
    RelayFireVerifier,
    VerifierNotReadyError,
)

# The runner: what executes a turn; its input, its answer, a pause for a wait, asking a person.
__all__ = [
    "Approval",
    "Approver",
    "Attachment",
    "Decision",
    "HistoryEntry",
    "NullEvents",
    "Outcome",
    "OutcomeStatus",
    "Runner",
    "SessionInfo",
    "ToolRecord",
    "Trigger",
    "TurnCallable",
    "TurnEvents",
    "TurnInput",
    "TurnSource",
    "paused",
    "tool_ran",
]
# Time: the one way agentcron reads the clock or waits.
__all__ += [
    "Clock",
    "SystemClock",
]
# The store protocols, one per part of agentcron that uses the store (store/interface.py).
__all__ += [
    "ApprovalRecords",
    "DeliveryCursor",
    "DeliveryLedger",
    "DeliveryRecords",
    "EngineLedger",
    "Finisher",
    "FireLedger",
    "GrantRecords",
    "GroupCommit",
    "JobCatalog",
    "LaneStore",
    "OwnerRegistry",
    "Planner",
    "RelayArmLedger",
    "RunRecords",
    "SessionRecords",
    "Transcripts",
    "WriteQueue",
]
# Channels: the protocol, what it carries, the manager it plugs into, durable delivery, and
# the built-in ones.
__all__ += [
    "ApprovalBound",
    "ApprovalDesk",
    "ApprovalLinks",
    "Channel",
    "ChannelManager",
    "Inbound",
    "OutboundMessage",
    "Outbox",
    "RetryPolicy",
    "StoreBound",
    "TelegramChannel",
    "WebhookChannel",
]
# A wake service's client, the fire verifier, and the managed wake that keeps its arms equal
# to the jobs.
__all__ += [
    "Arm",
    "ArmClient",
    "FireClaims",
    "FireVerifier",
    "JwksCache",
    "ManagedWake",
    "RelayArms",
    "RelayFireVerifier",
    "Seed002Arms",
    "Seed002FireVerifier",
    "WakeSettings",
    "resolve_wake",
]
# Signals: changes other processes made on the database.
__all__ += [
    "Listener",
    "Topic",
]
# Errors an implementation raises or handles.
__all__ += [
    "AgentcronError",
    "ApprovalError",
    "ApprovalNotFoundError",
    "ArmError",
    "ChannelError",
    "ChannelStartError",
    "ConflictError",
    "DeliveryAttemptError",
    "DeliveryNotFoundError",
    "FireRequestError",
    "FireTokenError",
    "JobNotFoundError",
    "RunNotFoundError",
    "SessionNotFoundError",
    "StoreError",
    "StoreUnavailableError",
    "TurnNotFoundError",
    "VerifierNotReadyError",
    "VersionConflictError",
]
