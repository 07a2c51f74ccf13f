"""A ~30-line agent for agentcron's HTTP runner (README "Your own agent over HTTP").

Run: AGENTCRON_RUNNER_SECRET=$(agentcron token --runner) uvicorn app:app --port 8400, then
`agentcron serve --runner-url http://127.0.0.1:8400/turn`. It checks each request's signature,
echoes the prompt, and asks a person before its one tool runs (a prompt starting with "!").
STREAM=1 answers with Server-Sent Events instead of JSON.
"""

import json
import os

import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse
from standardwebhooks import Webhook, WebhookVerificationError

SECRET = os.environ["AGENTCRON_RUNNER_SECRET"]  # `agentcron token --runner`
AGENTCRON = os.environ.get("AGENTCRON_URL", "http://127.0.0.1:8321")
app = FastAPI()


@app.post("/turn")
async def turn(request: Request) -> object:
    body = await request.body()
    try:
        turn = Webhook(SECRET).verify(body, dict(request.headers))
    except WebhookVerificationError:
        raise HTTPException(401, "bad signature") from None
    text, tools = f"You said: {turn['prompt']}", []
    if turn["prompt"].startswith("!"):  # the tool: a person approves each call first
        args = {"command": turn["prompt"][1:]}
        async with httpx.AsyncClient(timeout=None) as client:
            asked = await client.post(
                f"{AGENTCRON}/api/runner/approvals",
                headers={"authorization": f"Bearer {SECRET}"},
                json={"turn_id": turn["turn_id"], "tool": "shell", "args": args},
            )
        ok = asked.json()["approved"]
        tools = [{"name": "shell", "args": args, "result": "ran" if ok else "denied", "ok": ok}]
        text = "Done." if ok else "I was not allowed to."
    if os.environ.get("STREAM") != "1":
        return {"text": text, "tool_calls": tools, "usage": {"input_tokens": 1, "output_tokens": 1}}

    def events():  # tool reports, then the text in pieces, then done
        for tool in tools:
            yield f"event: tool\ndata: {json.dumps(tool)}\n\n"
        for i in range(0, len(text), 8):
            yield f"event: delta\ndata: {json.dumps({'text': text[i : i + 8]})}\n\n"
        yield "event: done\ndata: {}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
