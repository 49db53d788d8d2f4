// Wiring: one refresh per change of filter, the search form, the toolbar and the dialogs.

import { ask } from "./ask.js";
import { $, fill, h } from "./dom.js";
import { loadFacets } from "./facets.js";
import { forgetFiltered, forgetIds, wireForget } from "./forget.js";
import { openItem, wireItem } from "./item.js";
import { openKeyDialog, showKeyState } from "./key.js";
import { clearProblem, onKeyWanted, showProblem } from "./notice.js";
import { firstPage, loadResults, onTurn, selected, setMatching, wireResults } from "./results.js";
import { chips, constrained, onChange, state } from "./state.js";
import { forgetCounts, loadTimeline } from "./timeline.js";

let running = null;

/** A performance mark the first time the page gets there (python -m bench.ui reads them). */
function markOnce(name) {
  if (!performance.getEntriesByName(name, "mark").length) performance.mark(name);
}

/** Read what the filter admits again: the facets and the results, then the histogram. */
async function refresh({ facets = true } = {}) {
  running?.abort();
  running = new AbortController();
  const { signal } = running;
  document.body.dataset.state = "loading"; // "ready" once everything on the page is read again
  clearProblem();
  drawChips();
  drawToolbar();
  try {
    await Promise.all([
      facets ? loadFacets(signal).then(({ matching }) => { setMatching(matching); showSidebar(true); }) : null,
      loadResults(signal).then(() => markOnce("engram:results")),
    ]);
  } catch (error) {
    if (signal.aborted) return;
    if (facets) showSidebar(false, error);
    // Without a usable key there is nothing to list: the notice takes the results' place
    // (rather than pushing them down).
    $(".results-box").hidden = error.status === 401 || error.status === 403;
    showProblem(error);
    document.body.dataset.state = "problem";
    return;
  }
  $(".results-box").hidden = false;
  try {
    if (facets) await loadTimeline(signal);
  } catch (error) {
    if (signal.aborted) return;
    showProblem(error);
    document.body.dataset.state = "problem";
    return;
  }
  if (!signal.aborted) {
    document.body.dataset.state = "ready";
    markOnce("engram:ready");
  }
}

function showSidebar(ready, error = null) {
  $("#facets").hidden = !ready;
  const wait = $("#facets-wait");
  wait.hidden = ready;
  if (!ready) {
    wait.textContent = error?.status === 401 || error?.status === 403
      ? "Enter an API key to see what it reaches."
      : "The facets could not be read.";
  }
}

function drawChips() {
  const found = chips();
  const box = $("#chips");
  const focused = box.contains(document.activeElement);
  fill(box, found.length
    ? [found.map((chip) => h("span", { class: `chip chip-${chip.facet}` },
      h("span", { class: "chip-facet" }, chip.facet), h("span", { class: "chip-label" }, chip.label),
      h("button", { type: "button", class: "chip-remove", "aria-label": `Remove filter ${chip.facet} ${chip.label}`, onclick: chip.remove }, "✕"))),
    h("button", { type: "button", class: "link", onclick: () => clearAll() }, "Clear all")]
    : h("span", { class: "quiet" }, "No filters: everything this key reaches. Pick a namespace, kind, tag, source or time."));
  if (focused) ($("#chips .chip-remove") ?? $("#q")).focus(); // a removed chip took the focus with it
  const toggle = $("#filters-toggle");
  toggle.textContent = found.length ? `Filters (${found.length})` : "Filters";
}

function clearAll() {
  Object.assign(state, { namespace: null, kinds: [], tags: [], sources: [], window: null });
  changed();
}

function drawToolbar() {
  const n = selected.size;
  $("#selection-count").textContent = n ? `${n} selected` : "Select items to forget them";
  $("#forget-selected").disabled = n === 0;
  $("#clear-selection").disabled = n === 0;
  $("#forget-filtered").disabled = !constrained();
}

function changed() {
  $("#answer").hidden = true; // it answered under the filter before
  selected.clear();
  firstPage();
  refresh();
}

function open(id) {
  openItem(id).catch(showProblem);
}

function search(event) {
  event.preventDefault();
  state.query = $("#q").value.trim();
  firstPage();
  refresh({ facets: false });
}

function setup() {
  wireResults(open, drawToolbar);
  wireItem((id) => forgetIds([id]));
  wireForget(() => { selected.clear(); refresh(); });
  onTurn(() => refresh({ facets: false }));
  onChange(changed);
  // Another key sees other counts: none of the last key's is kept.
  const wantKey = () => openKeyDialog(() => { forgetCounts(); selected.clear(); firstPage(); refresh(); });
  onKeyWanted(wantKey);
  $("#key-button").addEventListener("click", wantKey);
  $("#search").addEventListener("submit", search);
  for (const radio of document.querySelectorAll("input[name=mode]")) {
    radio.addEventListener("change", () => {
      state.mode = radio.value;
      if (state.query) { firstPage(); refresh({ facets: false }); }
    });
  }
  $("#ask").addEventListener("click", () => {
    const question = $("#q").value.trim();
    if (!question) { $("#q").focus(); return; }
    clearProblem();
    ask(question, open).catch(showProblem);
  });
  $("#forget-selected").addEventListener("click", () => forgetIds([...selected.keys()]));
  $("#clear-selection").addEventListener("click", () => {
    selected.clear();
    for (const box of document.querySelectorAll(".hit-check")) box.checked = false;
    for (const row of document.querySelectorAll(".hit.is-selected")) row.classList.remove("is-selected");
    drawToolbar();
  });
  $("#forget-filtered").addEventListener("click", () => forgetFiltered());
  $("#filters-toggle").addEventListener("click", (event) => {
    const open = event.currentTarget.getAttribute("aria-expanded") !== "true";
    event.currentTarget.setAttribute("aria-expanded", String(open));
    $("#sidebar").classList.toggle("open", open);
  });
  // "/" puts the cursor in the search box, as on most sites with one.
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest?.("input, textarea, select, dialog");
    if (event.key === "/" && !typing) { event.preventDefault(); $("#q").focus(); }
  });
  showKeyState();
  refresh();
}

setup();
