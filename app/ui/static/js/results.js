// The item list: `list` in stored order without a query, `fetch` in the chosen mode with one;
// pages through cursors (a stack of them, so Previous is exact), and keeps the selection.

import { call } from "./api.js";
import { $, fill, h, keepFocus } from "./dom.js";
import { count, instant, namespaceOf, snippet, terms } from "./format.js";
import { filterOf, state } from "./state.js";

export const PAGE_SIZE = 20;
const paging = { cursors: [null], index: 0, next: null };
/** Selected items by id (across pages), for forget. */
export const selected = new Map();
const hooks = { open: () => {}, selection: () => {} };

export function wireResults(open, selectionChanged) {
  hooks.open = open;
  hooks.selection = selectionChanged;
}

export function firstPage() {
  paging.cursors = [null];
  paging.index = 0;
  paging.next = null;
}

export function badge(kind) {
  return h("span", { class: `badge badge-${kind}` }, kind);
}

export async function loadResults(signal) {
  const list = $("#results");
  list.setAttribute("aria-busy", "true");
  if (!list.children.length) fill(list, Array.from({ length: 4 }, () => h("li", { class: "hit skeleton", "aria-hidden": "true" })));
  const body = { limit: PAGE_SIZE, filter: filterOf() };
  const cursor = paging.cursors[paging.index];
  if (cursor) body.cursor = cursor;
  let route = "list";
  if (state.query) {
    Object.assign(body, { query: state.query, mode: state.mode });
    route = "fetch";
  }
  try {
    const answer = await call(route, body, { signal });
    paging.next = answer.next_cursor ?? null;
    render(answer.hits ?? answer.items);
  } finally {
    list.removeAttribute("aria-busy");
  }
}

/** The count of items the filter admits, from the facets (list only: a search ranks them all). */
export function setMatching(matching) {
  const out = $("#results-count");
  out.dataset.matching = String(matching);
  if (!state.query) out.textContent = `${count(matching)} ${matching === 1 ? "item" : "items"}`;
}

function render(hits) {
  const stems = terms(state.query);
  $("#results-heading").textContent = state.query ? `Matches for “${state.query}”` : "Items";
  const out = $("#results-count");
  if (state.query) out.textContent = `${state.mode} · best first`;
  else if (out.dataset.matching) setMatching(Number(out.dataset.matching));
  const list = $("#results");
  fill(list, hits.map((hit) => row(hit, stems)));
  if (!hits.length) list.append(empty());
  const pager = $("#pager");
  keepFocus(pager, () => fill(pager,
    h("button", { type: "button", class: "button small ghost", "data-key": "previous", disabled: paging.index === 0, onclick: () => turn(-1) }, "‹ Previous"),
    h("span", { class: "page-number" }, `Page ${paging.index + 1}`),
    h("button", { type: "button", class: "button small ghost", "data-key": "next", disabled: !paging.next, onclick: () => turn(1) }, "Next ›")));
}

let turned = () => {};
export function onTurn(listener) {
  turned = listener;
}

function turn(step) {
  if (step > 0) paging.cursors[paging.index + 1] = paging.next;
  paging.index += step;
  turned();
}

function empty() {
  const anything = Object.keys(filterOf()).length || state.query;
  if (anything) {
    return h("li", { class: "empty" }, h("p", {}, state.query
      ? "Nothing matches this search here. Try another mode, other words, or fewer filters."
      : "No item matches these filters. Remove a filter above to see more."));
  }
  return h("li", { class: "empty" },
    h("p", { class: "empty-title" }, "Nothing stored yet"),
    h("p", {}, "Store a first memory, then reload this page:"),
    h("pre", {}, h("code", {}, `curl -s ${location.origin}/v1/store -H 'content-type: application/json' \\
  -d '{"type": "learning", "text": "prefers tabs over spaces", "kind": "preference",
       "confidence": 0.8, "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]}}'`)));
}

/** A document's title (its rendered text's `# ` line, contract §1) apart from its body. */
export function split(hit) {
  if (hit.kind !== "document" || !hit.text.startsWith("# ")) return [null, hit.text];
  const [first, ...rest] = hit.text.split("\n");
  return [first.slice(2), rest.join("\n").trimStart()];
}

function row(hit, stems) {
  const check = h("input", { type: "checkbox", class: "hit-check", "aria-label": `Select this ${hit.kind}` });
  check.checked = selected.has(hit.id);
  const item = h("li", { class: `hit${check.checked ? " is-selected" : ""}` });
  check.addEventListener("change", () => {
    if (check.checked) selected.set(hit.id, hit); else selected.delete(hit.id);
    item.classList.toggle("is-selected", check.checked);
    hooks.selection();
  });
  const meta = hit.meta ?? {};
  const [title, text] = split(hit);
  const open = h("button", { type: "button", class: "hit-open", "data-id": hit.id, onclick: () => hooks.open(hit.id) },
    h("span", { class: "hit-head" },
      badge(hit.kind),
      h("span", { class: "hit-ns" }, namespaceOf(meta)),
      state.query ? h("span", { class: "score", title: "the ranking score of this mode" }, hit.score.toFixed(3)) : null),
    title ? h("span", { class: "hit-title" }, snippet(title, stems, 200)) : null,
    h("span", { class: "hit-text" }, snippet(text, stems)),
    h("span", { class: "hit-foot" },
      (meta.tags ?? []).map((tag) => h("span", { class: "tag" }, tag)),
      meta.observed_at ? h("span", { class: "when" }, instant(meta.observed_at)) : null));
  item.append(check, open);
  return item;
}
