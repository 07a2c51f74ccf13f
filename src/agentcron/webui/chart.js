// Two small inline SVG charts of a job's recent runs, drawn here (no library): each run as a
// bar (its height the run's duration, its colour the outcome), and the cost per day.

import { zonedTime } from "./dom.js";
import { formatDuration } from "./tools.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 110;
const BASE = HEIGHT - 16; // the bars stand on this line; the space below holds the day labels
const MIN_BAR = 3; // a day without cost still shows as a mark
const OUTCOME_BAR = 14; // every run's bar shows its outcome; its duration adds to the height
export const MAX_BARS = 40;

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

function frame(label, cls) {
  return svg("svg", {
    class: `chart ${cls}`,
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": label,
  });
}

/** A run's duration in ms (started to finished), or null. */
export function runDuration(run) {
  if (!run.started_at || !run.finished_at) return null;
  const ms = Date.parse(run.finished_at) - Date.parse(run.started_at);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** The latest MAX_BARS runs (given newest first), oldest at the left. */
export function runsChart(runs, zone) {
  const shown = runs.slice(0, MAX_BARS).reverse();
  const chart = frame(`Outcome and duration of the last ${shown.length} runs`, "runs-chart");
  chart.append(svg("line", { class: "axis", x1: 0, y1: BASE, x2: WIDTH, y2: BASE }));
  const longest = Math.max(1, ...shown.map((r) => runDuration(r) ?? 0));
  const slot = WIDTH / Math.max(shown.length, 10);
  shown.forEach((run, i) => {
    const ms = runDuration(run);
    const height = OUTCOME_BAR + (ms === null ? 0 : (ms / longest) * (BASE - 8 - OUTCOME_BAR));
    const took = formatDuration(ms);
    chart.append(
      svg(
        "rect",
        {
          class: `bar state-${run.state}`,
          x: (i * slot + slot * 0.15).toFixed(1),
          y: (BASE - height).toFixed(1),
          width: (slot * 0.7).toFixed(1),
          height: height.toFixed(1),
          "data-run": run.id,
        },
        svg("title", {}, `${zonedTime(run.fire_at, zone)} (${zone}): ${run.state}${took ? `, ${took}` : ""}`),
      ),
    );
  });
  return chart;
}

/** The day (YYYY-MM-DD) of an instant in `zone`. */
export function dayIn(iso, zone) {
  const parts = new Intl.DateTimeFormat("en-CA", {
    timeZone: zone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  }).formatToParts(new Date(iso));
  const get = (type) => parts.find((p) => p.type === type)?.value || "";
  return `${get("year")}-${get("month")}-${get("day")}`;
}

/** Cost per day from the runs themselves (when the server has no usage report): their
 * `usage.cost_usd`, by the day of their fire in `zone`, oldest first. */
export function costByDay(runs, zone) {
  const days = new Map();
  for (const run of runs) {
    const day = dayIn(run.fire_at, zone);
    const entry = days.get(day) || { day, runs: 0, cost_usd: 0 };
    entry.runs += 1;
    const cost = run.usage?.cost_usd;
    if (typeof cost === "number" && Number.isFinite(cost)) entry.cost_usd += cost;
    days.set(day, entry);
  }
  return [...days.values()].sort((a, b) => a.day.localeCompare(b.day));
}

/**
 * A usage report's rows (GET /api/usage: one per day, session and job) summed per day, oldest
 * first: {day, runs, turns, input_tokens, output_tokens, cost_usd} (cost null: none priced).
 */
export function usageByDay(report) {
  const days = new Map();
  for (const row of report.days || []) {
    const day = days.get(row.day) || {
      day: row.day, runs: 0, turns: 0, input_tokens: 0, output_tokens: 0, cost_usd: null,
    };
    day.runs += row.runs || 0;
    day.turns += row.turns || 0;
    day.input_tokens += row.input_tokens || 0;
    day.output_tokens += row.output_tokens || 0;
    if (typeof row.cost_usd === "number") day.cost_usd = (day.cost_usd ?? 0) + row.cost_usd;
    days.set(row.day, day);
  }
  return [...days.values()].sort((a, b) => a.day.localeCompare(b.day));
}

export function money(usd) {
  if (typeof usd !== "number" || !Number.isFinite(usd)) return "—";
  if (usd === 0) return "$0";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** Bars of cost per day: days = [{day, cost_usd, runs}] oldest first (the last MAX_BARS). */
export function costChart(days) {
  const shown = days.slice(-MAX_BARS);
  const chart = frame(`Cost per day over ${shown.length} day${shown.length === 1 ? "" : "s"}`, "cost-chart");
  chart.append(svg("line", { class: "axis", x1: 0, y1: BASE, x2: WIDTH, y2: BASE }));
  const most = Math.max(0, ...shown.map((d) => d.cost_usd || 0));
  const slot = WIDTH / Math.max(shown.length, 10);
  shown.forEach((d, i) => {
    const height = most > 0 ? Math.max(MIN_BAR, ((d.cost_usd || 0) / most) * (BASE - 8)) : MIN_BAR;
    const x = i * slot + slot * 0.15;
    chart.append(
      svg(
        "rect",
        {
          class: "bar cost",
          x: x.toFixed(1),
          y: (BASE - height).toFixed(1),
          width: (slot * 0.7).toFixed(1),
          height: height.toFixed(1),
          "data-day": d.day,
        },
        svg("title", {}, `${d.day}: ${money(d.cost_usd)}${d.runs !== undefined ? `, ${d.runs} run${d.runs === 1 ? "" : "s"}` : ""}`),
      ),
    );
    if (shown.length <= 10) {
      chart.append(svg("text", { class: "day", x: (x + slot * 0.35).toFixed(1), y: HEIGHT - 3, "text-anchor": "middle" }, d.day.slice(5)));
    }
  });
  return chart;
}

/** Tokens as the job detail writes them ("12,345"). */
export function tokenCount(n) {
  return typeof n === "number" && Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—";
}

/**
 * Bars of a job's spend per UTC day against its cap per day (GET /api/jobs/{id}/spend's days,
 * oldest first; the last MAX_BARS). `unit` is "usd" (cost_usd) or "tokens" (input + output);
 * `cap` (or null) is drawn as a line, and a day at or over it is marked.
 */
export function spendChart(days, unit, cap) {
  const shown = days.slice(-MAX_BARS);
  const value = (d) => (unit === "usd" ? d.cost_usd || 0 : (d.input_tokens || 0) + (d.output_tokens || 0));
  const text = (v) => (unit === "usd" ? money(v) : `${tokenCount(v)} tokens`);
  const what = unit === "usd" ? "Cost" : "Tokens";
  const label = `${what} per UTC day over ${shown.length} day${shown.length === 1 ? "" : "s"}${cap !== null ? `, against ${text(cap)} a day` : ""}`;
  const chart = frame(label, "spend-chart");
  chart.append(svg("line", { class: "axis", x1: 0, y1: BASE, x2: WIDTH, y2: BASE }));
  const top = Math.max(0, cap ?? 0, ...shown.map(value));
  const y = (v) => BASE - (top > 0 ? (v / top) * (BASE - 8) : 0);
  const slot = WIDTH / Math.max(shown.length, 10);
  shown.forEach((d, i) => {
    const v = value(d);
    const height = Math.max(MIN_BAR, BASE - y(v));
    const x = i * slot + slot * 0.15;
    const over = cap !== null && v >= cap;
    chart.append(
      svg(
        "rect",
        {
          class: `bar spend${over ? " over" : ""}`,
          x: x.toFixed(1),
          y: (BASE - height).toFixed(1),
          width: (slot * 0.7).toFixed(1),
          height: height.toFixed(1),
          "data-day": d.day,
          "data-value": String(v),
        },
        svg("title", {}, `${d.day} (UTC): ${text(v)}${cap !== null ? ` of ${text(cap)}` : ""}, ${d.runs} run${d.runs === 1 ? "" : "s"}`),
      ),
    );
    if (shown.length <= 10) {
      chart.append(svg("text", { class: "day", x: (x + slot * 0.35).toFixed(1), y: HEIGHT - 3, "text-anchor": "middle" }, d.day.slice(5)));
    }
  });
  if (cap !== null) {
    const at = y(cap).toFixed(1);
    chart.append(svg("line", { class: "cap", x1: 0, y1: at, x2: WIDTH, y2: at }, svg("title", {}, `Budget: ${text(cap)} a day`)));
  }
  return chart;
}
