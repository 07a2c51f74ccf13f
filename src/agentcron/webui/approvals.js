// Approval cards: a gated tool call waiting for a person, shown in the turn that made it, with
// Approve / Deny. The card turns into its outcome when the approval ends (decided from this tab,
// another tab, a channel or the API, or timed out).

import { ApiError, path } from "./api.js";
import { BROWSER_ZONE, h, utcText, zonedTime } from "./dom.js";
import { argsKey, prettyArgs } from "./tools.js";

/** Who decides, as the model and the other tabs are told ("Denied by web UI."). */
export const DECIDER = "web UI";
const TICK_MS = 10_000;
const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

const SVG_NS = "http://www.w3.org/2000/svg";

/** A small shield (decorative): a person guards this call. */
function shieldIcon() {
  const svg = document.createElementNS(SVG_NS, "svg");
  for (const [k, v] of Object.entries({ viewBox: "0 0 16 16", width: 14, height: 14, "aria-hidden": "true", focusable: "false", class: "approval-icon" })) {
    svg.setAttribute(k, String(v));
  }
  const shape = document.createElementNS(SVG_NS, "path");
  for (const [k, v] of Object.entries({ d: "M8 1.5 2.8 3.4v4.1c0 3.1 2.2 5.5 5.2 6.9 3-1.4 5.2-3.8 5.2-6.9V3.4z", fill: "none", stroke: "currentColor", "stroke-width": 1.5, "stroke-linejoin": "round" })) {
    shape.setAttribute(k, String(v));
  }
  const mark = document.createElementNS(SVG_NS, "path");
  for (const [k, v] of Object.entries({ d: "M8 5v3.6M8 10.6v.4", fill: "none", stroke: "currentColor", "stroke-width": 1.6, "stroke-linecap": "round" })) {
    mark.setAttribute(k, String(v));
  }
  svg.append(shape, mark);
  return svg;
}

/** "in 5 minutes", "in 40 seconds" from the browser's clock. */
export function relativeTime(iso, now = Date.now()) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const seconds = Math.round((at - now) / 1000);
  const size = Math.abs(seconds);
  if (size < 60) return RELATIVE.format(seconds, "second");
  if (size < 3600) return RELATIVE.format(Math.round(seconds / 60), "minute");
  if (size < 86_400) return RELATIVE.format(Math.round(seconds / 3600), "hour");
  return RELATIVE.format(Math.round(seconds / 86_400), "day");
}

/** The line a decided approval becomes. */
export function outcomeText(state, decidedBy) {
  const who = decidedBy || "someone";
  if (state === "approved") return `Approved by ${who}`;
  if (state === "denied") return `Denied by ${who}`;
  if (state === "expired") {
    return decidedBy === "cancelled" ? "Cancelled: the turn was stopped" : "Timed out";
  }
  return "No longer pending";
}

/** An approval from the API ({id, ...}) or from an `approval_requested` event ({approval_id, ...}). */
export function normalize(approval) {
  return {
    id: approval.id ?? approval.approval_id,
    turnId: approval.turn_id ?? null,
    tool: approval.tool || "tool",
    args: approval.args || {},
    expiresAt: approval.expires_at || null,
    state: approval.state || "pending",
    decidedBy: approval.decided_by ?? null,
  };
}

export class ApprovalCard {
  /** approval: see normalize(); api: the REST client; sessionKey: for re-reading the state. */
  constructor(approval, { api, sessionKey }) {
    this.approval = approval;
    this.id = approval.id;
    this.api = api;
    this.sessionKey = sessionKey;
    this.state = "pending";
    this.busy = false;
    this.timer = null;

    this.expiry = h("time", { class: "approval-expiry", datetime: approval.expiresAt || "" });
    this.approveButton = h(
      "button",
      { type: "button", class: "primary small", onclick: () => this.decide("approve") },
      "Approve",
    );
    this.denyButton = h(
      "button",
      { type: "button", class: "danger small", onclick: () => this.decide("deny") },
      "Deny",
    );
    this.actions = h("div", { class: "approval-actions" }, this.approveButton, this.denyButton);
    // Present (empty) from the start: a live region is announced when its text changes.
    this.outcome = h("p", { class: "approval-outcome", role: "status", tabindex: "-1" });
    this.error = h("p", { class: "form-error approval-error", role: "alert", hidden: true });
    this.title = h("span", { class: "approval-title" }, "Approval needed: ");
    this.args = h(
      "pre",
      { class: "approval-args", "aria-label": `Arguments of ${approval.tool}` },
      prettyArgs(approval.args),
    );
    this.el = h(
      "section",
      {
        class: "approval state-pending",
        role: "group",
        "aria-label": `Approval for ${approval.tool}`,
        dataset: {
          approvalId: this.id,
          tool: approval.tool,
          turnId: approval.turnId || "",
          args: argsKey(approval.args),
        },
      },
      h("div", { class: "approval-head" }, shieldIcon(), this.title, h("code", { class: "approval-tool" }, approval.tool)),
      this.args,
      h("div", { class: "approval-foot" }, this.expiry, this.actions),
      this.outcome,
      this.error,
    );
    this.tick();
    if (approval.state !== "pending") this.settle(approval.state, approval.decidedBy);
    else this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  /** The expiry, relative to now (the exact time in the tooltip). */
  tick() {
    if (this.state !== "pending") return;
    if (this.timer !== null && !this.el.isConnected) {
      clearInterval(this.timer); // the card left the page (another chat, a reload)
      this.timer = null;
      return;
    }
    const at = this.approval.expiresAt;
    if (!at) {
      this.expiry.textContent = "";
      return;
    }
    this.expiry.title = `${zonedTime(at)} (${BROWSER_ZONE}), ${utcText(at)}`;
    this.expiry.textContent =
      Date.parse(at) > Date.now() ? `expires ${relativeTime(at)}` : "expiring…";
  }

  /** The card is on the page again (kept across a reload of the list): its expiry ticks again. */
  attached() {
    if (this.state !== "pending" || this.timer !== null) return;
    this.tick();
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  /** The approval ended: its outcome replaces the buttons. Idempotent. */
  settle(state, decidedBy) {
    if (state === "pending") return;
    const hadFocus = this.el.contains(document.activeElement);
    this.state = state;
    clearInterval(this.timer);
    this.timer = null;
    this.el.classList.remove("state-pending");
    this.el.classList.add(`state-${state}`);
    this.el.removeAttribute("aria-busy");
    this.actions.remove();
    this.expiry.remove();
    this.title.textContent = "Approval for ";
    this.args.remove(); // the call's row above shows them
    this.error.hidden = true;
    this.outcome.textContent = outcomeText(state, decidedBy);
    if (hadFocus) this.outcome.focus(); // the button that had it is gone
  }

  setBusy(busy, decision = null) {
    this.busy = busy;
    this.approveButton.disabled = busy;
    this.denyButton.disabled = busy;
    if (busy) this.el.setAttribute("aria-busy", "true");
    else this.el.removeAttribute("aria-busy");
    this.approveButton.textContent = busy && decision === "approve" ? "Approving…" : "Approve";
    this.denyButton.textContent = busy && decision === "deny" ? "Denying…" : "Deny";
  }

  async decide(decision) {
    if (this.busy || this.state !== "pending") return;
    this.error.hidden = true;
    this.setBusy(true, decision);
    try {
      const answer = await this.api("POST", path.approval(this.id), { decision, by: DECIDER });
      this.settle(answer.state, answer.decided_by);
    } catch (error) {
      if (error instanceof ApiError && (error.status === 409 || error.status === 404)) {
        // Too late: decided elsewhere or expired. Show what it became, not an error.
        const current = await this.current();
        if (!current) this.settle("gone", null);
        else if (current.state !== "pending") this.settle(current.state, current.decided_by);
        else this.showError(`Could not ${decision}: ${error.message}`);
      } else {
        this.showError(`Could not ${decision}: ${error.message}`);
      }
    } finally {
      if (this.state === "pending") this.setBusy(false);
    }
  }

  showError(message) {
    this.error.textContent = message;
    this.error.hidden = false;
  }

  /** The approval as the server has it now (null: unknown or unreadable). */
  async current() {
    try {
      const data = await this.api("GET", path.approvals(this.sessionKey, true));
      return data.approvals.find((a) => a.id === this.id) || null;
    } catch {
      return null;
    }
  }
}
