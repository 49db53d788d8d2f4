// The observed_at histogram. Explore counts one facet per call and has no time facet, so each bar
// is one count: explore's `total` under the filter narrowed to the bar's interval. The span is
// found first (a binary search on years), then split into at most MAX_BARS calendar intervals,
// zooming in while everything falls into one of them. Bars are in UTC.

import { explore } from "./api.js";
import { $, fill, h, keepFocus } from "./dom.js";
import { count, plural } from "./format.js";
import { filterOf, state, update } from "./state.js";

const MAX_BARS = 24;
const PARALLEL = 4;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const FIRST = Date.UTC(1970, 0, 1); // where the default span starts; earlier items are counted apart
const MIN = Date.parse("0001-01-01T00:00:00Z");
const MAX = Date.parse("9999-12-31T00:00:00Z");
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

const iso = (t) => new Date(t).toISOString();
const year = (t) => new Date(t).getUTCFullYear();
const utcYear = (y) => Date.UTC(y, 0, 1);

const cache = new Map();

export function forgetCounts() {
  cache.clear();
}

/** A counter of items observed in [from, to) under `base`, at most PARALLEL calls at once. */
function counter(base, signal) {
  let running = 0;
  const waiting = [];
  const slot = () => (running < PARALLEL ? (running++, Promise.resolve()) : new Promise((go) => waiting.push(go)));
  const release = () => (waiting.length ? waiting.shift()() : running--);
  const prefix = JSON.stringify(base);
  return (from, to) => {
    const key = `${prefix}|${from}|${to}`;
    if (!cache.has(key)) {
      const filter = { ...base, observed_after: iso(from), observed_before: iso(to) };
      const asked = slot().then(() => explore("kind", filter, 1, signal)).then((page) => page.total).finally(release);
      asked.catch(() => cache.delete(key));
      cache.set(key, asked);
    }
    return cache.get(key);
  };
}

/** The calendar unit and step that cut [a, b) into at most MAX_BARS intervals. */
function unitFor(a, b) {
  const span = b - a;
  if (span > 4 * 366 * DAY) return ["year", Math.ceil((year(b - 1) - year(a) + 1) / MAX_BARS)];
  if (span > 62 * DAY) return ["month", Math.ceil(span / (31 * DAY) / MAX_BARS)];
  if (span > 2 * DAY) return ["day", Math.ceil(span / DAY / 31)];
  return ["hour", Math.ceil(span / HOUR / MAX_BARS)];
}

function floorTo(t, unit, step) {
  const d = new Date(t);
  if (unit === "year") return utcYear(d.getUTCFullYear() - (d.getUTCFullYear() % step));
  if (unit === "month") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - (d.getUTCMonth() % step), 1);
  if (unit === "day") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours() - (d.getUTCHours() % step));
}

function advance(t, unit, step) {
  const d = new Date(t);
  if (unit === "year") return utcYear(d.getUTCFullYear() + step);
  if (unit === "month") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + step, 1);
  return t + step * (unit === "day" ? DAY : HOUR);
}

function label(start, end, unit) {
  const d = new Date(start);
  const y = d.getUTCFullYear();
  const last = new Date(end - 1); // a bar clipped to the span may cover less than its step
  if (unit === "year") return y === last.getUTCFullYear() ? `${y}` : `${y}–${last.getUTCFullYear()}`;
  const month = `${MONTHS[d.getUTCMonth()]} ${y}`;
  if (unit === "month") return d.getUTCMonth() === last.getUTCMonth() ? month : `${MONTHS[d.getUTCMonth()]}–${MONTHS[last.getUTCMonth()]} ${y}`;
  const day = `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${y}`;
  if (unit === "day") return d.getUTCDate() === last.getUTCDate() ? day : `${day} – ${last.getUTCDate()} ${MONTHS[last.getUTCMonth()]}`;
  return `${day} ${String(d.getUTCHours()).padStart(2, "0")}:00 UTC`;
}

function intervals(a, b) {
  const [unit, step] = unitFor(a, b);
  const found = [];
  for (let start = floorTo(a, unit, step); start < b; start = advance(start, unit, step)) {
    const end = Math.min(advance(start, unit, step), b);
    found.push({ start: Math.max(start, a), end, unit, label: label(Math.max(start, a), end, unit) });
  }
  return found;
}

/** The first and last year in [a, b) holding an item: two binary searches, side by side. */
async function yearsHeld(count, a, b) {
  const first = async () => {
    let lo = year(a), hi = year(b - 1);
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      if (await count(a, Math.min(utcYear(mid + 1), b)) > 0) hi = mid; else lo = mid + 1;
    }
    return lo;
  };
  const last = async () => {
    let lo = year(a), hi = year(b - 1);
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (await count(Math.max(utcYear(mid), a), b) > 0) lo = mid; else hi = mid - 1;
    }
    return lo;
  };
  const [y0, y1] = await Promise.all([first(), last()]);
  return [Math.max(utcYear(y0), a), Math.min(utcYear(y1 + 1), b)];
}

export async function loadTimeline(signal) {
  const box = $("#facet-observed");
  if (!box) return;
  box.setAttribute("aria-busy", "true");
  const count = counter(filterOf("observed"), signal);
  const chosen = state.window;
  let a = chosen ? Date.parse(chosen.after) : FIRST;
  let b = chosen ? Date.parse(chosen.before) : utcYear(year(Date.now()) + 2);
  const [inside, earlier, later] = await Promise.all([
    count(a, b), chosen ? 0 : count(MIN, a), chosen ? 0 : count(b, MAX),
  ]);
  let bars = [];
  if (inside > 0) {
    if (!chosen) [a, b] = await yearsHeld(count, a, b);
    for (;;) {
      const cut = intervals(a, b);
      const counts = await Promise.all(cut.map((bar) => count(bar.start, bar.end)));
      cut.forEach((bar, i) => { bar.count = counts[i]; });
      const held = cut.filter((bar) => bar.count > 0);
      if (!held.length) break; // forgotten between the counts: nothing to draw
      bars = cut.slice(cut.indexOf(held[0]), cut.indexOf(held.at(-1)) + 1);
      if (held.length > 1 || cut[0].unit === "hour") break;
      [a, b] = [held[0].start, held[0].end];
    }
  }
  box.removeAttribute("aria-busy");
  keepFocus(box, () => draw(box, bars, inside, earlier, later));
}

function draw(box, bars, inside, earlier, later) {
  const top = Math.max(1, ...bars.map((bar) => bar.count));
  const chart = h("div", { class: "histogram", role: "group", "aria-label": "Items by observed time" });
  for (const bar of bars) {
    const text = `${bar.label}: ${plural(bar.count, "item")}`;
    const fill_ = h("span", { class: "bar-fill" });
    fill_.style.height = `${Math.max(4, Math.round((100 * bar.count) / top))}%`;
    chart.append(bar.count
      ? h("button", {
        type: "button", class: "bar", title: text, "aria-label": `${text}: show only these`, "data-key": `bar:${bar.start}`,
        onclick: () => update({ window: { after: iso(bar.start), before: iso(bar.end), label: `observed ${bar.label}` } }),
      }, fill_)
      : h("span", { class: "bar empty", title: text }, fill_));
  }
  const notes = [];
  if (earlier) notes.push(`${count(earlier)} before 1970`);
  if (later) notes.push(`${count(later)} later`);
  const total = inside + earlier + later;
  fill(box,
    bars.length ? chart : h("div", { class: "histogram histogram-empty" }, h("p", { class: "quiet" }, "No item here carries observed_at.")),
    bars.length ? h("div", { class: "axis" }, h("span", {}, bars[0].label), bars.length > 1 ? h("span", {}, bars.at(-1).label) : null) : h("div", { class: "axis" }),
    h("p", { class: "quiet" }, total ? `${plural(total, "item")} with observed_at${notes.length ? ` (${notes.join(", ")})` : ""}` : ""));
}
