"""domain/gates.py: how a gate's answer reads, its bounds, and its stored form."""

from __future__ import annotations

import pytest

from agentcron.domain.gates import (
    NOTICE_CHARS,
    Gate,
    GateError,
    GateKind,
    GateResult,
    GateVerdict,
    bounded,
    command_verdict,
    gate_args,
    gate_tool,
    http_verdict,
    notice_text,
    policy_denied,
    python_verdict,
    tail,
    with_gate_output,
)

RUN, SKIP, ERROR = GateVerdict.RUN, GateVerdict.SKIP, GateVerdict.ERROR


@pytest.mark.parametrize(
    ("code", "verdict"), [(0, RUN), (1, SKIP), (2, ERROR), (127, ERROR), (-9, ERROR), (None, ERROR)]
)
def test_a_command_runs_on_0_skips_on_1_and_fails_otherwise(
    code: int | None, verdict: GateVerdict
) -> None:
    assert command_verdict(code) is verdict


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(200, RUN), (201, RUN), (204, SKIP), (304, SKIP), (404, SKIP), (409, SKIP), (412, SKIP),
     (423, SKIP), (301, ERROR), (400, ERROR), (500, ERROR), (503, ERROR)],
)  # fmt: skip
def test_an_http_status_reads_as_run_skip_or_error(status: int, verdict: GateVerdict) -> None:
    assert http_verdict(status) is verdict


@pytest.mark.parametrize(
    ("value", "verdict", "text"),
    [(True, RUN, ""), (False, SKIP, ""), (None, SKIP, ""), (0, SKIP, "0"), ("new", RUN, "new"),
     ("", SKIP, ""), ((True, "3 new"), RUN, "3 new"), ((False, "none"), SKIP, "none"),
     ((False, None), SKIP, ""), ([], SKIP, "[]")],
)  # fmt: skip
def test_a_python_value_reads_as_truthy_or_a_pair(
    value: object, verdict: GateVerdict, text: str
) -> None:
    assert python_verdict(value) == (verdict, text)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "shell", "target": "ls"},
        {"kind": "command", "target": []},
        {"kind": "command", "target": "ls -l"},
        {"kind": "command", "target": [""]},
        {"kind": "command", "target": ["x"] * 65},
        {"kind": "command", "target": ["true"], "timeout_s": 0},
        {"kind": "command", "target": ["true"], "timeout_s": 121},
        {"kind": "command", "target": ["true"], "max_output": 0},
        {"kind": "command", "target": ["true"], "max_output": 256 * 1024 + 1},
        {"kind": "http", "target": "ftp://x"},
        {"kind": "http", "target": "http://a b"},
        {"kind": "python", "target": "module"},
        {"kind": "python", "target": "a.b:c.d"},
    ],
)
def test_a_gate_out_of_its_bounds_is_refused(data: dict[str, object]) -> None:
    with pytest.raises(GateError):
        Gate.of(data)


def test_the_stored_form_reads_back_the_same() -> None:
    gate = Gate(GateKind.COMMAND, ("python", "-c", "1"), timeout_s=3, max_output=100, notice=True)
    assert Gate.of(gate.as_dict()) == gate
    assert gate.as_dict()["target"] == ["python", "-c", "1"]
    http = Gate.of({"kind": "http", "target": "https://x.example/q"})
    assert (http.timeout_s, http.max_output, http.no_llm) == (10.0, 16 * 1024, False)


def test_output_is_cut_at_its_bound_on_whole_characters() -> None:
    assert bounded(b"abc", 3) == ("abc", False)
    assert bounded(b"abcd", 3) == ("abc", True)
    assert bounded("é".encode() * 2, 3) == ("é", True)  # the cut half character is dropped
    assert tail("  x  ") == "x"
    assert tail("a" * 600, 10) == "…" + "a" * 10


def test_a_notice_says_the_fire_did_not_run_and_what_the_gate_said_cut() -> None:
    assert notice_text("orders", "  ") == (
        "Scheduled automation “orders” did not run: its gate found nothing to do."
    )
    assert notice_text(None, "queue empty\n").endswith("nothing to do.\nqueue empty")
    long = notice_text("x", "a" * (NOTICE_CHARS + 10))
    assert long.endswith("\n" + "a" * NOTICE_CHARS + "…")
    assert with_gate_output("Sum up.", "3 new") == "Sum up.\n\nWhat the pre-check reported:\n3 new"


def test_a_gate_is_known_to_the_tool_policy_by_its_kind_and_asks_with_its_target() -> None:
    assert [gate_tool(kind) for kind in GateKind] == ["gate.command", "gate.http", "gate.python"]
    command = Gate(GateKind.COMMAND, ("python3", "-c", "exit 1", "a b"))
    # A command's words are one shell-quoted line: a standing grant's glob can match it.
    assert gate_args(command, "j1") == {"target": "python3 -c 'exit 1' 'a b'", "job_id": "j1"}
    url = Gate(GateKind.HTTP, "https://example.com/queue")
    assert gate_args(url, "j2") == {"target": "https://example.com/queue", "job_id": "j2"}
    assert policy_denied("gate.http", "its policy is deny") == (
        "gate denied by the tool policy (gate.http): its policy is deny; the gate did not run"
    )


def test_a_gate_result_keeps_the_approval_that_let_it_run() -> None:
    assert GateResult(GateVerdict.RUN).as_dict() == {"verdict": "run"}
    approved = GateResult(GateVerdict.RUN, "out", approval_id="a1")
    assert approved.as_dict() == {"verdict": "run", "approval_id": "a1"}
