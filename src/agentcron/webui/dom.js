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

const TIME_FORMAT = new Intl.DateTimeFormat(undefined, {
  weekday: "short",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
});

/** An ISO instant in the browser's local time, e.g. "Mon, Nov 23, 09:10". */
export function localTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : TIME_FORMAT.format(date);
}

/** A <time> element showing local time, with the exact instant as its datetime/title. */
export function timeEl(iso, extraClass = "") {
  if (!iso) return h("span", { class: `muted ${extraClass}`.trim() }, "—");
  return h("time", { datetime: iso, title: iso, class: extraClass || null }, localTime(iso));
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
