"""A job's pre-check gate (pure, no I/O): a command, an HTTP GET or a Python entry point run
before the agent; the turn happens only when the gate says so, and what the gate printed is
passed into the prompt. `runtime/gate.py` runs one.

How a gate's answer reads (`GateVerdict`):
- command: exit code 0 = run, 1 = skip, anything else (or a signal) = a gate error;
- http: a 2xx status = run, but 204 (no content) and 304/404/409/412/423 = skip, anything
  else = a gate error (`http_verdict`); the body is the output;
- python: a truthy value = run, a falsy one = skip, `(bool, text)` = that bool with that
  text as the output, an exception = a gate error.
A timeout is a gate error. A gate error fails the run with the gate's output tail; a skip
records the run `skipped` with the reason `gate`.

Before it runs, a gate passes the tool policy under its tool name (`gate_tool`: `gate.command`,
`gate.http`, `gate.python`), with `gate_args` as the call's arguments: allow runs it, deny
fails the run (`policy_denied`), approve asks a person first (`runtime/gate.py`).
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass
from typing import Any

from agentcron.errors import InvalidInputError

DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 120.0
DEFAULT_MAX_OUTPUT = 16 * 1024
MAX_MAX_OUTPUT = 256 * 1024
MAX_TARGET = 2000  # characters of a target (a command line, a URL, a "module:function")
MAX_ARGS = 64  # words of a command
ERROR_TAIL = 500  # characters of a failed gate's output the run's error keeps
SKIPPED_BY_GATE = "gate"  # the reason of a run the gate held (its `error`)
NOTICE_CHARS = 500  # of a gate's output a gated-out fire's notice shows

_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# HTTP statuses that say "nothing to do": the turn is skipped, not failed.
SKIP_STATUSES = frozenset({204, 304, 404, 409, 412, 423})


class GateKind(enum.StrEnum):
    COMMAND = "command"  # argv list, no shell
    HTTP = "http"  # a GET of an http(s) URL
    PYTHON = "python"  # "module:function", sync or async


# The kinds that run code on this machine: allowed only with the setting `[engine] gates`.
CODE_KINDS = frozenset({GateKind.COMMAND, GateKind.PYTHON})


# The tool name a gate of each kind has in the tool policy (a glob like `gate.*` covers all).
GATE_TOOL_PREFIX = "gate."


def gate_tool(kind: GateKind) -> str:
    """The tool name the tool policy, approvals and standing grants know a gate by."""
    return GATE_TOOL_PREFIX + kind.value


def gate_args(gate: Gate, job_id: str) -> dict[str, Any]:
    """A gate's approval arguments: what it runs (`target`: a URL, an entry point, or a
    command's words as one shell-quoted line, so a grant's glob can match it) and whose gate
    it is (`job_id`); a standing grant's pattern matches these.
    """
    target = shlex.join(gate.target) if isinstance(gate.target, tuple) else gate.target
    return {"target": target, "job_id": job_id}


def policy_denied(tool: str, why: str) -> str:
    """A run's error when the tool policy keeps its gate from running (`why`: deny, or the
    approval's end).
    """
    return f"gate denied by the tool policy ({tool}): {why}; the gate did not run"


class GateVerdict(enum.StrEnum):
    RUN = "run"
    SKIP = "skip"
    ERROR = "error"


class GateError(InvalidInputError):
    """A gate description that is not valid (its message says which part)."""


@dataclass(frozen=True, slots=True)
class Gate:
    """A job's gate. `target`: a command's argv (a list), a URL, or "module:function".
    `notice`: a gated-out fire leaves a short transcript entry; `no_llm`: the gate is the
    whole job (no turn at all: the run ends on the gate's answer).
    """

    kind: GateKind
    target: tuple[str, ...] | str
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output: int = DEFAULT_MAX_OUTPUT
    notice: bool = False
    no_llm: bool = False

    def __post_init__(self) -> None:
        check_gate(self)

    def as_dict(self) -> dict[str, Any]:
        """The stored and shown form (JSON)."""
        target = list(self.target) if isinstance(self.target, tuple) else self.target
        return {
            "kind": self.kind.value,
            "target": target,
            "timeout_s": self.timeout_s,
            "max_output": self.max_output,
            "notice": self.notice,
            "no_llm": self.no_llm,
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Gate:
        """A gate from its stored or given form (`GateError` when it is not valid)."""
        try:
            kind = GateKind(data["kind"])
        except (KeyError, ValueError, TypeError) as exc:
            raise GateError("gate.kind: one of command, http, python") from exc
        target = data.get("target")
        if kind is GateKind.COMMAND and isinstance(target, list):
            target = tuple(target)
        return cls(
            kind=kind,
            target=target,  # type: ignore[arg-type]  # checked by check_gate
            timeout_s=float(data.get("timeout_s", DEFAULT_TIMEOUT_S)),
            max_output=int(data.get("max_output", DEFAULT_MAX_OUTPUT)),
            notice=bool(data.get("notice", False)),
            no_llm=bool(data.get("no_llm", False)),
        )


def check_gate(gate: Gate) -> None:
    """Raise `GateError` for a gate out of its bounds."""
    if not 0 < gate.timeout_s <= MAX_TIMEOUT_S:
        raise GateError(f"gate.timeout_s: more than 0, at most {MAX_TIMEOUT_S:g} seconds")
    if not 1 <= gate.max_output <= MAX_MAX_OUTPUT:
        raise GateError(f"gate.max_output: 1 to {MAX_MAX_OUTPUT} bytes")
    target = gate.target
    if gate.kind is GateKind.COMMAND:
        if not isinstance(target, tuple) or not target:
            raise GateError("gate.target: a command is a non-empty list of words (no shell)")
        if len(target) > MAX_ARGS or not all(isinstance(w, str) for w in target):
            raise GateError(f"gate.target: at most {MAX_ARGS} words, each a string")
        if not target[0] or sum(len(w) for w in target) > MAX_TARGET or "\0" in "".join(target):
            raise GateError(f"gate.target: a program, and at most {MAX_TARGET} characters")
        return
    if not isinstance(target, str) or not target or len(target) > MAX_TARGET:
        raise GateError(f"gate.target: a string of 1 to {MAX_TARGET} characters")
    if gate.kind is GateKind.HTTP and not re.match(r"^https?://[^\s]+$", target):
        raise GateError("gate.target: an http:// or https:// URL")
    if gate.kind is GateKind.PYTHON and not _ENTRY_POINT.match(target):
        raise GateError('gate.target: an entry point "package.module:function"')


@dataclass(frozen=True, slots=True)
class GateResult:
    """What a gate said: its verdict, its output (bounded, decoded) and, for an error, why;
    `approval_id`: the approval the tool policy asked for before it ran, if any.
    """

    verdict: GateVerdict
    output: str = ""
    error: str | None = None
    truncated: bool = False
    approval_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """What the run keeps of it (its `delivery` record's `gate`)."""
        record: dict[str, Any] = {"verdict": self.verdict.value}
        if self.truncated:
            record["truncated"] = True
        if self.error:
            record["error"] = self.error
        if self.approval_id:
            record["approval_id"] = self.approval_id
        return record


def command_verdict(code: int | None) -> GateVerdict:
    """0 = run, 1 = skip, anything else (a signal: a negative code, or None) = error."""
    if code == 0:
        return GateVerdict.RUN
    if code == 1:
        return GateVerdict.SKIP
    return GateVerdict.ERROR


def http_verdict(status: int) -> GateVerdict:
    """2xx = run (but 204: nothing to do), 304/404/409/412/423 = skip, the rest = error."""
    if status in SKIP_STATUSES:
        return GateVerdict.SKIP
    if 200 <= status < 300:
        return GateVerdict.RUN
    return GateVerdict.ERROR


def python_verdict(value: object) -> tuple[GateVerdict, str]:
    """A truthy value runs, a falsy one skips; `(bool, text)` gives the text as the output
    (any other value's output is its `str`, but None's and a bool's: empty).
    """
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
        ok, text = value
        return (GateVerdict.RUN if ok else GateVerdict.SKIP), "" if text is None else str(text)
    text = "" if value is None or isinstance(value, bool) else str(value)
    return (GateVerdict.RUN if value else GateVerdict.SKIP), text


def bounded(data: bytes, limit: int) -> tuple[str, bool]:
    """`data` cut at `limit` bytes (whole characters), decoded; and whether it was cut."""
    cut = len(data) > limit
    return data[:limit].decode("utf-8", errors="ignore"), cut


def tail(text: str, size: int = ERROR_TAIL) -> str:
    """The last `size` characters of `text`, stripped (a failed gate's error keeps these)."""
    text = text.strip()
    return text if len(text) <= size else "…" + text[-size:]


def notice_text(job_name: str | None, output: str) -> str:
    """A gated-out fire's notice (a `notice` gate): that it did not run, and what the gate said."""
    name = f" “{job_name}”" if job_name else ""
    text = f"Scheduled automation{name} did not run: its gate found nothing to do."
    said = output.strip()
    if said:
        text += "\n" + (said if len(said) <= NOTICE_CHARS else said[:NOTICE_CHARS] + "…")
    return text


def with_gate_output(message: str, output: str) -> str:
    """An isolated run's prompt when its gate let it through: the task, then what the gate
    reported (a session turn's template `cron.agent_turn.gated` says the same).
    """
    return f"{message}\n\nWhat the pre-check reported:\n{output}"
