// The chat view: the transcript, the turn being streamed, tool events and messages waiting to run.

import { path } from "./api.js";
import { clockIcon, h, localTime } from "./dom.js";

const NEAR_BOTTOM_PX = 80;

/** How a transcript entry is shown: its classes, who said it and an optional badge. */
function entryStyle(message) {
  const meta = message.meta || {};
  const classes = ["msg", `role-${message.role}`];
  let who = { user: "You", assistant: "Assistant", system: "System" }[message.role] || message.role;
  let badge = null;
  if (meta._automation_turn) {
    classes.push("trigger");
    who = "Scheduled automation";
    badge = meta.automation_name || "automation";
  } else if (meta._recall_turn || meta.is_recall) {
    classes.push("trigger", "recall");
    who = "Recall";
    badge = meta.automation_name || "recall";
  } else if (meta._legacy_delivery) {
    classes.push("delivery");
    who = "Delivered result";
  }
  if (meta._status_notice) {
    classes.push("notice");
    who = { interrupted: "Interrupted", cancelled: "Stopped" }[meta.status] || "Notice";
  }
  if (message.role === "assistant" && (meta.source === "automation" || meta.source === "recall")) {
    classes.push("scheduled-reply");
  }
  return { classes, who, badge };
}

function toolSummary(event) {
  const args = event.args || {};
  const bits = [args.action, args.name, args.when, args.call_type].filter(
    (v) => typeof v === "string" && v,
  );
  return bits.length ? `${event.name} · ${bits.join(" · ")}` : event.name;
}

export class ChatView {
  /** onRunning(bool): a turn of this session started/ended; onError(message). */
  constructor({ api, onRunning, onError }) {
    this.api = api;
    this.onRunning = onRunning;
    this.onError = onError;
    this.transcript = document.getElementById("transcript");
    this.list = document.getElementById("messages");
    this.pendingArea = document.getElementById("pending");
    this.empty = document.getElementById("chat-empty");
    this.key = null;
    this.generation = 0;
    this.chain = Promise.resolve();
    this.reset();
  }

  reset() {
    this.rendered = new Set(); // message ids
    this.userTurns = new Set(); // turn ids whose user message is shown
    this.turnTools = new Map(); // turn id -> saved tool calls waiting for that turn's reply
    this.undelivered = new Map(); // message id -> "channel: error" of a delivery that gave up
    this.lastSeq = 0;
    this.live = null; // the turn being streamed: {turnId, el, body, tools}
    this.pending = []; // {el, turnId, content}
    this.list.replaceChildren();
    this.pendingArea.replaceChildren();
  }

  /** Show session `key` (null: none). Loading and events are serialized in one chain. */
  open(key) {
    this.generation += 1;
    this.key = key;
    this.reset();
    this.empty.hidden = key !== null;
    this.setRunning(false);
    if (key !== null) this.enqueue(() => this.reload());
  }

  enqueue(task) {
    const generation = this.generation;
    this.chain = this.chain
      .then(() => (generation === this.generation ? task() : undefined))
      .catch((error) => {
        if (generation === this.generation) this.onError(`Could not update the chat: ${error.message}`);
      });
    return this.chain;
  }

  /** A WebSocket event; those of other sessions are ignored. */
  handle(event) {
    if (this.key === null || event.session_key !== this.key) return;
    switch (event.type) {
      case "subscribed":
        this.enqueue(async () => {
          // A fresh start: the transcript as stored, then the turn in progress from the replay.
          this.live = null; // its element goes with the reload
          await this.reload();
          this.setRunning(Boolean(event.running_turn));
          for (const replayed of event.replay || []) this.applyStream(replayed);
        });
        break;
      case "stream_start":
        this.enqueue(async () => {
          try {
            await this.fetchNew(); // the user message or trigger entry that starts the turn
          } finally {
            this.applyStream(event); // stream the reply even if that read failed
          }
        });
        break;
      case "text_delta":
      case "thinking_delta":
      case "tool_started":
      case "tool_call":
        this.enqueue(() => this.applyStream(event));
        break;
      case "stream_end":
        this.enqueue(async () => {
          await this.fetchNew(); // the reply (or notice) replaces the streamed text
          if (this.live && this.live.turnId === event.turn_id) this.dropLive();
          this.setRunning(false);
        });
        break;
      case "session_sync":
      case "message":
        this.enqueue(() => this.fetchNew());
        break;
      case "delivery_failed":
        if (!event.retryable) this.markUndelivered(event.message_id, `${event.channel}: ${event.error}`);
        break;
      default:
        break;
    }
  }

  /** A message a channel could not deliver (it gave up): a badge with the reason. */
  markUndelivered(messageId, reason) {
    this.undelivered.set(messageId, reason);
    const el = this.list.querySelector(`article[data-id="${CSS.escape(messageId)}"]`);
    if (!el || el.querySelector(".undelivered-badge")) return;
    el.classList.add("undelivered");
    el.querySelector(".msg-head")?.append(
      h("span", { class: "badge undelivered-badge", title: `Not delivered: ${reason}` }, "not delivered"),
    );
  }

  /** The open session's failed deliveries, from their records (after a load or reload). */
  async loadUndelivered(key) {
    let data;
    try {
      data = await this.api("GET", path.deliveries(key, "failed"));
    } catch {
      return; // the transcript still shows; the badges come with the next event
    }
    if (key !== this.key) return;
    for (const d of data.deliveries) this.markUndelivered(d.message_id, `${d.channel}: ${d.last_error || "failed"}`);
  }

  async reload() {
    const key = this.key;
    const data = await this.api("GET", path.messages(key));
    if (key !== this.key) return;
    this.list.replaceChildren();
    this.rendered = new Set();
    this.userTurns = new Set();
    this.turnTools = new Map();
    this.lastSeq = 0;
    if (this.live) this.list.append(this.live.el);
    for (const message of data.messages) this.render(message);
    this.scrollToEnd(true);
    await this.loadUndelivered(key);
  }

  async fetchNew() {
    const key = this.key;
    const data = await this.api("GET", path.messages(key, this.lastSeq));
    if (key !== this.key) return;
    const stick = this.nearBottom();
    for (const message of data.messages) this.render(message);
    this.scrollToEnd(stick);
  }

  render(message) {
    this.lastSeq = Math.max(this.lastSeq, message.seq);
    if (this.rendered.has(message.id)) return;
    this.rendered.add(message.id);
    const meta = message.meta || {};
    if (message.role === "user" && meta.turn_id) this.settlePending(meta.turn_id, message.content);
    if (message.role === "tool") {
      // A saved tool call: shown folded inside its turn's reply (which follows it), unless
      // that turn is the one being streamed (its tool events are shown there already).
      if (this.live && meta.turn_id === this.live.turnId) return;
      if (!this.turnTools.has(meta.turn_id)) this.turnTools.set(meta.turn_id, h("div", { class: "tools" }));
      this.turnTools.get(meta.turn_id).append(
        this.toolElement({ name: meta.name, args: meta.args, result: message.content, ok: meta.ok }, false),
      );
      return;
    }
    // The reply of the turn being streamed takes the streamed element's place.
    if (this.live && message.role === "assistant" && meta.turn_id === this.live.turnId) {
      const el = this.entryElement(message, this.live.tools);
      this.live.el.replaceWith(el);
      this.live = null;
      this.markIfUndelivered(message.id);
      return;
    }
    let tools = null;
    if (message.role === "assistant" && this.turnTools.has(meta.turn_id)) {
      tools = this.turnTools.get(meta.turn_id);
      this.turnTools.delete(meta.turn_id);
    }
    const el = message.role === "summary" ? this.summaryElement(message) : this.entryElement(message, tools);
    if (this.live) this.list.insertBefore(el, this.live.el);
    else this.list.append(el);
    this.markIfUndelivered(message.id);
  }

  markIfUndelivered(messageId) {
    if (this.undelivered.has(messageId)) this.markUndelivered(messageId, this.undelivered.get(messageId));
  }

  entryElement(message, tools = null) {
    const { classes, who, badge } = entryStyle(message);
    const when = h(
      "time",
      { class: "when", datetime: message.created_at, title: message.created_at },
      localTime(message.created_at),
    );
    let head;
    let text = message.content;
    if (badge) {
      // A trigger entry: its first line ("Scheduled automation triggered: x") is the heading.
      const [first, ...rest] = text.split("\n");
      text = rest.join("\n").trim();
      head = h(
        "div",
        { class: "msg-head" },
        h("span", { class: "badge clock-badge" }, clockIcon(), who === "Recall" ? "Recall" : "Scheduled"),
        h("span", { class: "trigger-title" }, first),
        when,
      );
    } else {
      head = h("div", { class: "msg-head" }, h("span", { class: "who" }, who), when);
    }
    return h(
      "article",
      {
        class: classes.join(" "),
        "aria-label": badge ? `${who}: ${badge}` : who,
        dataset: { id: message.id, seq: String(message.seq), role: message.role },
      },
      head,
      tools && tools.childElementCount ? tools : null,
      text ? h("div", { class: "msg-body" }, text) : null,
    );
  }

  /** A compaction's summary of the older conversation: one folded line, the text on demand. */
  summaryElement(message) {
    const covered = (message.meta || {}).entries;
    const label = covered ? `Summary of ${covered} earlier entries` : "Summary of the earlier conversation";
    return h(
      "article",
      {
        class: "msg role-summary",
        "aria-label": "Summary",
        dataset: { id: message.id, seq: String(message.seq), role: message.role },
      },
      h(
        "details",
        {},
        h("summary", {}, label, " ", h("time", { class: "when", datetime: message.created_at }, localTime(message.created_at))),
        h("div", { class: "msg-body" }, message.content),
      ),
    );
  }

  /** stream_start / text_delta / tool_started / tool_call of the turn in progress. */
  applyStream(event) {
    const stick = this.nearBottom();
    if (event.type === "stream_start") {
      this.dropLive();
      this.startLive(event);
    } else if (!this.live) {
      return; // a late event of a turn already shown whole
    } else if (event.type === "text_delta") {
      this.live.body.append(event.text || "");
      this.live.el.classList.remove("waiting");
    } else if (event.type === "thinking_delta") {
      // The model's reasoning: folded above the reply, dimmed; not kept once the turn ends.
      if (!this.live.thinking) {
        this.live.thinking = h("pre", { class: "thinking-text" });
        this.live.tools.before(
          h("details", { class: "thinking" }, h("summary", {}, "Thinking…"), this.live.thinking),
        );
      }
      this.live.thinking.append(event.text || "");
      this.live.el.classList.remove("waiting");
    } else if (event.type === "tool_started") {
      this.live.tools.append(this.toolElement(event, true));
    } else if (event.type === "tool_call") {
      const running = [...this.live.tools.querySelectorAll(".tool.running")].find(
        (el) => el.dataset.name === event.name,
      );
      const done = this.toolElement(event, false);
      if (running) running.replaceWith(done);
      else this.live.tools.append(done);
    }
    this.scrollToEnd(stick);
  }

  startLive(event) {
    const scheduled = event.source === "automation" || event.source === "recall";
    const tools = h("div", { class: "tools" });
    const body = h("div", { class: "msg-body" });
    const el = h(
      "article",
      {
        class: `msg role-assistant streaming waiting${scheduled ? " scheduled-reply" : ""}`,
        "aria-label": "Assistant (replying)",
        "aria-busy": "true",
        dataset: { turnId: event.turn_id },
      },
      h(
        "div",
        { class: "msg-head" },
        h("span", { class: "who" }, "Assistant"),
        h("span", { class: "typing", "aria-hidden": "true" }, h("i"), h("i"), h("i")),
      ),
      tools,
      body,
    );
    this.list.append(el);
    this.live = { turnId: event.turn_id, el, body, tools };
    this.setRunning(true);
  }

  dropLive() {
    if (!this.live) return;
    this.live.el.remove();
    this.live = null;
  }

  toolElement(event, running) {
    const summary = h(
      "summary",
      {},
      h("span", { class: "tool-icon", "aria-hidden": "true" }, running ? "⋯" : event.ok === false ? "✗" : "✓"),
      " ",
      toolSummary(event),
    );
    const args = JSON.stringify(event.args || {}, null, 1);
    return h(
      "details",
      { class: `tool${running ? " running" : ""}${event.ok === false ? " failed" : ""}`, dataset: { name: event.name } },
      summary,
      h("pre", { class: "tool-args" }, args),
      running ? null : h("pre", { class: "tool-result" }, event.result ?? ""),
    );
  }

  // -- messages sent from here, shown until their turn starts -------------------------------

  async send(content) {
    const key = this.key;
    const el = h(
      "article",
      { class: "msg role-user pending-msg", "aria-label": "You (waiting)" },
      h("div", { class: "msg-head" }, h("span", { class: "who" }, "You"), h("span", { class: "muted" }, "sending…")),
      h("div", { class: "msg-body" }, content),
    );
    const item = { el, turnId: null, content };
    this.pending.push(item);
    this.pendingArea.append(el);
    this.scrollToEnd(true);
    try {
      const answer = await this.api("POST", `${path.session(key)}/messages`, { content });
      if (key !== this.key) return;
      item.turnId = answer.turn_id;
      if (this.userTurns.has(answer.turn_id)) this.removePending(item);
      else el.querySelector(".muted").textContent = "waiting for the current turn…";
    } catch (error) {
      el.classList.add("failed");
      el.querySelector(".muted").textContent = `not sent: ${error.message}`;
      throw error;
    }
  }

  settlePending(turnId, content) {
    this.userTurns.add(turnId);
    const item =
      this.pending.find((p) => p.turnId === turnId) ||
      this.pending.find((p) => p.turnId === null && p.content === content);
    if (item) this.removePending(item);
  }

  removePending(item) {
    item.el.remove();
    this.pending = this.pending.filter((p) => p !== item);
  }

  // -- helpers -------------------------------------------------------------------------------

  setRunning(running) {
    this.running = running;
    this.onRunning(running);
  }

  nearBottom() {
    const t = this.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight < NEAR_BOTTOM_PX;
  }

  scrollToEnd(stick) {
    if (stick) this.transcript.scrollTop = this.transcript.scrollHeight;
  }
}
