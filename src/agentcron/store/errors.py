"""Typed store errors, mapped to clear messages at the edges."""

from agentcron.errors import AgentcronError


class StoreError(AgentcronError):
    """Base class for store failures."""


class JobNotFoundError(StoreError, LookupError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}")
        self.job_id = job_id


class RunNotFoundError(StoreError, LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class DeliveryNotFoundError(StoreError, LookupError):
    def __init__(self, channel: str, message_id: str) -> None:
        super().__init__(f"no delivery of message {message_id!r} on channel {channel!r}")
        self.channel, self.message_id = channel, message_id


class DeliveryNotFailedError(StoreError):
    """Only a failed delivery can be re-sent: this one is delivered, or still pending."""

    def __init__(self, channel: str, message_id: str, state: str) -> None:
        why = "already delivered" if state == "delivered" else f"{state}, not failed"
        super().__init__(
            f"the delivery of message {message_id!r} on channel {channel!r} is {why}: "
            "only a failed delivery can be re-sent"
        )
        self.channel, self.message_id, self.state = channel, message_id, state


class VersionConflictError(StoreError):
    """A compare-and-set update lost: the job changed since the caller read it."""

    def __init__(self, job_id: str, expected: int, actual: int) -> None:
        super().__init__(
            f"job {job_id!r} is at version {actual}, not {expected}: re-read it and retry"
        )
        self.job_id, self.expected, self.actual = job_id, expected, actual


class ProtectedJobError(StoreError):
    """System jobs cannot be deleted by users."""


class SessionNotFoundError(StoreError, LookupError):
    def __init__(self, key: str, message: str | None = None) -> None:
        super().__init__(message or f"no session with key {key!r}")
        self.key = key


class RecallNotFoundError(StoreError, LookupError):
    """The session has no pending recall (to cancel or skip)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"session {key!r} has no pending recall")
        self.key = key


class TurnNotFoundError(StoreError, LookupError):
    def __init__(self, turn_id: str) -> None:
        super().__init__(f"no turn with id {turn_id!r}")
        self.turn_id = turn_id


class ConflictError(StoreError):
    """A write collided with a uniqueness rule (e.g. a second pending recall in a session)."""


class ManualRunPendingError(ConflictError):
    """A "run now" of a job whose previous manual run has not ended yet."""

    def __init__(self, job_id: str, run_id: str) -> None:
        super().__init__(
            f"job {job_id!r} has a manual run that has not ended yet ({run_id}): wait for it "
            "to end, then run it again"
        )
        self.job_id, self.run_id = job_id, run_id


class JobLimitError(StoreError):
    """Creating these jobs would pass the store's job limit (`EngineSettings.max_jobs`)."""

    def __init__(self, limit: int, stored: int, adding: int) -> None:
        self.limit, self.stored, self.adding = limit, stored, adding
        super().__init__(
            f"the job limit is reached: {stored} jobs stored, {adding} more would pass the "
            f"limit of {limit}; delete jobs first, or raise the limit (EngineSettings.max_jobs)"
        )


class StoreUnavailableError(AgentcronError):
    """The database cannot be reached now (connection refused or lost, a lock held past the
    wait): a transient fault, so the write did not commit and trying again later is safe.

    Not a `StoreError`: a `StoreError` is the store's answer to the request (not found, a
    conflict, the job limit); this one says nothing about the request.
    """

    retry_after_s = 5  # what the API tells a client (Retry-After)

    def __init__(
        self, message: str = "the database is unreachable; try again", *, reason: str = ""
    ) -> None:
        super().__init__(message)
        self.reason = reason or message  # the driver's own words, one line, for the log
