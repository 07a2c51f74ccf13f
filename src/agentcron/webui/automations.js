// The session's automations panel (with the create form) and its recall banner.

import { path } from "./api.js";
import { clockIcon, h, RUN_STATE_TEXT, showError, timeEl } from "./dom.js";
import { ChatUsage } from "./usage.js";

const ACTIVE_RUN_TEXT = {
  claimed: "Starting",
  queued: "Queued",
  deferred: "Deferred: waits for the current turn",
  running: "Running now",
};

function stateOf(job) {
  if (job.active_run) {
    const state = job.active_run.state;
    return { key: state, text: ACTIVE_RUN_TEXT[state] || state };
  }
  if (job.state === "done") return { key: "done", text: "Done" };
  if (!job.enabled) return { key: "paused", text: "Paused" };
  return { key: "active", text: "Active" };
}

// A job's open alerts (service/alerts.py), as badges on its card and in its detail.
export const ALERT_TEXT = { overdue: "overdue", failing: "failing", ending: "ends soon" };

export class AutomationsPanel {
  /** `refresh()` re-reads the session (the panel and banner update from its answer). */
  constructor({ api, refresh, onError, onDetails }) {
    this.api = api;
    this.onDetails = onDetails; // onDetails(job): open its detail view (history, next fires)
    this.refresh = refresh;
    this.onError = onError;
    this.key = null;
    this.list = document.getElementById("automation-list");
    this.done = document.getElementById("automations-done"); // the "Done" section
    this.doneList = document.getElementById("automation-done-list");
    this.empty = document.getElementById("automations-empty");
    this.form = document.getElementById("automation-form");
    this.formError = document.getElementById("automation-error");
    this.banner = document.getElementById("recall-banner");
    this.confirming = null; // id of the automation whose delete asks "sure?"
    this.usage = new ChatUsage({ api }); // the chat's usage per day, under its automations
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create();
    });
  }

  open(key) {
    this.key = key;
    this.confirming = null;
    this.list.replaceChildren();
    this.doneList.replaceChildren();
    this.done.hidden = true;
    this.empty.hidden = false;
    this.banner.hidden = true;
    this.banner.replaceChildren();
    this.usage.clear();
    showError(this.formError, "");
    for (const el of this.form.elements) el.disabled = key === null;
  }

  /** Render from GET /api/sessions/{key}: `automations` (with active_run) and `recall`;
   * done ones (their schedule spent, kept a while) in the "Done" section. */
  show(detail) {
    const jobs = detail.automations || [];
    const done = jobs.filter((job) => job.state === "done");
    this.empty.hidden = jobs.length > 0;
    this.list.replaceChildren(...jobs.filter((job) => job.state !== "done").map((job) => this.item(job)));
    this.doneList.replaceChildren(...done.map((job) => this.item(job)));
    this.done.hidden = done.length === 0;
    this.showRecall(detail.recall);
    this.usage.load(detail.key, detail.tz);
  }

  item(job) {
    const state = stateOf(job);
    const shared = job.session_key !== this.key;
    const buttons = [];
    if (this.confirming === job.id) {
      buttons.push(
        h("span", { class: "confirm-text" }, "Delete?"),
        h("button", { type: "button", class: "danger small", "aria-label": `Confirm delete ${job.name}`, onclick: () => this.remove(job) }, "Delete"),
        h("button", { type: "button", class: "small", "aria-label": `Keep ${job.name}`, onclick: () => this.confirm(null) }, "Keep"),
      );
    } else {
      buttons.push(
        h("button", { type: "button", class: "small", "aria-label": `Details of ${job.name}`, title: "Its next fires, policy, usage and run history", onclick: () => this.onDetails(job) }, "Details"),
        h("button", { type: "button", class: "small", "aria-label": `Run ${job.name} now`, title: "Run it once now; its schedule stays as it is", onclick: (event) => this.runNow(job, event.currentTarget) }, "Run now"),
        state.key === "done"
          ? null
          : job.enabled
          ? h("button", { type: "button", class: "small", "aria-label": `Pause ${job.name}`, onclick: () => this.act(job, "pause") }, "Pause")
          : h("button", { type: "button", class: "small", "aria-label": `Resume ${job.name}`, onclick: () => this.act(job, "resume") }, "Resume"),
        h("button", { type: "button", class: "small subtle-danger", "aria-label": `Delete ${job.name}`, onclick: () => this.confirm(job.id) }, "Delete"),
      );
    }
    const last = job.last_status
      ? [RUN_STATE_TEXT[job.last_status] || job.last_status, job.last_run_at ? " · " : "", job.last_run_at ? timeEl(job.last_run_at, job.tz) : null]
      : ["never ran"];
    return h(
      "li",
      { class: `automation state-${state.key}`, "aria-label": `Automation ${job.name}`, dataset: { id: job.id } },
      h(
        "div",
        { class: "automation-head" },
        h("span", { class: "automation-name" }, job.name),
        h("span", { class: `state-badge state-${state.key}`, title: job.paused_reason || null }, state.text),
        (job.alerts || []).map((alert) => h("span", { class: `badge alert-badge alert-${alert}` }, ALERT_TEXT[alert] || alert)),
      ),
      h("div", { class: "automation-schedule" }, clockIcon(), " ", job.schedule),
      job.message && job.message !== job.name ? h("div", { class: "automation-message muted" }, job.message) : null,
      h(
        "dl",
        { class: "automation-facts" },
        job.finished_at
          ? [h("dt", {}, "Finished"), h("dd", { class: "finished" }, timeEl(job.finished_at, job.tz))]
          : [h("dt", {}, "Next run"), h("dd", { class: "next-run" }, job.enabled ? timeEl(job.next_fire_at, job.tz) : h("span", { class: "muted" }, "paused"))],
        h("dt", {}, "Last run"),
        h("dd", { class: "last-run" }, ...last),
        job.paused_reason && !job.enabled ? [h("dt", {}, "Why paused"), h("dd", {}, job.paused_reason)] : null,
        shared ? [h("dt", {}, "Owner"), h("dd", { class: "mono" }, job.session_key)] : null,
      ),
      h("div", { class: "automation-actions" }, buttons),
    );
  }

  confirm(id) {
    this.confirming = id;
    this.refresh();
  }

  async act(job, action) {
    try {
      await this.api("POST", `${path.job(job.id)}/${action}`);
    } catch (error) {
      this.onError(`Could not ${action} “${job.name}”: ${error.message}`);
    }
    this.refresh();
  }

  /** POST /api/jobs/{id}/run: a manual run through the same path as a fire (its turn streams
   * into the chat like a scheduled one). A 409 (one still pending) is shown as an error. */
  async runNow(job, button) {
    button.disabled = true;
    try {
      await this.api("POST", `${path.job(job.id)}/run`);
    } catch (error) {
      this.onError(`Could not run “${job.name}”: ${error.message}`);
    }
    this.refresh();
  }

  async remove(job) {
    this.confirming = null;
    try {
      await this.api("DELETE", path.job(job.id));
    } catch (error) {
      this.onError(`Could not delete “${job.name}”: ${error.message}`);
    }
    this.refresh();
  }

  async create() {
    if (this.key === null) return;
    const data = new FormData(this.form);
    const body = {
      session_key: this.key,
      name: String(data.get("name") || "").trim(),
      message: String(data.get("message") || "").trim(),
      when: String(data.get("when") || "").trim(),
    };
    if (data.get("delete_after_run")) body.delete_after_run = true;
    // The DST policy: sent only when not the default, which every schedule takes.
    if (data.get("dst_gap") && data.get("dst_gap") !== "shift") body.dst_gap = data.get("dst_gap");
    if (data.get("dst_fold") && data.get("dst_fold") !== "first") body.dst_fold = data.get("dst_fold");
    // What it does in the chat's quiet hours: sent only when not the default (hold).
    if (data.get("quiet") && data.get("quiet") !== "hold") body.quiet = data.get("quiet");
    const missing = ["name", "message", "when"].filter((k) => !body[k]);
    if (missing.length) {
      showError(this.formError, `Please fill in: ${missing.join(", ")}.`);
      return;
    }
    const submit = document.getElementById("auto-submit");
    submit.disabled = true;
    try {
      await this.api("POST", path.jobs(), body);
      showError(this.formError, "");
      this.form.reset();
    } catch (error) {
      showError(this.formError, error.message);
    } finally {
      submit.disabled = this.key === null;
    }
    this.refresh();
  }

  // -- the recall banner ----------------------------------------------------------------------

  showRecall(recall) {
    if (!recall) {
      this.banner.hidden = true;
      this.banner.replaceChildren();
      return;
    }
    const recurring = recall.spec && recall.spec.kind === "every";
    const error = h("span", { class: "form-error", role: "alert", hidden: true });
    const run = async (method, url, what) => {
      try {
        await this.api(method, url);
      } catch (err) {
        showError(error, `Could not ${what}: ${err.message}`);
        return;
      }
      this.refresh();
    };
    this.banner.replaceChildren(
      clockIcon("Recall"),
      h(
        "div",
        { class: "recall-text" },
        h("strong", {}, "Recall "),
        h("span", { class: "recall-when" }, timeEl(recall.next_fire_at, recall.tz, { cls: "recall-time" })),
        h("span", { class: "muted" }, ` · ${recall.schedule}`),
        h("div", { class: "recall-message" }, recall.message || recall.name),
        error,
      ),
      h(
        "div",
        { class: "recall-actions" },
        recurring
          ? h("button", { type: "button", class: "small", "aria-label": "Skip next recall", title: "Skip the next occurrence", onclick: () => run("POST", path.recallSkip(this.key), "skip the recall") }, "Skip")
          : null,
        h("button", { type: "button", class: "small", "aria-label": "Cancel recall", onclick: () => run("DELETE", path.recall(this.key), "cancel the recall") }, "Cancel"),
      ),
    );
    this.banner.hidden = false;
  }
}
