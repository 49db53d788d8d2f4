// What the page is looking at: the facet selections, the observed window, the query and its mode.
// Every change goes through update(), which tells the listeners once.

export const state = {
  namespace: null, // {path, exact}: exact is the namespace itself, else its subtree
  kinds: [],
  tags: [],
  sources: [],
  window: null, // {after, before, label}: observed_at in [after, before)
  query: "",
  mode: "hybrid",
};

const listeners = new Set();

export function onChange(listener) {
  listeners.add(listener);
}

export function update(change) {
  Object.assign(state, change);
  for (const listener of listeners) listener();
}

/** The request filter (contract §4), optionally without one facet's own constraint, so that
 * facet's counts show its other values too. */
export function filterOf(except = null) {
  const filter = {};
  if (state.namespace && except !== "namespace") {
    filter.reach = { at: state.namespace.path, inherit: false, descendants: !state.namespace.exact };
  }
  if (state.kinds.length && except !== "kind") filter.kinds = [...state.kinds];
  if (state.tags.length && except !== "tag") filter.tags_any = [...state.tags];
  if (state.sources.length && except !== "source") filter.sources = [...state.sources];
  if (state.window && except !== "observed") {
    filter.observed_after = state.window.after;
    filter.observed_before = state.window.before;
  }
  return filter;
}

export const constrained = () => Object.keys(filterOf()).length > 0;

const without = (list, value) => list.filter((v) => v !== value);

/** The active constraints as removable chips. */
export function chips() {
  const found = [];
  if (state.namespace) {
    const { path, exact } = state.namespace;
    found.push({ facet: "namespace", label: exact ? `${path} only` : path, remove: () => update({ namespace: null }) });
  }
  for (const kind of state.kinds) found.push({ facet: "kind", label: kind, remove: () => update({ kinds: without(state.kinds, kind) }) });
  for (const tag of state.tags) found.push({ facet: "tag", label: tag, remove: () => update({ tags: without(state.tags, tag) }) });
  for (const source of state.sources) found.push({ facet: "source", label: source, remove: () => update({ sources: without(state.sources, source) }) });
  if (state.window) found.push({ facet: "observed", label: state.window.label, remove: () => update({ window: null }) });
  return found;
}

export function toggle(listName, value) {
  const list = state[listName];
  update({ [listName]: list.includes(value) ? without(list, value) : [...list, value] });
}
