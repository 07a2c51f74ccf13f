// The chat view: the transcript, the turn being streamed, tool calls, approval cards and
// messages waiting to run.

import { path } from "./api.js";
import { ApprovalCard, normalize } from "./approvals.js";
import { BROWSER_ZONE, clockIcon, h, knownZone, timeEl, zonedTime } from "./dom.js";
import { toolElement } from "./tools.js";

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

/** A saved `tool` transcript entry as the call toolElement() shows. */
function savedCall(message) {
  const meta = message.meta || {};
  return {
    name: meta.name,
    args: meta.args,
    result: message.content,
    ok: meta.ok,
    duration_ms: meta.duration_ms,
    truncated: meta.truncated,
  };
}

/**
 * Put an approval card right after the row of the call it gates: the first row of that tool
 * not paired with a card yet, one with the same arguments if there is one (cards come oldest
 * first); else at the end of `container`.
 */
function attachCard(container, card) {
  const rows = [...container.querySelectorAll(":scope > .tool")].filter(
    (row) => row.dataset.name === card.dataset.tool && !row.dataset.approvalId,
  );
  const row = rows.find((r) => r.dataset.args === card.dataset.args) || rows[0];
  if (row) {
    row.dataset.approvalId = card.dataset.approvalId;
    row.after(card);
  } else {
    container.append(card);
  }
}

/** The turn of `holders` (see heldFor) is on screen now, live or its reply: their cards go into
 * its `tools`, after their calls, and the holders go. */
function adoptHeld(holders, tools) {
  for (const holder of holders) {
    for (const card of holder.querySelectorAll(":scope > .approval")) attachCard(tools, card);
    holder.remove();
  }
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
    this.zone = BROWSER_ZONE; // the chat's zone: its times are shown in it (the header names it)
    this.generation = 0;
    this.chain = Promise.resolve();
    this.reset();
  }

  reset() {
    this.rendered = new Set(); // message ids
    this.userTurns = new Set(); // turn ids whose user message is shown
    this.closedTurns = new Set(); // turn ids whose closing entry (reply or notice) is shown
    this.turnTools = new Map(); // turn id -> saved tool calls waiting for that turn's reply
    this.undelivered = new Map(); // message id -> {id, reason} of a delivery that gave up
    this.approvals = new Map(); // approval id -> ApprovalCard shown
    this.lastSeq = 0;
    this.live = null; // the turn being streamed: {turnId, el, body, tools}
    this.pending = []; // {el, turnId, content}
    this.list.replaceChildren();
    this.pendingArea.replaceChildren();
  }

  /** Show session `key` (null: none), its times in `zone` (the chat's). Loading and events
   * are serialized in one chain. */
  open(key, zone = BROWSER_ZONE) {
    this.generation += 1;
    this.key = key;
    this.zone = knownZone(zone);
    this.reset();
    this.empty.hidden = key !== null;
    this.setRunning(false);
    if (key !== null) {
      this.enqueue(async () => {
        await this.reload();
        await this.loadApprovals();
      });
    }
  }

  /** The chat's zone changed (or became known): the times shown follow. */
  setZone(zone) {
    const shown = knownZone(zone);
    if (shown === this.zone) return;
    this.zone = shown;
    for (const el of this.list.querySelectorAll("time.when[datetime]")) {
      el.textContent = zonedTime(el.getAttribute("datetime"), shown);
      el.dataset.zone = shown;
    }
  }

  /** Scroll the transcript to a run's closing entry (its reply, or the notice of a failed
   * turn) and mark it a moment; after what is loading now. */
  reveal(messageId) {
    return this.enqueue(async () => {
      const el = messageId
        ? this.list.querySelector(`article[data-id="${CSS.escape(messageId)}"]`)
        : null;
      if (!el) {
        this.onError("That run's turn is not in this chat's transcript (any more).");
        return;
      }
      for (const shown of this.list.querySelectorAll("article.revealed")) shown.classList.remove("revealed");
      el.classList.add("revealed"); // its outline fades once (CSS); the class stays till the next
      el.scrollIntoView({ block: "center" });
    });
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
          // A turn that ended while the page (re)connected is replayed too: its reply, read
          // just now, is shown already, so its replay is not (nor is it running).
          const ended = this.closedTurns.has(event.running_turn);
          this.setRunning(Boolean(event.running_turn) && !ended);
          for (const replayed of event.replay || []) this.applyStream(replayed);
          await this.loadApprovals(); // not in the replay: pending ones come from the API
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
      case "approval_requested":
        this.enqueue(() => this.showApproval(normalize(event)));
        break;
      case "approval_decided":
        this.enqueue(() => this.approvals.get(event.approval_id)?.settle(event.state, event.decided_by));
        break;
      case "delivery_failed":
        if (!event.retryable) {
          const failure = { id: `${event.channel}:${event.message_id}`, reason: `${event.channel}: ${event.error}` };
          this.markUndelivered(event.message_id, failure);
        }
        break;
      case "delivery_succeeded":
        // a retry went through; a success on another channel leaves the mark
        if (this.undelivered.get(event.message_id)?.id === `${event.channel}:${event.message_id}`) {
          this.clearUndelivered(event.message_id);
        }
        break;
      default:
        break;
    }
  }

  /** A message a channel could not deliver (it gave up): a badge with the reason, and a
   * Retry button that re-sends it (the agent does not run again). */
  markUndelivered(messageId, failure) {
    this.undelivered.set(messageId, failure);
    const el = this.list.querySelector(`article[data-id="${CSS.escape(messageId)}"]`);
    if (!el || el.querySelector(".undelivered-badge")) return;
    el.classList.add("undelivered");
    const retry = h("button", { type: "button", class: "retry-delivery", title: `Send it again through ${failure.id.split(":")[0]}` }, "Retry");
    retry.addEventListener("click", () => this.retryDelivery(messageId, failure, retry));
    el.querySelector(".msg-head")?.append(
      h("span", { class: "badge undelivered-badge", title: `Not delivered: ${failure.reason}` }, "not delivered"),
      retry,
    );
  }

  /** The mark goes: the delivery was re-sent, or it succeeded. */
  clearUndelivered(messageId) {
    this.undelivered.delete(messageId);
    const el = this.list.querySelector(`article[data-id="${CSS.escape(messageId)}"]`);
    if (!el) return;
    el.classList.remove("undelivered");
    for (const part of el.querySelectorAll(".undelivered-badge, .retry-delivery")) part.remove();
  }

  async retryDelivery(messageId, failure, button) {
    button.disabled = true;
    button.textContent = "Retrying…";
    try {
      await this.api("POST", path.retryDelivery(failure.id));
    } catch (error) {
      button.disabled = false;
      button.textContent = "Retry";
      button.title = `Could not re-send: ${error.message}`;
      return;
    }
    this.clearUndelivered(messageId); // marked again if it fails again
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
    for (const d of data.deliveries) {
      this.markUndelivered(d.message_id, { id: d.id, reason: `${d.channel}: ${d.last_error || "failed"}` });
    }
  }

  async reload() {
    const key = this.key;
    const data = await this.api("GET", path.messages(key));
    if (key !== this.key) return;
    this.list.replaceChildren();
    this.rendered = new Set();
    this.userTurns = new Set();
    this.closedTurns = new Set();
    this.turnTools = new Map();
    // The cards went with the list but are kept (with a click on its way, its busy state):
    // loadApprovals() puts them back.
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
    if (message.role === "assistant" && meta.turn_id) this.closedTurns.add(meta.turn_id); // its closure
    if (message.role === "tool") {
      // A saved tool call: shown folded inside its turn's reply (which follows it). For the
      // turn being streamed these rows (with outcome and duration) replace the streamed ones.
      if (!this.turnTools.has(meta.turn_id)) this.turnTools.set(meta.turn_id, h("div", { class: "tools" }));
      this.turnTools.get(meta.turn_id).append(toolElement(savedCall(message)));
      return;
    }
    // The reply of the turn being streamed takes the streamed element's place.
    if (this.live && message.role === "assistant" && meta.turn_id === this.live.turnId) {
      let tools = this.live.tools;
      const saved = this.turnTools.get(meta.turn_id);
      if (saved) {
        // The saved rows, with the turn's approval cards (decided by now) after their calls.
        this.turnTools.delete(meta.turn_id);
        for (const card of this.live.tools.querySelectorAll(":scope > .approval")) attachCard(saved, card);
        tools = saved;
      }
      adoptHeld(this.heldFor(meta.turn_id), tools);
      const el = this.entryElement(message, tools);
      this.live.el.replaceWith(el);
      this.live = null;
      this.markIfUndelivered(message.id);
      return;
    }
    let tools = null;
    if (message.role === "assistant" && meta.turn_id) {
      tools = this.turnTools.get(meta.turn_id) || null;
      this.turnTools.delete(meta.turn_id);
      const held = this.heldFor(meta.turn_id);
      if (held.length) {
        tools ??= h("div", { class: "tools" });
        adoptHeld(held, tools);
      }
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
    const when = timeEl(message.created_at, this.zone, { label: false, cls: "when" });
    let head;
    let text = message.content;
    if (badge) {
      // A trigger entry: its first line ("Scheduled automation triggered: x") is the heading.
      const [first, ...rest] = text.split("\n");
      text = rest.join("\n").trim();
      head = h(
        "div",
        { class: "msg-head" },
        h("span", { class: "badge clock-badge" }, clockIcon(), (message.meta || {}).manual ? "Run now" : (message.meta || {}).event_id ? "Event" : who === "Recall" ? "Recall" : "Scheduled"),
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
        dataset: {
          id: message.id,
          seq: String(message.seq),
          role: message.role,
          ...(message.meta?.turn_id ? { turnId: message.meta.turn_id } : {}),
        },
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
        h("summary", {}, label, " ", timeEl(message.created_at, this.zone, { label: false, cls: "when" })),
        h("div", { class: "msg-body" }, message.content),
      ),
    );
  }

  /** stream_start / text_delta / tool_started / tool_call of the turn in progress. */
  applyStream(event) {
    const stick = this.nearBottom();
    if (event.type === "stream_start") {
      this.dropLive();
      if (!this.closedTurns.has(event.turn_id)) this.startLive(event);
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
      this.live.tools.append(toolElement(event, true));
      this.placeCards();
    } else if (event.type === "tool_call") {
      const running = [...this.live.tools.querySelectorAll(".tool.running")].find(
        (el) => el.dataset.name === event.name,
      );
      const done = toolElement(event);
      if (running) {
        if (running.dataset.approvalId) done.dataset.approvalId = running.dataset.approvalId;
        running.replaceWith(done);
      } else {
        this.live.tools.append(done);
      }
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
    // A card shown before its turn was on screen (the approvals were read while the turn's
    // start was still on its way) moves into the turn.
    adoptHeld(this.heldFor(event.turn_id), tools);
    this.placeCards();
  }

  /** The cards held on their own (see showApproval) for turn `turnId`. */
  heldFor(turnId) {
    return [...this.list.querySelectorAll(":scope > .approval-holder")].filter(
      (holder) => holder.dataset.turnId === turnId,
    );
  }

  /** Cards of the live turn not yet after the row of their call go after it, now it is here. */
  placeCards() {
    const tools = this.live?.tools;
    if (!tools) return;
    for (const card of tools.querySelectorAll(":scope > .approval")) {
      const paired = tools.querySelector(
        `:scope > .tool[data-approval-id="${CSS.escape(card.dataset.approvalId)}"]`,
      );
      if (paired) continue;
      card.remove();
      attachCard(tools, card);
    }
  }

  dropLive() {
    if (!this.live) return;
    this.live.el.remove();
    this.live = null;
  }

  // -- approvals: a card in the turn whose tool call waits for a person ---------------------

  /** The open session's approvals: the pending ones, and those of the turn being streamed. */
  async loadApprovals() {
    const key = this.key;
    let data;
    try {
      data = await this.api("GET", path.approvals(key, true));
    } catch {
      return; // the next approval event shows its card
    }
    if (key !== this.key) return;
    for (const found of data.approvals) {
      const approval = normalize(found);
      const known = this.approvals.get(approval.id);
      if (known?.el.isConnected) {
        known.settle(approval.state, approval.decidedBy);
      } else if (approval.state === "pending" || (this.live && approval.turnId === this.live.turnId)) {
        this.showApproval(approval);
      } else if (approval.turnId) {
        // A decided one (while the server keeps it): its outcome after the call, as it was live;
        // held on its own while its turn is on screen but not closed (it goes in with the reply).
        const turn = CSS.escape(approval.turnId);
        const tools = this.list.querySelector(`article[data-turn-id="${turn}"]:not(.streaming) > .tools`);
        if (tools) this.showApproval(approval, tools);
        else if (!this.closedTurns.has(approval.turnId) && this.list.querySelector(`article[data-turn-id="${turn}"]`)) {
          this.showApproval(approval);
        }
      }
    }
  }

  /**
   * A card for `approval` in its turn (once per id; a known card only takes the new state):
   * in `container` (a finished turn's tools), else the streamed turn's, else on its own.
   */
  showApproval(approval, container = null) {
    let card = this.approvals.get(approval.id);
    if (card) {
      card.settle(approval.state, approval.decidedBy);
      if (card.el.isConnected) return;
      card.attached(); // a card kept across a reload of the list goes back in its place
    } else {
      card = new ApprovalCard(approval, { api: this.api, sessionKey: this.key });
      this.approvals.set(approval.id, card);
    }
    const stick = this.nearBottom();
    if (container) {
      attachCard(container, card.el);
    } else if (this.live && approval.turnId === this.live.turnId) {
      attachCard(this.live.tools, card.el);
    } else {
      // Its turn is not on screen as a live turn: a card of its own at the end.
      const holder = h(
        "article",
        { class: "msg role-assistant approval-holder", "aria-label": "Approval", dataset: { turnId: approval.turnId || "" } },
        card.el,
      );
      if (this.live) this.list.insertBefore(holder, this.live.el);
      else this.list.append(holder);
    }
    this.scrollToEnd(stick);
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
