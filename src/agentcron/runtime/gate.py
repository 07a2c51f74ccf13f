"""Run one job's gate (domain/gates.py), bounded: a command (asyncio subprocess, no shell, its
own process group, killed with it at the timeout), an HTTP GET (httpx) or a Python entry point
("module:function", sync in a thread or async). Output is cut at the gate's `max_output`.

`GatePolicy` comes first: the gate as a call of its tool (`gate.command`, `gate.http`,
`gate.python`) through the tool policy the built-in agent's calls pass (the same table and
lookup, `domain/approvals.resolve_policy`) and, for `approve`, the same approval broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from agentcron.domain.approvals import ApprovalState, Approver, Policy, resolve_policy
from agentcron.domain.gates import (
    CODE_KINDS,
    Gate,
    GateKind,
    GateResult,
    GateVerdict,
    bounded,
    command_verdict,
    gate_args,
    gate_tool,
    http_verdict,
    policy_denied,
    python_verdict,
    tail,
)
from agentcron.runtime.execution import Execution

log = logging.getLogger(__name__)

GATES_OFF = (
    "gates that run code (command, python) are off on this server: set [engine] gates = true "
    "(AGENTCRON_GATES=1)"
)


NO_APPROVER = "it needs a person's approval and no one can be asked here"


@dataclass(frozen=True, slots=True)
class PolicyAnswer:
    """What the tool policy said of a gate: `refusal` None lets it run (else the run's error);
    `approval_id`: the approval asked for it, if any.
    """

    refusal: str | None = None
    approval_id: str | None = None

    def refused(self) -> GateResult:
        """A refused gate as the run's record shows it: an error that it did not run."""
        return GateResult(GateVerdict.ERROR, error=self.refusal, approval_id=self.approval_id)


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """The tool policy a gate passes before it runs: `policies` (tool name or glob -> allow,
    approve or deny: the built-in agent's table, `[tools.policy]` and `tool_policy`),
    `approvals` (the broker a gate that needs approval waits on; None: nobody can be asked,
    it is refused) and `timeouts` (its wait per tool name, `[tools.approval_timeout]`; else
    the broker's). With no policy for a gate's tool it is allowed.
    """

    policies: Mapping[str, Policy] = field(default_factory=dict)
    approvals: Approver | None = None
    timeouts: Mapping[str, timedelta] = field(default_factory=dict)

    async def check(
        self,
        gate: Gate,
        *,
        job_id: str,
        session_key: str | None,
        turn_id: str,
        execution: Execution,
    ) -> PolicyAnswer:
        """May the gate run? `approve` waits for a person (or a standing grant of the job),
        holding no slot (`Execution.before_start`): approved runs it; denied or expired
        refuses it, the approval's end said in the refusal.
        """
        tool = gate_tool(gate.kind)
        args = gate_args(gate, job_id)
        policy = resolve_policy(tool, args, policies=self.policies)
        if policy == "allow":
            return PolicyAnswer()
        if policy == "deny":
            return PolicyAnswer(policy_denied(tool, "its policy is deny"))
        if self.approvals is None:
            return PolicyAnswer(policy_denied(tool, NO_APPROVER))
        async with execution.before_start():
            approval = await self.approvals.request(
                tool=tool,
                args=args,
                session_key=session_key,
                turn_id=turn_id,
                wait=self.timeouts.get(tool),
            )
        if approval.state is ApprovalState.APPROVED:
            return PolicyAnswer(approval_id=approval.id)
        by = f" by {approval.decided_by}" if approval.decided_by else ""
        why = f"its approval was {approval.state.value}{by}"
        return PolicyAnswer(policy_denied(tool, why), approval.id)


async def run_gate(gate: Gate, *, allow_code: bool, approval_id: str | None = None) -> GateResult:
    """The gate's answer; never raises for what the gate does (a failure is an `ERROR`
    result with the reason). `allow_code`: the setting `[engine] gates`; `approval_id`: the
    approval that let it run, kept on its result.
    """
    result = await _run(gate, allow_code=allow_code)
    return result if approval_id is None else replace(result, approval_id=approval_id)


async def _run(gate: Gate, *, allow_code: bool) -> GateResult:
    if gate.kind in CODE_KINDS and not allow_code:
        return GateResult(GateVerdict.ERROR, error=GATES_OFF)
    try:
        if gate.kind is GateKind.COMMAND:
            return await _command(gate)
        if gate.kind is GateKind.HTTP:
            return await asyncio.wait_for(_http(gate), gate.timeout_s)
        return await asyncio.wait_for(_python(gate), gate.timeout_s)
    except TimeoutError:
        return GateResult(GateVerdict.ERROR, error=f"timed out after {gate.timeout_s:g} s")
    except Exception as exc:  # the gate's own failure: the run says why
        return GateResult(GateVerdict.ERROR, error=tail(f"{type(exc).__name__}: {exc}"))


async def _command(gate: Gate) -> GateResult:
    argv = list(gate.target) if isinstance(gate.target, tuple) else [gate.target]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
    except OSError as exc:
        return GateResult(GateVerdict.ERROR, error=f"cannot start {argv[0]!r}: {exc.strerror}")
    limit = gate.max_output
    stdout, stderr = bytearray(), bytearray()

    async def read(stream: asyncio.StreamReader | None, into: bytearray) -> None:
        # Read to the end (the process must not block on a full pipe), keep the bound + 1.
        if stream is None:
            return
        while chunk := await stream.read(65536):
            if len(into) <= limit:
                into.extend(chunk[: limit + 1 - len(into)])

    try:
        await asyncio.wait_for(
            asyncio.gather(read(proc.stdout, stdout), read(proc.stderr, stderr), proc.wait()),
            gate.timeout_s,
        )
    except (TimeoutError, asyncio.CancelledError):
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    output, cut = bounded(bytes(stdout), limit)
    verdict = command_verdict(proc.returncode)
    if verdict is GateVerdict.ERROR:
        err, _ = bounded(bytes(stderr), limit)
        why = f"exit code {proc.returncode}"
        detail = tail(err) or tail(output)
        return GateResult(verdict, output, f"{why}: {detail}" if detail else why, cut)
    return GateResult(verdict, output, truncated=cut)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _http(gate: Gate) -> GateResult:
    import httpx  # only where a gate is HTTP (`import agentcron` loads no optional library)

    url = str(gate.target)
    limit = gate.max_output
    async with (
        httpx.AsyncClient(timeout=gate.timeout_s, follow_redirects=False) as client,
        client.stream("GET", url) as response,
    ):
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body.extend(chunk[: limit + 1 - len(body)])
            if len(body) > limit:
                break
    output, cut = bounded(bytes(body), limit)
    verdict = http_verdict(response.status_code)
    if verdict is GateVerdict.ERROR:
        detail = tail(output)
        why = f"HTTP {response.status_code}"
        return GateResult(verdict, output, f"{why}: {detail}" if detail else why, cut)
    return GateResult(verdict, output, truncated=cut)


async def _python(gate: Gate) -> GateResult:
    function = _entry_point(str(gate.target))
    if inspect.iscoroutinefunction(function):
        value = await function()
    else:
        value = await asyncio.to_thread(function)
        if inspect.isawaitable(value):
            value = await value
    verdict, text = python_verdict(value)
    output, cut = bounded(text.encode("utf-8"), gate.max_output)
    return GateResult(verdict, output, truncated=cut)


def _entry_point(target: str) -> Callable[[], Any]:
    module_name, _, name = target.partition(":")
    function = getattr(importlib.import_module(module_name), name, None)
    if not callable(function):
        raise LookupError(f"{target} is not a function")
    return function  # type: ignore[no-any-return]
