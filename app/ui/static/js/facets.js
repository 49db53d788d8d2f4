// The sidebar: the namespace tree, kinds, tags and sources, each counted by explore under the
// current filter less that facet's own constraint (so picking a tag still shows the other tags).

import { explore } from "./api.js";
import { $, fill, h, keepFocus } from "./dom.js";
import { count, segment } from "./format.js";
import { showProblem } from "./notice.js";
import { filterOf, state, toggle, update } from "./state.js";

const NAMESPACE_LIMIT = 500;
const expanded = new Set();
let tree = null;
let complete = true; // false when explore cut the namespace list: subtrees then load as they open
let tagLimit = 20;
let pages = null;

function node(path, name) {
  return { path, name, own: 0, total: 0, children: new Map(), loaded: false };
}

function place(root, path, n) {
  if (path === "root") { root.own += n; return; }
  let at = root;
  const parts = path.split("/");
  parts.forEach((part, i) => {
    if (!at.children.has(part)) at.children.set(part, node(parts.slice(0, i + 1).join("/"), part));
    at = at.children.get(part);
  });
  at.own += n;
}

function sum(n) {
  n.total = n.own;
  for (const child of n.children.values()) n.total += sum(child);
  return n.total;
}

function build(page) {
  const root = node("root", "All namespaces");
  for (const bucket of page.buckets) place(root, bucket.value, bucket.count);
  sum(root);
  root.total = page.total;
  return root;
}

function markLoaded(n) {
  n.loaded = true;
  for (const child of n.children.values()) markLoaded(child);
}

/** All four facets in parallel, drawn at once (so nothing below them moves twice). */
export async function loadFacets(signal) {
  const [namespaces, kinds, tags, sources] = await Promise.all([
    explore("namespace", filterOf("namespace"), NAMESPACE_LIMIT, signal),
    explore("kind", filterOf("kind"), 10, signal),
    explore("tag", filterOf("tag"), tagLimit, signal),
    explore("source", filterOf("source"), 10, signal),
  ]);
  tree = build(namespaces);
  complete = namespaces.more_buckets === 0;
  if (state.namespace) {
    const parts = state.namespace.path.split("/");
    parts.forEach((_, i) => expanded.add(parts.slice(0, i).join("/") || "root"));
  }
  if (!complete) {
    // The open subtrees, read again in full, shallowest first (a deeper one may be inside it).
    const open = [...expanded].sort((x, y) => x.split("/").length - y.split("/").length);
    for (const path of open) {
      const n = nodeAt(path);
      if (n && n !== tree && !n.loaded) await loadSubtree(n, signal);
    }
  }
  pages = { kinds, tags, sources };
  render();
  const matching = state.kinds.length
    ? kinds.buckets.filter((b) => state.kinds.includes(b.value)).reduce((n, b) => n + b.count, 0)
    : kinds.total;
  return { matching };
}

function render() {
  keepFocus($("#facets"), () => {
    fill($("#facet-namespace"), h("ul", { class: "tree" }, rootItem()),
      complete ? null : h("p", { class: "quiet" }, "The largest namespaces are shown; open one to load all below it."));
    values("#facet-kind", pages.kinds, "kinds", "kind");
    values("#facet-tag", pages.tags, "tags", "tag", () => { tagLimit = 500; });
    values("#facet-source", pages.sources, "sources", "source");
  });
}

function selectButton(n, exact, label, amount) {
  const chosen = state.namespace?.path === n.path && Boolean(state.namespace?.exact) === exact;
  return h("button", {
    type: "button", class: "tree-select", "aria-pressed": String(chosen), "data-key": `ns:${exact ? "=" : ""}${n.path}`,
    onclick: () => update({ namespace: chosen ? null : { path: n.path, exact } }),
  }, h("span", { class: "tree-name" }, label), h("span", { class: "count" }, count(amount)));
}

function rootItem() {
  const all = h("button", {
    type: "button", class: "tree-select tree-all", "aria-pressed": String(!state.namespace), "data-key": "ns:all",
    onclick: () => update({ namespace: null }),
  }, h("span", { class: "tree-name" }, "All namespaces"), h("span", { class: "count" }, count(tree.total)));
  const children = sorted(tree);
  if (tree.own) children.push({ leaf: tree });
  return h("li", {}, h("div", { class: "tree-row" }, all),
    children.length ? h("ul", {}, children.map((c) => c.leaf ? leafItem(c.leaf, "root itself") : item(c))) : null);
}

const sorted = (n) => [...n.children.values()].sort((x, y) => y.total - x.total || (x.name < y.name ? -1 : 1));

/** The items exactly at `n`, beside its children, so a parent's own items can be picked alone. */
function leafItem(n, label) {
  return h("li", {}, h("div", { class: "tree-row" }, h("span", { class: "tree-spacer" }), selectButton(n, true, label, n.own)));
}

function item(n) {
  const mayHaveChildren = n.children.size > 0 || (!complete && !n.loaded);
  const open = expanded.has(n.path);
  const toggleButton = mayHaveChildren
    ? h("button", {
      type: "button", class: "tree-toggle", "aria-expanded": String(open), "data-key": `open:${n.path}`,
      "aria-label": `${open ? "Collapse" : "Expand"} ${n.path}`, onclick: () => openNode(n, !open),
    })
    : h("span", { class: "tree-spacer" });
  const row = h("div", { class: "tree-row" }, toggleButton, selectButton(n, false, segment(n.name), n.total));
  if (!open || !mayHaveChildren) return h("li", {}, row);
  const children = sorted(n).map(item);
  if (n.own && n.children.size) children.push(leafItem(n, `${n.name} itself`));
  return h("li", {}, row, h("ul", {}, children));
}

function nodeAt(path) {
  let at = tree;
  for (const part of path === "root" ? [] : path.split("/")) at = at?.children.get(part);
  return at;
}

/** When explore cut the tree: `n`'s subtree, asked for alone. */
async function loadSubtree(n, signal) {
  const filter = { ...filterOf("namespace"), reach: { at: n.path, inherit: false, descendants: true } };
  const page = await explore("namespace", filter, NAMESPACE_LIMIT, signal);
  n.children = new Map();
  n.own = 0;
  for (const bucket of page.buckets) place(tree, bucket.value, bucket.count);
  const total = tree.total; // exact, from explore: the sum of a cut tree is not
  sum(tree);
  tree.total = total;
  n.loaded = true;
  if (page.more_buckets === 0) markLoaded(n); // the whole subtree came: nothing below it is missing
}

async function openNode(n, open) {
  if (open) expanded.add(n.path); else expanded.delete(n.path);
  if (open && !complete && !n.loaded) {
    try {
      await loadSubtree(n);
    } catch (error) {
      showProblem(error);
    }
  }
  render();
}

function values(selector, page, listName, facet, more) {
  const chosen = state[listName];
  const buckets = [...page.buckets];
  for (const value of chosen) if (!buckets.some((b) => b.value === value)) buckets.push({ value, count: 0 });
  fill($(selector),
    buckets.length ? h("ul", { class: "values" }, buckets.map((b) => h("li", {}, h("button", {
      type: "button", class: "value", "aria-pressed": String(chosen.includes(b.value)), "data-key": `${facet}:${b.value}`,
      onclick: () => toggle(listName, b.value),
    }, h("span", { class: "value-name" }, b.value), h("span", { class: "count" }, count(b.count)))))) : h("p", { class: "quiet" }, `No ${facet} here.`),
    page.more_buckets && more ? h("button", {
      type: "button", class: "link", onclick: () => { more(); loadFacets().catch(showProblem); },
    }, `Show ${count(page.more_buckets)} more`) : null,
    page.missing && facet === "tag" ? h("p", { class: "quiet" }, `${count(page.missing)} without a tag`) : null);
}
