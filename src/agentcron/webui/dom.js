// Small DOM helpers. Text always goes in as text nodes / textContent: never innerHTML.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Create an element: h("p", {class: "x", "aria-label": "y", onclick: fn}, "text", child). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child)); // strings become text nodes
  }
}

/** A small clock icon; `label` makes it an image for assistive tech (else decorative). */
export function clockIcon(label = null, extraClass = "") {
  const wrap = document.createElement("span");
  wrap.className = `icon clock ${extraClass}`.trim();
  if (label) {
    wrap.setAttribute("role", "img");
    wrap.setAttribute("aria-label", label);
    wrap.title = label;
  } else {
    wrap.setAttribute("aria-hidden", "true");
  }
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const circle = document.createElementNS(SVG_NS, "circle");
  for (const [k, v] of Object.entries({ cx: 8, cy: 8, r: 6.5, fill: "none", stroke: "currentColor", "stroke-width": 1.6 })) {
    circle.setAttribute(k, String(v));
  }
  const hands = document.createElementNS(SVG_NS, "path");
  for (const [k, v] of Object.entries({ d: "M8 4.2V8l2.6 1.6", fill: "none", stroke: "currentColor", "stroke-width": 1.6, "stroke-linecap": "round" })) {
    hands.setAttribute(k, String(v));
  }
  svg.append(circle, hands);
  wrap.append(svg);
  return wrap;
}

/** The browser's zone: a web chat's zone (sent as `tz` when the UI creates a chat). */
export const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

const FORMATS = new Map(); // zone -> Intl.DateTimeFormat

function formatFor(zone) {
  let format = FORMATS.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat(undefined, {
      timeZone: zone,
      weekday: "short",
      month: "short",
      day: "numeric",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
    });
    FORMATS.set(zone, format);
  }
  return format;
}

/** `zone` if the browser knows it, else the browser's own zone (the label then says which). */
export function knownZone(zone) {
  if (!zone) return BROWSER_ZONE;
  try {
    formatFor(zone);
    return zone;
  } catch {
    return BROWSER_ZONE;
  }
}

/** An ISO instant in `zone` (default: the browser's), e.g. "Mon, Nov 23, 09:10". */
export function zonedTime(iso, zone = BROWSER_ZONE) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : formatFor(knownZone(zone)).format(date);
}

/** The UTC instant to the second: "2026-11-23 08:00:00 UTC". */
export function utcText(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** "in 25 s", "3 h ago", "in 5 min", "2 d ago" from the browser's clock. */
export function relativeShort(iso, now = Date.now()) {
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return "";
  const seconds = Math.round((at - now) / 1000);
  const size = Math.abs(seconds);
  let text;
  if (size < 60) text = `${size} s`;
  else if (size < 3600) text = `${Math.round(size / 60)} min`;
  else if (size < 86_400) text = `${Math.round(size / 3600)} h`;
  else text = `${Math.round(size / 86_400)} d`;
  if (size === 0) return "now";
  return seconds > 0 ? `in ${text}` : `${text} ago`;
}

/** What hovering a time shows: the UTC instant and how far it is from now. */
export function timeTitle(iso) {
  const relative = relativeShort(iso);
  return relative ? `${utcText(iso)} (${relative})` : utcText(iso);
}

/**
 * A <time> showing `iso` in `zone` (default: the browser's), with the zone named after it
 * unless `label` is false (the surrounding view names it). Hover: the UTC instant, relative.
 */
export function timeEl(iso, zone = BROWSER_ZONE, { label = true, cls = null } = {}) {
  if (!iso) return h("span", { class: `muted ${cls || ""}`.trim() }, "—");
  const shown = knownZone(zone);
  const text = zonedTime(iso, shown);
  return h(
    "time",
    { datetime: iso, title: timeTitle(iso), class: cls, dataset: { zone: shown } },
    label ? `${text} (${shown})` : text,
  );
}

/** Hovering (or focusing) any <time datetime> refreshes its title: "in 25 s" stays true. */
export function keepTimeTitlesFresh(root = document) {
  const refresh = (event) => {
    const el = event.target instanceof Element ? event.target.closest("time[datetime]") : null;
    if (el && el.getAttribute("datetime")) el.title = timeTitle(el.getAttribute("datetime"));
  };
  root.addEventListener("mouseover", refresh);
  root.addEventListener("focusin", refresh);
}

/** Show or hide an error paragraph (role=alert) with a message. */
export function showError(el, message) {
  if (message) {
    el.textContent = message;
    el.hidden = false;
  } else {
    el.textContent = "";
    el.hidden = true;
  }
}

/** Call fn at most once per `ms` burst (trailing). */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** A run's state in words (the run history, an automation's last status). */
export const RUN_STATE_TEXT = {
  pending: "pending",
  claimed: "starting",
  queued: "queued",
  deferred: "deferred",
  running: "running",
  succeeded: "succeeded",
  failed: "failed",
  empty: "nothing to report",
  missed: "missed",
  skipped: "skipped",
  interrupted: "interrupted",
  cancelled: "cancelled",
};
