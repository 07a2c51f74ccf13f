// One automation in detail (a dialog opened from its card): the schedule in words and as its
// spec, the zone, the next five fires, the policy in words, usage and cost; its run history with
// a chart of the recent runs and the cost per day. `GET /api/jobs/{id}`, `GET .../runs` (pages
// by `next_cursor` when the server gives one), `GET /api/usage?job_id=` when the server has it
// (else the cost per day is added up from the runs shown), `GET /api/deliveries` for outcomes.
// A fire waiting for a person (`waiting_approval`) shows as a badge with Approve / Deny
// (`POST /api/approvals/{id}`); the job's standing approvals are listed, added and revoked
// (`GET / POST /api/jobs/{id}/grants`, `DELETE .../grants/{grant id}`).
// Its trigger: on or off, enable / rotate / disable (`/api/jobs/{id}/trigger`); a secret made
// here is shown until the dialog closes, never again. Its gate is said in words with the policy,
// and a run its gate held back, let through or failed says so (the run's `delivery.gate`).

import { ApiError, path } from "./api.js";
import { costByDay, costChart, money, runDuration, runsChart, spendChart, tokenCount, usageByDay } from "./chart.js";
import { h, knownZone, RUN_STATE_TEXT, showError, timeEl, zonedTime } from "./dom.js";
import { ALERT_TEXT } from "./automations.js";
import { formatDuration, toolStatus } from "./tools.js";

const PAGE = 20;
// How long a standing approval made here holds (the API allows up to 366 days).
const GRANT_SPANS = [
  ["1 day", 86_400],
  ["7 days", 7 * 86_400],
  ["30 days", 30 * 86_400],
  ["90 days", 90 * 86_400],
];
const ERROR_EXCERPT = 140;

/** 90 -> "1 min 30 s", 7200 -> "2 h", 86400 -> "1 d". */
export function spanText(seconds) {
  const units = [
    [86_400, "d"],
    [3600, "h"],
    [60, "min"],
    [1, "s"],
  ];
  const parts = [];
  let rest = Math.round(seconds);
  for (const [size, name] of units) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${name}`);
      rest %= size;
    }
  }
  return parts.slice(0, 2).join(" ") || "0 s";
}

/** The spec as the engine holds it: "cron 0 9 * * 1-5", "every 2 h from ...", "once at ...". */
function specText(spec, zone) {
  if (!spec) return "—";
  if (spec.kind === "cron") return `cron ${spec.expr}`;
  if (spec.kind === "every") {
    return `every ${spanText(spec.seconds)}, counted from ${zonedTime(spec.anchor, zone)} (${zone})`;
  }
  if (spec.kind === "at") return `once, at ${zonedTime(spec.at, zone)} (${zone})`;
  return JSON.stringify(spec);
}

/** The policy in sentences, not JSON. */
export function policyLines(job, zone) {
  const p = job.policy || {};
  const lines = [];
  lines.push(
    {
      defer: "A fire while the previous run still goes waits for it; every fire runs, in turn.",
      skip: "A fire while the previous run still goes is skipped.",
      buffer_one: "A fire while the previous run still goes waits (one at most; more are skipped).",
    }[p.overlap] || `Overlap: ${p.overlap}.`,
  );
  const window = p.catchup_window_s ? ` (within ${spanText(p.catchup_window_s)})` : "";
  lines.push(
    {
      skip: "Fires missed while no server ran are recorded as missed, not run.",
      latest: `Of the fires missed while no server ran, the latest runs${window}; the rest are recorded as missed.`,
      all: `Fires missed while no server ran all run${window}.`,
    }[p.catchup] || `Catch-up: ${p.catchup}.`,
  );
  lines.push(
    p.max_failures > 0
      ? `Pauses itself after ${p.max_failures} failure${p.max_failures === 1 ? "" : "s"} in a row.`
      : "Never pauses itself for failures.",
  );
  if (p.max_runs !== null && p.max_runs !== undefined) {
    const left = job.remaining_runs !== null && job.remaining_runs !== undefined ? ` (${job.remaining_runs} left)` : "";
    lines.push(`Ends after ${p.max_runs} run${p.max_runs === 1 ? "" : "s"}${left}.`);
  }
  if (p.end_at) lines.push(`Ends at ${zonedTime(p.end_at, zone)} (${zone}).`);
  lines.push(p.delete_after_run ? "Deleted after its last run." : "Kept under Done after its last run.");
  if (p.jitter) lines.push("Each fire is moved by a small random delay, so many jobs do not start at once.");
  lines.push(NOTIFY_TEXT[p.notify] || `Delivers its results: ${p.notify}.`);
  if (p.quiet && p.quiet !== "hold") lines.push(QUIET_TEXT[p.quiet] || `In quiet hours: ${p.quiet}.`);
  const spec = job.spec || {};
  if (spec.dst_gap && spec.dst_gap !== "shift") lines.push(DST_GAP_TEXT[spec.dst_gap] || `DST gap: ${spec.dst_gap}.`);
  if (spec.dst_fold && spec.dst_fold !== "first") lines.push(DST_FOLD_TEXT[spec.dst_fold] || `DST fold: ${spec.dst_fold}.`);
  lines.push(cadenceText(p.cadence));
  if (p.gate) lines.push(gateText(p.gate));
  return lines;
}

/** A command's words as one line, a word with a blank or a quote in quotes. */
function commandLine(words) {
  return words.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replaceAll("'", "'\"'\"'")}'`)).join(" ");
}

// A job's pre-check gate in words (domain/gates.py): what it asks before each fire, how its
// answer reads, its time bound, and whether it is the whole job or leaves a notice.
export function gateText(g) {
  const target = Array.isArray(g.target) ? commandLine(g.target) : String(g.target);
  const asks =
    {
      command: `runs the command ${target} (exit 0 runs the fire, 1 skips it)`,
      http: `sends a GET to ${target} (2xx runs the fire; 204, 304, 404, 409, 412, 423 skip it)`,
      python: `calls ${target} (a true answer runs the fire, a false one skips it)`,
    }[g.kind] || `asks ${g.kind} ${target}`;
  let text = `Before each fire its gate ${asks}, within ${g.timeout_s} s.`;
  if (g.no_llm) text += " No LLM: the gate is the whole job.";
  if (g.notice) text += " A fire it skips leaves a notice in the chat.";
  return text;
}

/** What a run's gate said (its delivery record's `gate`), in words; null for a run without one. */
export function gateVerdictText(run) {
  const d = run.delivery;
  const g = d && typeof d === "object" ? d.gate : null;
  if (!g) return null;
  if (g.verdict === "skip") return "Held by its gate: nothing to do";
  if (g.verdict === "error") return "Its gate failed";
  return `Its gate let it run${g.truncated ? " (its output cut)" : ""}`;
}

/** "Ends on ..." / "Ended", and the Renew form, for a job with an end (end_at, max_runs). */
function endsFacts(job, zone, onRenew) {
  const p = job.policy;
  const limited = p.end_at || (p.max_runs !== null && p.max_runs !== undefined);
  if (!limited) return null;
  let text;
  if (job.state === "done") text = "Ended";
  else if (p.end_at) text = `Ends on ${zonedTime(p.end_at, zone)} (${zone})`;
  else text = `Ends after ${job.remaining_runs} more run${job.remaining_runs === 1 ? "" : "s"}`;
  const form = h(
    "form",
    {
      class: "renew-form",
      onsubmit: (event) => {
        event.preventDefault();
        onRenew();
      },
    },
    h("label", {}, "Until ", h("input", { type: "datetime-local", name: "until" })),
    p.max_runs !== null && p.max_runs !== undefined
      ? h("label", {}, " More runs ", h("input", { type: "number", name: "runs", min: "1", class: "small" }))
      : null,
    h("button", { type: "submit", class: "small renew" }, "Renew"),
  );
  return [h("dt", {}, "Ends"), h("dd", { class: "job-ends" }, h("span", { class: "ends-text" }, text), form)];
}
// A wall-clock schedule's DST policy (schedule/zones.py), said only when not the default
// (the spec leaves the default out).
const DST_GAP_TEXT = {
  skip: "On a day the clocks skip its time (daylight saving time starts), it does not run.",
};
const DST_FOLD_TEXT = {
  last: "On a day the clocks repeat its time (daylight saving time ends), it runs the second time only.",
  both: "On a day the clocks repeat its time (daylight saving time ends), it runs both times.",
};

// A job's cadence bounds in words (domain/cadence.py): how far the agent may move its next run.
export function cadenceText(c) {
  if (!c) return "The agent may not move its next run.";
  const ahead = [c.min ? `at least ${c.min}` : null, c.max ? `at most ${c.max}` : null].filter(Boolean);
  const hours = c.allowed_hours ? `, between ${c.allowed_hours} local time` : "";
  return `The agent may move its next run${ahead.length ? ` ${ahead.join(" and ")} ahead` : ""}${hours}.`;
}

/** The agent's move of the next run, while that run is to come: from, to and why. */
function movedText(moved, zone) {
  const from = moved.from_at ? ` from ${zonedTime(moved.from_at, zone)}` : "";
  return `Next run moved by the agent${from} to ${zonedTime(moved.to_at, zone)} (${zone}): ${moved.reason}`;
}

// A job's notify policy in words (domain/notify.py); a reply the agent marks [SILENT] is
// never sent, whatever the policy.
const NOTIFY_TEXT = {
  always: "Sends every result, except one the agent marks silent.",
  changes: "Sends a result only when it differs from the last one sent; the rest are kept on the run.",
  "never-empty": "Sends no empty result; it is kept on the run.",
};

const CAP_WORDS = [
  ["usd_run", "a run", "usd"],
  ["usd_day", "a day", "usd"],
  ["usd_month", "a month", "usd"],
  ["tokens_run", "a run", "tokens"],
  ["tokens_day", "a day", "tokens"],
  ["tokens_month", "a month", "tokens"],
];

/** A budget's caps in words: "At most $0.50 a day and 20,000 tokens a run (days and months in UTC)." */
export function budgetText(budget) {
  const parts = CAP_WORDS.filter(([key]) => typeof budget[key] === "number").map(([key, span, unit]) =>
    unit === "usd" ? `${money(budget[key])} ${span}` : `${tokenCount(budget[key])} tokens ${span}`,
  );
  if (!parts.length) return "No caps.";
  const list = parts.length > 1 ? `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}` : parts[0];
  return `At most ${list} (days and months in UTC).`;
}

/** The running figures against the caps: today's and this month's, and the estimate. */
export function spentLines(budget, spent) {
  if (!spent) return [];
  const against = (value, cap, unit) =>
    unit === "usd"
      ? `${money(value)}${typeof cap === "number" ? ` of ${money(cap)}` : ""}`
      : `${tokenCount(value)}${typeof cap === "number" ? ` of ${tokenCount(cap)}` : ""} tokens`;
  const lines = [
    `Today (${spent.day}, UTC): ${against(spent.day_usd, budget.usd_day, "usd")}, ${against(spent.day_tokens, budget.tokens_day, "tokens")}.`,
    `This month (${spent.month}): ${against(spent.month_usd, budget.usd_month, "usd")}, ${against(spent.month_tokens, budget.tokens_month, "tokens")}.`,
  ];
  lines.push(
    spent.est_runs > 0
      ? `One run is estimated at ${money(spent.est_usd)}, ${tokenCount(spent.est_tokens)} tokens (the mean of its last ${spent.est_runs} run${spent.est_runs === 1 ? "" : "s"}).`
      : "No run yet: its first fire runs, and sets the estimate.",
  );
  return lines;
}

/** Paused at a cap of its budget (the reason the run-end write gave): the words after "paused: ". */
export function budgetPause(job) {
  const why = job.paused_reason || "";
  return !job.enabled && why.startsWith("paused: budget reached") ? why.slice("paused: ".length) : null;
}
// A job's choice in its chat's quiet hours (domain/quiet.py), said only when not the default
// (hold: it runs, its result is sent when they end).
const QUIET_TEXT = {
  silent: "In its chat's quiet hours it runs, and its result is never sent (it stays in the chat).",
  wait: "A fire in its chat's quiet hours waits until they end, then runs.",
};

function usageText(usage) {
  if (!usage || !usage.counted) return "no usage counted yet";
  const tokens = `${usage.input_tokens.toLocaleString()} in / ${usage.output_tokens.toLocaleString()} out tokens`;
  const unpriced = usage.unpriced ? ` (${usage.unpriced} without a known price)` : "";
  return `${usage.counted} run${usage.counted === 1 ? "" : "s"} counted: ${tokens}, ${money(usage.cost_usd)}${unpriced}`;
}

/** How late a run started after its fire time: "+1.2 s", "—". */
function lateness(run) {
  if (!run.started_at) return null;
  const ms = Date.parse(run.started_at) - Date.parse(run.fire_at);
  return Number.isFinite(ms) ? `+${formatDuration(Math.max(0, ms))}` : null;
}

function tokensText(usage) {
  if (!usage || (usage.input_tokens === undefined && usage.output_tokens === undefined)) return "—";
  return `${usage.input_tokens ?? 0} / ${usage.output_tokens ?? 0}`;
}

/** An instant's day and time in `zone` as one line, for the table ("Mon, Nov 23, 09:00"). */
function cellTime(iso, zone) {
  return timeEl(iso, zone, { label: false });
}

export class JobDetail {
  /** onShowTurn(run): show the run's turn in the chat (the dialog closes first). */
  constructor({ api, onShowTurn }) {
    this.api = api;
    this.onShowTurn = onShowTurn;
    this.dialog = document.getElementById("job-dialog");
    this.body = document.getElementById("job-body");
    this.error = document.getElementById("job-error");
    this.title = document.getElementById("job-title");
    this.usageMissing = false; // the server has no GET /api/usage (an older one): add up runs
    this.request = 0;
    document.getElementById("job-close").addEventListener("click", () => this.dialog.close());
    this.dialog.addEventListener("close", () => {
      this.request += 1; // answers still on their way are dropped
      this.jobId = null;
    });
  }

  async open(jobId) {
    this.jobId = jobId;
    this.secret = null; // {jobId, secret, url}: the trigger secret just made, shown once
    this.job = null;
    this.runs = [];
    this.cursor = null;
    this.more = false;
    this.limit = PAGE;
    this.deliveries = new Map();
    this.grants = null;
    this.spend = null;
    this.title.textContent = "Automation";
    this.body.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    showError(this.error, "");
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
  }

  /** Re-read it all (after an event about this job, while the dialog is open). */
  async refresh() {
    if (this.jobId && this.dialog.open) await this.load();
  }

  async load() {
    const request = ++this.request;
    const jobId = this.jobId;
    try {
      const job = await this.api("GET", path.job(jobId));
      const page = await this.api("GET", path.jobRuns(jobId, this.limit));
      const deliveries = await this.loadDeliveries(job.session_key);
      const grants = await this.loadGrants(jobId);
      const spend = await this.loadSpend(job);
      if (request !== this.request) return;
      this.job = job;
      this.spend = spend;
      this.deliveries = deliveries;
      this.grants = grants;
      this.takePage(page, true);
      this.render(await this.costDays());
    } catch (error) {
      if (request !== this.request) return;
      showError(this.error, `Could not load the automation: ${error.message}`);
    }
  }

  /** A page of runs: `next_cursor` when the server pages by cursor; else (an older server)
   * more may exist when the page came full, and "Load more" asks for a longer page. */
  takePage(page, first) {
    const runs = page.runs || [];
    if ("next_cursor" in page) {
      this.runs = first ? runs : [...this.runs, ...runs];
      this.cursor = page.next_cursor;
      this.more = page.next_cursor !== null;
    } else {
      this.runs = runs;
      this.cursor = null;
      this.more = runs.length >= this.limit;
    }
  }

  async loadMore(button) {
    button.disabled = true;
    const request = ++this.request;
    try {
      let page;
      if (this.cursor) {
        page = await this.api("GET", path.jobRuns(this.jobId, PAGE, this.cursor));
      } else {
        this.limit += PAGE;
        page = await this.api("GET", path.jobRuns(this.jobId, this.limit));
      }
      if (request !== this.request) return;
      this.takePage(page, !this.cursor);
      this.render(await this.costDays());
    } catch (error) {
      if (request !== this.request) return;
      button.disabled = false;
      showError(this.error, `Could not load more runs: ${error.message}`);
    }
  }

  /** The job's spend against its budget (only a job with one); null: none or an older server. */
  async loadSpend(job) {
    if (!job.policy?.budget) return null;
    try {
      return await this.api("GET", path.jobSpend(job.id, 30));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
  }

  /** Its budget: the caps in words, "paused: budget reached" when so, today's and this month's
   * spend against them, and the spend per UTC day against the cap per day. */
  budgetSection() {
    const budget = this.job.policy?.budget;
    if (!budget) return null;
    const spend = this.spend;
    const paused = budgetPause(this.job);
    // the chart shows money when a money cap per day is set, or no token cap is; else tokens
    const unit = typeof budget.usd_day === "number" || typeof budget.tokens_day !== "number" ? "usd" : "tokens";
    const cap = unit === "usd" ? (budget.usd_day ?? null) : budget.tokens_day;
    return h(
      "section",
      { class: "job-budget", "aria-label": "Budget" },
      h("h3", {}, "Budget"),
      paused
        ? h(
            "p",
            { class: "budget-paused", role: "status" },
            h("span", { class: "badge alert-badge" }, "Paused: budget reached"),
            ` ${paused}. It stays paused until someone resumes it.`,
          )
        : null,
      h("p", { class: "budget-caps" }, budgetText(budget)),
      spend ? h("ul", { class: "budget-spent" }, spentLines(budget, spend.spent).map((line) => h("li", {}, line))) : null,
      spend
        ? h(
            "figure",
            {},
            h("figcaption", {}, unit === "usd" ? "Cost per UTC day against the budget" : "Tokens per UTC day against the budget"),
            spendChart(spend.days || [], unit, cap),
          )
        : null,
    );
  }

  /** The job's standing approvals; null when the server has none (an older one). */
  async loadGrants(jobId) {
    try {
      return (await this.api("GET", path.grants(jobId))).grants || [];
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
  }

  /** Approve or deny the call a fire of this job waits on, then read the job again. */
  async decide(approval, decision, buttons) {
    for (const b of buttons) b.disabled = true;
    try {
      await this.api("POST", path.approval(approval.id), { decision, by: "web UI" });
    } catch (error) {
      // 409: decided or expired meanwhile; the reload shows what it is now
      if (!(error instanceof ApiError && error.status === 409)) {
        showError(this.error, `Could not decide: ${error.message}`);
      }
    }
    await this.load();
  }

  async addGrant(form) {
    const data = new FormData(form);
    const text = String(data.get("pattern") || "").trim();
    let args = {};
    if (text) {
      try {
        args = JSON.parse(text);
      } catch {
        showError(this.error, 'The arguments must be a JSON object, e.g. {"name": "*.log"}.');
        return;
      }
    }
    const body = {
      tool: String(data.get("tool") || "").trim(),
      args,
      expires_in_s: Number(data.get("span")),
      by: "web UI",
    };
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await this.api("POST", path.grants(this.jobId), body);
      showError(this.error, "");
    } catch (error) {
      button.disabled = false;
      showError(this.error, `Could not add the standing approval: ${error.message}`);
      return;
    }
    await this.load();
  }

  async revokeGrant(grant, button) {
    button.disabled = true;
    try {
      await this.api("DELETE", path.grant(this.jobId, grant.id));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) {
        button.disabled = false;
        showError(this.error, `Could not revoke: ${error.message}`);
        return;
      }
    }
    await this.load();
  }

  /** A fire waiting for a person: what, since when, until when; Approve / Deny. */
  waitingBadge(zone) {
    const w = this.job.waiting_approval;
    if (!w) return null;
    const approve = h("button", { type: "button", class: "small approve" }, "Approve");
    const deny = h("button", { type: "button", class: "small deny" }, "Deny");
    approve.addEventListener("click", () => this.decide(w, "approve", [approve, deny]));
    deny.addEventListener("click", () => this.decide(w, "deny", [approve, deny]));
    return h(
      "section",
      { class: "waiting-approval", role: "status", "aria-label": "Waiting for approval" },
      h("span", { class: "badge waiting" }, "Waiting for approval"),
      " ",
      h("code", { class: "waiting-call" }, `${w.tool} ${JSON.stringify(w.args)}`),
      " since ",
      timeEl(w.since, zone),
      "; denied at ",
      timeEl(w.expires_at, zone),
      " if nobody decides. ",
      approve,
      " ",
      deny,
    );
  }

  /** The standing approvals: each with Revoke, and a form to add one. */
  grantsSection(zone) {
    if (this.grants === null || this.grants === undefined) return null;
    const items = this.grants.map((g) => {
      const revoke = h("button", { type: "button", class: "small link revoke" }, "Revoke");
      revoke.setAttribute("aria-label", `Revoke ${g.tool} ${JSON.stringify(g.args)}`);
      revoke.addEventListener("click", () => this.revokeGrant(g, revoke));
      return h(
        "li",
        { class: `grant${g.expired ? " expired" : ""}`, dataset: { id: g.id } },
        h("code", {}, `${g.tool} ${JSON.stringify(g.args)}`),
        " ",
        g.expired ? h("span", { class: "muted" }, "expired") : h("span", {}, "until ", timeEl(g.expires_at, zone)),
        h("span", { class: "muted" }, ` · by ${g.granted_by} `),
        revoke,
      );
    });
    const form = h(
      "form",
      { class: "grant-form", "aria-label": "New standing approval" },
      h("label", {}, "Tool ", h("input", { name: "tool", required: true, maxlength: "200", placeholder: "archive_logs" })),
      h(
        "label",
        {},
        "Arguments ",
        h("input", { name: "pattern", maxlength: "4000", placeholder: '{"name": "*.log"} (empty: any)' }),
      ),
      h(
        "label",
        {},
        "For ",
        h("select", { name: "span" }, GRANT_SPANS.map(([text, seconds]) => h("option", { value: String(seconds) }, text))),
      ),
      h("button", { type: "submit", class: "small" }, "Add standing approval"),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.addGrant(form);
    });
    return h(
      "section",
      { class: "job-grants", "aria-label": "Standing approvals" },
      h("h3", {}, "Standing approvals"),
      h(
        "p",
        { class: "muted" },
        "Its scheduled runs call these tools without waiting for a person; every other call still asks.",
      ),
      items.length ? h("ul", { class: "grants" }, items) : h("p", { class: "muted no-grants" }, "None."),
      form,
    );
  }

  /** The session's delivery records by message id (a channel's outcome for a run's reply). */
  async loadDeliveries(sessionKey) {
    const found = new Map();
    if (!sessionKey) return found;
    let data;
    try {
      data = await this.api("GET", `/api/deliveries?session_key=${encodeURIComponent(sessionKey)}&limit=200`);
    } catch {
      return found; // the outcomes show as unknown; the rest of the view does not depend on them
    }
    for (const d of data.deliveries || []) {
      if (!found.has(d.message_id)) found.set(d.message_id, []);
      found.get(d.message_id).push(d);
    }
    return found;
  }

  /** Cost per day: the server's usage report when it has one, else added up from the runs. */
  async costDays() {
    const zone = knownZone(this.job.tz);
    if (!this.usageMissing) {
      try {
        // days in its zone; the report holds this job's rows only
        const report = await this.api("GET", path.usage({ jobId: this.job.id, tz: zone }));
        const days = usageByDay(report).map((d) => ({ day: d.day, runs: d.runs, cost_usd: d.cost_usd ?? 0 }));
        return { days, source: "server" };
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) this.usageMissing = true;
      }
    }
    return { days: costByDay(this.runs, zone), source: "runs" };
  }

  /** Renew a job that ends or ended: a later end (a date in its zone) and/or more runs. */
  async renew() {
    const job = this.job;
    const form = this.body.querySelector(".renew-form");
    const until = form.querySelector("input[name=until]").value;
    const runs = form.querySelector("input[name=runs]").value;
    const body = {};
    if (until) body.end_at = new Date(until).toISOString();
    if (runs) body.runs = Number(runs);
    try {
      await this.api("POST", `${path.job(job.id)}/renew`, body);
      await this.open(job.id);
    } catch (error) {
      showError(error);
    }
  }

  render(cost) {
    const job = this.job;
    const zone = knownZone(job.tz);
    this.title.textContent = job.name;
    const upcoming = job.upcoming || [];
    const alerts = job.alerts || [];
    const facts = h(
      "dl",
      { class: "job-facts" },
      alerts.length
        ? [
            h("dt", {}, "Alerts"),
            h("dd", { class: "job-alerts" }, alerts.map((alert) => h("span", { class: `badge alert-badge alert-${alert}` }, ALERT_TEXT[alert] || alert))),
          ]
        : null,
      endsFacts(job, zone, () => this.renew()),
      h("dt", {}, "When"),
      h("dd", { class: "job-schedule" }, job.schedule),
      h("dt", {}, "Spec"),
      h("dd", {}, h("code", { class: "job-spec" }, specText(job.spec, zone))),
      h("dt", {}, "Zone"),
      h("dd", { class: "job-zone" }, zone),
      h("dt", {}, "Next fires"),
      h(
        "dd",
        {},
        upcoming.length
          ? h("ol", { class: "next-fires" }, upcoming.map((at) => h("li", {}, timeEl(at, zone))))
          : h("span", { class: "muted" }, job.enabled ? "none left" : "paused"),
      ),
      job.moved ? h("dt", {}, "Moved") : null,
      job.moved ? h("dd", { class: "job-moved" }, movedText(job.moved, zone)) : null,
      h("dt", {}, "Policy"),
      h("dd", {}, h("ul", { class: "policy" }, policyLines(job, zone).map((line) => h("li", {}, line)))),
      h("dt", {}, "Usage"),
      h("dd", { class: "job-usage" }, usageText(job.usage)),
      ...(job.kind === "agent_turn" ? [h("dt", {}, "Trigger"), this.triggerCell(job)] : []),
    );
    const charts = h(
      "section",
      { class: "job-charts", "aria-label": "Recent runs" },
      h(
        "figure",
        {},
        h("figcaption", {}, "Recent runs: outcome and duration"),
        this.runs.length ? runsChart(this.runs, zone) : h("p", { class: "muted" }, "No runs yet."),
        h(
          "div",
          { class: "legend" },
          ["succeeded", "failed", "empty", "missed", "skipped", "running"].map((state) =>
            h("span", { class: `key state-${state}` }, RUN_STATE_TEXT[state]),
          ),
        ),
      ),
      h(
        "figure",
        {},
        h("figcaption", {}, cost.source === "server" ? "Cost per day" : "Cost per day (of the runs shown)"),
        cost.days.length ? costChart(cost.days) : h("p", { class: "muted" }, "No cost yet."),
      ),
    );
    const more = this.more
      ? h("button", { type: "button", class: "small load-more", onclick: (event) => this.loadMore(event.currentTarget) }, "Load more")
      : null;
    this.body.replaceChildren(
      ...[this.waitingBadge(zone)].filter(Boolean),
      facts,
      ...[this.budgetSection()].filter(Boolean),
      ...[this.grantsSection(zone)].filter(Boolean),
      charts,
      h(
        "section",
        { class: "job-runs", "aria-label": "Run history" },
        h("h3", {}, "Run history"),
        this.runs.length
          ? h(
              "div",
              { class: "table-wrap" },
              h(
                "table",
                { class: "runs" },
                h(
                  "thead",
                  {},
                  h(
                    "tr",
                    {},
                    h("th", { scope: "col" }, `Fire time (${zone})`),
                    ["Late", "State", "Took", "Tokens in / out", "Cost", "Tools", "Delivery", "Error", ""].map((t) =>
                      h("th", { scope: "col" }, t),
                    ),
                  ),
                ),
                h("tbody", {}, this.runs.map((run) => this.row(run, zone))),
              ),
            )
          : h("p", { class: "muted" }, "It has not run yet."),
        more,
      ),
    );
  }

  /** Whether events can run it, the buttons that change that, and a secret just made. */
  triggerCell(job) {
    const on = Boolean(job.trigger);
    const button = (label, action) =>
      h("button", { type: "button", class: "small", onclick: (event) => this.changeTrigger(action, event.currentTarget) }, label);
    const shown = this.secret && this.secret.jobId === job.id ? this.secret : null;
    return h(
      "dd",
      { class: "job-trigger" },
      h(
        "p",
        { class: "trigger-state" },
        on ? `On: signed events posted to ${shown?.url || `/hooks/jobs/${job.id}`} run it.` : "Off: only its schedule runs it.",
      ),
      on ? [button("Rotate secret", "rotate"), " ", button("Disable trigger", "disable")] : button("Enable trigger", "enable"),
      shown && on
        ? h(
            "p",
            { class: "trigger-secret", role: "status" },
            "Secret (shown this once; copy it now): ",
            h("code", {}, shown.secret),
          )
        : null,
    );
  }

  async changeTrigger(action, button) {
    button.disabled = true;
    const job = this.job;
    try {
      const method = action === "disable" ? "DELETE" : "POST";
      const answer = await this.api(method, path.jobTrigger(job.id, action === "rotate"));
      this.secret = answer.secret ? { jobId: job.id, secret: answer.secret, url: answer.url } : null;
      await this.load();
    } catch (error) {
      button.disabled = false;
      showError(this.error, `Could not change the trigger of “${job.name}”: ${error.message}`);
    }
  }

  row(run, zone) {
    const error = run.error ? String(run.error) : "";
    const calls = run.tool_calls || [];
    const failedCalls = calls.filter((c) => ["error", "denied", "unknown"].includes(toolStatus(c))).length;
    return h(
      "tr",
      { class: `run state-${run.state}`, dataset: { id: run.id }, "aria-label": `Run of ${zonedTime(run.fire_at, zone)}` },
      h("td", { class: "fire", "data-label": "Fire time" }, cellTime(run.fire_at, zone), run.manual ? h("span", { class: "badge manual" }, "run now") : null, run.trigger === "event" ? h("span", { class: "badge manual" }, "event") : null,
        gateVerdictText(run)
          ? h(
              "span",
              { class: `badge gate-verdict gate-${run.delivery.gate.verdict}`, title: run.output && run.delivery.gate.verdict !== "run" ? `The gate said: ${String(run.output).slice(0, ERROR_EXCERPT)}` : null },
              gateVerdictText(run),
            )
          : null,
        (run.reschedules || []).map((m) =>
          h("span", { class: "badge moved", title: m.reason }, `moved a next run to ${zonedTime(m.to, zone)}: ${m.reason}`),
        ),
      ),
      h("td", { class: "late", "data-label": "Late" }, lateness(run) || "—"),
      h("td", { "data-label": "State" }, h("span", { class: `state-badge state-${run.state}` }, RUN_STATE_TEXT[run.state] || run.state)),
      h("td", { class: "took", "data-label": "Took" }, formatDuration(runDuration(run)) || "—"),
      h("td", { class: "tokens", "data-label": "Tokens" }, tokensText(run.usage)),
      h("td", { class: "cost", "data-label": "Cost" }, money(run.usage?.cost_usd)),
      h(
        "td",
        { class: "tools-cell", "data-label": "Tools" },
        calls.length
          ? h(
              "details",
              {},
              h("summary", {}, `${calls.length} call${calls.length === 1 ? "" : "s"}${failedCalls ? `, ${failedCalls} failed` : ""}`),
              h("ul", {}, calls.map((c) => h("li", { class: `call status-${toolStatus(c)}` }, `${c.name}: ${toolStatus(c)}`))),
            )
          : "—",
      ),
      h("td", { class: "delivery", "data-label": "Delivery" }, this.deliveryText(run)),
      h(
        "td",
        { class: error ? "error" : "muted", title: error || null, "data-label": "Error" },
        error ? (error.length > ERROR_EXCERPT ? `${error.slice(0, ERROR_EXCERPT)}…` : error) : "—",
      ),
      h(
        "td",
        {},
        run.message_id
          ? h(
              "button",
              { type: "button", class: "link small show-turn", onclick: () => this.showTurn(run) },
              "Show in chat",
            )
          : null,
      ),
    );
  }

  /** Where its result went: a delivery job's target, a channel's delivery record, the chat. */
  deliveryText(run) {
    const { gate, notice, ...d } = run.delivery && typeof run.delivery === "object" ? run.delivery : {};
    if (notice) return notice.delivered ? "its gate's notice delivered" : `no notice: ${notice.reason}`;
    if (gate && gate.verdict !== "run") return "—"; // it did not run: nothing to deliver
    if (Object.keys(d).length) {
      if (d.delivered) return d.target?.channel ? `delivered to ${d.target.channel}` : "delivered";
      if (d.error) return `not delivered: ${d.error}`;
      if (d.evaluated && d.evaluated.deliver === false) return `not sent: ${d.evaluated.reason}`;
      return "not delivered";
    }
    if (!run.message_id) return "—";
    const records = this.deliveries.get(run.message_id) || [];
    if (!records.length) return "in the chat";
    return records
      .map((r) => `${r.channel}: ${r.state}${r.state === "failed" && r.last_error ? ` (${r.last_error})` : ""}`)
      .join("; ");
  }

  showTurn(run) {
    this.dialog.close();
    this.onShowTurn(run);
  }
}
