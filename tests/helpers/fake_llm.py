"""A fake LLM server on loopback: OpenAI chat completions and the Anthropic Messages API, for real.

`FakeLLM` serves `POST /v1/chat/completions` (streamed as SSE chunks or one JSON answer) and
`POST /v1/messages` (Anthropic's event stream or one JSON message) with uvicorn in a thread of its
own, so an in-process `AgentCron` and an `agentcron serve` child process can both reach it. It
answers from the request (`script`): a tool result gets "Done: <result>"; "remind me in X to Y"
gets thinking, a short text and a `cron add` call; anything else gets "Handled: <first line>".
Every request is kept in `requests` (path, headers, JSON body) for the test to read.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

INPUT_TOKENS = 120  # of every answer
OUTPUT_TOKENS = 30


@dataclass(frozen=True)
class Reply:
    """What the model answers: thinking, text, and one tool call (name, arguments), each optional."""

    text: str = ""
    thinking: str = ""
    tool: tuple[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Turn:
    """The part of a request a script reads: the last user text, the last tool result if the
    request ends with one.
    """

    user_text: str
    tool_result: str | None


@dataclass
class Recorded:
    """One request the server got."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api(self) -> str:
        return "anthropic" if self.path.endswith("/messages") else "openai"


_REMIND = re.compile(r"remind me (in .+?) to (.+)", re.IGNORECASE)


def default_script(turn: Turn) -> Reply:
    """A tool result: "Done: <it>"; "remind me in X to Y": a `cron add`; else "Handled: ..."."""
    if turn.tool_result is not None:
        return Reply(text=f"Done: {turn.tool_result.splitlines()[0]}")
    found = _REMIND.search(turn.user_text)
    if found:
        when, task = found.group(1), found.group(2).strip().rstrip(".")
        args = {"action": "add", "name": task.split()[0], "when": when, "message": task}
        return Reply(
            thinking="The user wants a reminder, so I schedule it with the cron tool.",
            text="Scheduling it now.",
            tool=("cron", args),
        )
    first = turn.user_text.strip().splitlines()[0] if turn.user_text.strip() else ""
    return Reply(text=f"Handled: {first}")


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text blocks of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if part.get("type") == "text"
        )
    return ""


def openai_turn(body: dict[str, Any]) -> Turn:
    """The script's view of a chat completions request."""
    messages = body.get("messages", [])
    users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    last = messages[-1] if messages else {}
    result = _text_of(last.get("content")) if last.get("role") == "tool" else None
    return Turn(users[-1] if users else "", result)


def anthropic_turn(body: dict[str, Any]) -> Turn:
    """The script's view of a Messages API request (tool results are user content blocks)."""
    users: list[str] = []
    result: str | None = None
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if texts:
            users.append("\n".join(texts))
        result = _text_of(results[-1].get("content")) if results else None
    return Turn(users[-1] if users else "", result)


def _pieces(text: str) -> list[str]:
    """Text cut in word-sized deltas (streamed in several chunks, as servers do)."""
    return re.findall(r"\S+\s*|\s+", text)


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


def openai_chunks(reply: Reply, model: str) -> Iterator[str]:
    """A streamed chat completion: reasoning_content deltas, content deltas, a tool call whose
    arguments come in two pieces, the finish reason, then usage in a last chunk without choices.
    """
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.thinking):
        yield chunk({"reasoning_content": piece})
    for piece in _pieces(reply.text):
        yield chunk({"content": piece})
    if reply.tool is not None:
        name, args = reply.tool
        raw = json.dumps(args)
        half = len(raw) // 2
        start = {
            "index": 0,
            "id": "call_fake_1",
            "type": "function",
            "function": {"name": name, "arguments": raw[:half]},
        }
        yield chunk({"tool_calls": [start]})
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": raw[half:]}}]})
    yield chunk({}, "tool_calls" if reply.tool else "stop")
    usage = {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }
    yield _sse({**base, "choices": [], "usage": usage})
    yield "data: [DONE]\n\n"


def openai_completion(reply: Reply, model: str) -> dict[str, Any]:
    """The same reply as one (non-streamed) chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool is not None:
        name, args = reply.tool
        message["tool_calls"] = [
            {
                "id": "call_fake_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": INPUT_TOKENS,
            "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        },
    }


def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": "sig-fake"})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool is not None:
        name, args = reply.tool
        blocks.append({"type": "tool_use", "id": "toolu_fake_1", "name": name, "input": args})
    return blocks


def anthropic_events(reply: Reply, model: str) -> Iterator[str]:
    """A streamed Messages API answer: message_start, a content block each for thinking (with
    its signature), text and tool_use (its input as input_json_delta pieces), message_delta
    with the stop reason and usage, message_stop.
    """
    start: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
    }
    yield _sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(_anthropic_blocks(reply)):
        kind = block["type"]
        if kind == "thinking":
            opened: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            half = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (raw[:half], raw[half:])
            ]
        yield _sse(
            {"type": "content_block_start", "index": index, "content_block": opened},
            "content_block_start",
        )
        for delta in deltas:
            yield _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    stop = "tool_use" if reply.tool else "end_turn"
    yield _sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": OUTPUT_TOKENS},
        },
        "message_delta",
    )
    yield _sse({"type": "message_stop"}, "message_stop")


def anthropic_message(reply: Reply, model: str) -> dict[str, Any]:
    """The same reply as one (non-streamed) Messages API answer."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _anthropic_blocks(reply),
        "stop_reason": "tool_use" if reply.tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
    }


async def _stream(lines: Iterator[str]) -> AsyncIterator[bytes]:
    for line in lines:
        yield line.encode()


@dataclass
class FakeLLM:
    """Both APIs on one loopback port (`url`); `requests` holds what it got, oldest first."""

    script: Callable[[Turn], Reply] = default_script
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0
    server: uvicorn.Server | None = None  # set once it serves

    def open_connections(self) -> int:
        """Client connections open now (a client that closed its pool leaves none)."""
        return 0 if self.server is None else len(self.server.server_state.connections)

    @property
    def url(self) -> str:
        """The server's root: the Anthropic SDK's base URL; OpenAI clients add `/v1`."""
        return f"http://127.0.0.1:{self.port}"

    def of(self, api: str) -> list[Recorded]:
        """The requests to one API ("openai" or "anthropic")."""
        return [r for r in self.requests if r.api == api]

    async def _openai(self, request: Request) -> Response:
        body = await self._record(request)
        reply = self.script(openai_turn(body))
        model = str(body.get("model", ""))
        if body.get("stream"):
            return StreamingResponse(
                _stream(openai_chunks(reply, model)), media_type="text/event-stream"
            )
        return JSONResponse(openai_completion(reply, model))

    async def _anthropic(self, request: Request) -> Response:
        body = await self._record(request)
        reply = self.script(anthropic_turn(body))
        model = str(body.get("model", ""))
        if body.get("stream"):
            return StreamingResponse(
                _stream(anthropic_events(reply, model)), media_type="text/event-stream"
            )
        return JSONResponse(anthropic_message(reply, model))

    async def _record(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(await request.body())
        self.requests.append(Recorded(request.url.path, dict(request.headers), body))
        return body

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_llm(script: Callable[[Turn], Reply] = default_script) -> Iterator[FakeLLM]:
    """A `FakeLLM` served by uvicorn in a thread of its own, stopped on exit."""
    fake = FakeLLM(script=script, port=_free_port())
    # Idle connections stay open until their client closes them (uvicorn's 5 s would hide a leak).
    config = uvicorn.Config(
        fake.app(),
        host="127.0.0.1",
        port=fake.port,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=300,
    )
    server = fake.server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fake-llm", daemon=True)
    thread.start()
    started = threading.Event()
    while not server.started and thread.is_alive():
        started.wait(0.01)  # uvicorn marks its start with a flag only
    if not server.started:
        raise RuntimeError("the fake LLM server did not start")
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(10)
