// The observed_at histogram, from explore's time facets (observed_year ... observed_hour: a whole
// level of counts in one call). The years come first; their span is cut into at most MAX_BARS
// calendar intervals of the unit that fits, counted by that unit's facet, zooming in while
// everything falls into one of them. Bars are in UTC.

import { explore } from "./api.js";
import { $, fill, h, keepFocus } from "./dom.js";
import { count, plural } from "./format.js";
import { filterOf, state, update } from "./state.js";

const MAX_BARS = 24;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const FIRST = Date.UTC(1970, 0, 1); // where the drawn span starts; earlier items are counted apart
const BUCKETS = 500; // explore's most: a unit's buckets over a span that unitFor gave it are fewer
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

const iso = (t) => new Date(t).toISOString();
const year = (t) => new Date(t).getUTCFullYear();
const utcYear = (y) => Date.UTC(y, 0, 1);

const cache = new Map();

export function forgetCounts() {
  cache.clear();
}

const sum = (buckets) => buckets.reduce((n, bucket) => n + bucket.count, 0);

/** Explore's `unit` facet under `filter`: its buckets as {start, count}, kept until something is
 * forgotten or the key changes (forgetCounts). */
function counted(unit, filter, signal) {
  const key = JSON.stringify([unit, filter]);
  if (!cache.has(key)) {
    const asked = explore(`observed_${unit}`, filter, BUCKETS, signal).then((page) => ({
      total: page.total,
      missing: page.missing,
      cut: page.more_buckets > 0,
      buckets: page.buckets.map((bucket) => ({ start: Date.parse(bucket.value), count: bucket.count })),
    }));
    asked.catch(() => cache.delete(key));
    cache.set(key, asked);
  }
  return cache.get(key);
}

const within = (base, a, b) => ({ ...base, observed_after: iso(a), observed_before: iso(b) });

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

/** The years drawn by default (1970 to next year) and what lies outside them, from one count. */
async function years(base, signal) {
  const end = utcYear(year(Date.now()) + 2);
  const all = await counted("year", base, signal);
  const inRange = (bucket) => bucket.start >= FIRST && bucket.start < end;
  const found = { held: all.buckets.filter(inRange), notes: [], end };
  if (all.cut) {
    // Over 500 distinct years: the drawn span's years are counted alone, the rest as one number.
    found.held = (await counted("year", within(base, FIRST, end), signal)).buckets;
    const outside = all.total - all.missing - sum(found.held);
    if (outside) found.notes.push(`${count(outside)} outside 1970–${year(end) - 1}`);
  } else {
    const earlier = sum(all.buckets.filter((bucket) => bucket.start < FIRST));
    const later = sum(all.buckets.filter((bucket) => bucket.start >= end));
    if (earlier) found.notes.push(`${count(earlier)} before 1970`);
    if (later) found.notes.push(`${count(later)} later`);
  }
  found.observed = all.total - all.missing;
  return found;
}

export async function loadTimeline(signal) {
  const box = $("#facet-observed");
  if (!box) return;
  box.setAttribute("aria-busy", "true");
  const base = filterOf("observed");
  const chosen = state.window;
  let a, b, known = null, observed, notes = [];
  if (chosen) {
    [a, b] = [Date.parse(chosen.after), Date.parse(chosen.before)];
  } else {
    const found = await years(base, signal);
    ({ observed, notes } = found);
    if (found.held.length) {
      a = Math.min(...found.held.map((bucket) => bucket.start));
      b = Math.min(advance(Math.max(...found.held.map((bucket) => bucket.start)), "year", 1), found.end);
      known = found.held; // the span's years: a span drawn in years needs no other count
    }
  }
  let bars = [];
  while (a !== undefined) {
    const cut = intervals(a, b);
    const unit = cut[0].unit;
    let buckets;
    if (unit === "year" && known) {
      buckets = known;
    } else {
      const page = await counted(unit, within(base, a, b), signal);
      if (chosen && observed === undefined) observed = page.total; // every item in the window has observed_at
      buckets = page.buckets;
    }
    for (const bar of cut) bar.count = sum(buckets.filter((bucket) => bucket.start >= bar.start && bucket.start < bar.end));
    const held = cut.filter((bar) => bar.count > 0);
    if (!held.length) break; // forgotten between the counts: nothing to draw
    bars = cut.slice(cut.indexOf(held[0]), cut.indexOf(held.at(-1)) + 1);
    if (held.length > 1 || unit === "hour") break;
    [a, b] = [held[0].start, held[0].end];
    known = null;
  }
  box.removeAttribute("aria-busy");
  const focused = box.contains(document.activeElement);
  keepFocus(box, () => draw(box, bars, observed ?? 0, notes));
  // The bar picked is drawn again in finer bars: the keyboard goes on from the first of them.
  if (focused && !box.contains(document.activeElement)) box.querySelector("button.bar")?.focus();
}

function draw(box, bars, observed, notes) {
  const top = Math.max(1, ...bars.map((bar) => bar.count));
  const chart = h("div", { class: "histogram", role: "group", "aria-label": "Items by observed time" });
  for (const bar of bars) {
    const text = `${bar.label}: ${plural(bar.count, "item")}`;
    const fill_ = h("span", { class: "bar-fill" });
    fill_.style.height = `${Math.max(4, Math.round((100 * bar.count) / top))}%`;
    chart.append(bar.count
      ? h("button", {
        type: "button", class: "bar", title: text, "aria-label": `${text}: show only these`, "data-key": `bar:${bar.start}`,
        onclick: () => update({ window: { after: iso(bar.start), before: iso(bar.end), label: bar.label } }),
      }, fill_)
      : h("span", { class: "bar empty", title: text }, fill_));
  }
  fill(box,
    bars.length ? chart : h("div", { class: "histogram histogram-empty" }, h("p", { class: "quiet" }, "No item here carries observed_at.")),
    bars.length ? h("div", { class: "axis" }, h("span", {}, bars[0].label), bars.length > 1 ? h("span", {}, bars.at(-1).label) : null) : h("div", { class: "axis" }),
    h("p", { class: "quiet" }, observed ? `${plural(observed, "item")} with observed_at${notes.length ? ` (${notes.join(", ")})` : ""}` : ""));
}
