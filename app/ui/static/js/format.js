// Text for people: counts, instants, and a snippet of an item with the query's words marked.

import { h } from "./dom.js";

const number = new Intl.NumberFormat("en");

export const count = (n) => number.format(n);
export const plural = (n, one, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;

/** An RFC 3339 instant as `2024-05-01 08:00 UTC` (`08:00:42` with `seconds`). */
export function instant(value, { seconds = false } = {}) {
  if (!value) return "";
  const iso = new Date(value).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, seconds ? 19 : 16)} UTC`;
}

// Words that carry no search meaning, so a snippet does not centre on "the".
const STOP = new Set(("a an and are as at be but by did do does for from had has have how i if in into is it its " +
  "me my no not of on or our so than that the their them then there these they this to was we were what when " +
  "where which who why will with you your").split(" "));

/** The query's words, cut to a rough stem so "deploying" marks "deploy" and "deploys". */
export function terms(query) {
  const words = query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const stems = words.filter((w) => w.length > 1 && !STOP.has(w)).map((w) => {
    for (const suffix of ["ing", "ies", "es", "ed", "s"]) {
      if (w.length > suffix.length + 2 && w.endsWith(suffix)) return w.slice(0, -suffix.length);
    }
    return w;
  });
  return [...new Set(stems)];
}

/** About `size` characters of `text` around the first word matching a term, with the matches in <mark>. */
export function snippet(text, stems, size = 260) {
  const flat = text.replace(/\s+/g, " ").trim();
  const matches = [];
  if (stems.length) {
    for (const word of flat.matchAll(/[\p{L}\p{N}]+/gu)) {
      const lower = word[0].toLowerCase();
      if (stems.some((stem) => lower.startsWith(stem))) matches.push([word.index, word.index + word[0].length]);
    }
  }
  let start = 0;
  if (matches.length && matches[0][0] > size / 3) {
    start = flat.lastIndexOf(" ", matches[0][0] - size / 4) + 1;
  }
  let end = Math.min(flat.length, start + size);
  if (end < flat.length) end = Math.max(flat.lastIndexOf(" ", end), start + size / 2);
  const parts = [start > 0 ? "…" : ""];
  let at = start;
  for (const [from, to] of matches) {
    if (from < start || to > end) continue;
    parts.push(flat.slice(at, from), h("mark", {}, flat.slice(from, to)));
    at = to;
  }
  parts.push(flat.slice(at, end), end < flat.length ? "…" : "");
  return parts;
}

/** A namespace segment `team:acme` as its kind and id, the kind quieter. */
export function segment(name) {
  const [kind, id] = name.includes(":") ? name.split(/:(.*)/s) : ["", name];
  return kind ? [h("span", { class: "seg-kind" }, `${kind}:`), id] : [id];
}

export const namespaceOf = (meta) => meta?.namespace ?? "root";
