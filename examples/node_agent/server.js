// An agent for agentcron's HTTP runner: one signed POST per turn, answered as SSE or JSON.
const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const webhook = new Webhook(process.env.AGENTCRON_RUNNER_SECRET); // whsec_..., as agentcron's

function answer(turn) { // your agent here: a model call, tools...
  const text = `${turn.trigger ? `[${turn.trigger.name}] ` : ""}You said: ${turn.prompt}`;
  return { text, usage: { input_tokens: turn.prompt.length, output_tokens: text.length } };
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let turn;
    try { // the signature over the exact bytes, the timestamp within 5 minutes
      turn = webhook.verify(Buffer.concat(chunks).toString("utf8"), req.headers);
    } catch {
      res.writeHead(401, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: "unauthorized", detail: "bad signature" }));
    }
    const { text, usage } = answer(turn);
    if (!(req.headers.accept || "").includes("text/event-stream")) {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ text, usage }));
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    for (const word of text.split(/(?<= )/)) send("delta", { text: word });
    res.end(`event: done\ndata: ${JSON.stringify({ usage })}\n\n`); // the reply: the deltas
  });
});
server.listen(Number(process.env.PORT ?? 8787), process.env.HOST ?? "127.0.0.1", () => {
  const { address, port } = server.address();
  console.log(`listening on http://${address}:${port}`);
});
