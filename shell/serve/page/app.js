// The page of `treestore serve`: browse a store's tree, run queries, see rows stream in.
// Plain JavaScript modules, no build step, no framework; it fetches nothing but the service's
// own API (docs/serve.md). This module wires the page together and starts it.

import { $ } from "./dom.js";
import { TOKEN_KEY, tokenGiven } from "./api.js";
import { state } from "./state.js";
import { clearFieldError } from "./boxes.js";
import { chooseStore, loadStores } from "./stores.js";
import { loadChildren } from "./tree.js";
import { cancelQuery, readAddress, restoreFromAddress, runQuery } from "./query.js";
import { downloadWithToken, showError } from "./results.js";
import { acceptCompletion, hideCompletions, moveCompletion, scheduleCompletion } from "./completion.js";
import { drawOps, loadOps, showOpHelpAtCursor } from "./ops.js";

window.state = state; // as the page's one script had it: for the console and the page tests

/** The keys of the three boxes: Tab completes, the arrows and Enter pick in the list,
 * Escape closes it (or, closed, cancels the query). */
function onKey(event) {
  const input = event.currentTarget;
  const open = !$("completions").hidden && state.completion.items.length;
  if (event.key === "Tab" && !event.shiftKey) {
    if (open) {
      event.preventDefault();
      acceptCompletion(input, state.completion.items[state.completion.index]);
    } else if (input.value && (input.selectionStart ?? 0) > 0) {
      event.preventDefault();
      scheduleCompletion(input, true);
    }
  } else if (open && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
    event.preventDefault();
    moveCompletion(event.key === "ArrowDown" ? 1 : -1);
  } else if (open && event.key === "Enter" && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();
    acceptCompletion(input, state.completion.items[state.completion.index]);
  } else if (event.key === "Escape") {
    hideCompletions(); // also one on its way
    if (!open) cancelQuery();
  }
}

function wire() {
  $("query-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runQuery(true);
  });
  $("cancel").addEventListener("click", cancelQuery);
  $("store").addEventListener("change", (event) => chooseStore(event.target.value));
  $("tree-more").addEventListener("click", () => loadChildren(state.childrenNext));
  $("token-form").addEventListener("submit", tokenGiven);
  $("token-dialog").addEventListener("cancel", (event) => event.preventDefault());
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("forget-token").hidden = true;
  });
  $("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("ops-filter").addEventListener("input", drawOps);
  for (const id of ["download-csv", "download-json"]) $(id).addEventListener("click", downloadWithToken);
  for (const id of ["path", "rops", "ops"]) {
    const input = $(id);
    input.addEventListener("keydown", onKey);
    input.addEventListener("input", () => {
      clearFieldError(id);
      scheduleCompletion(input, false);
      if (id !== "path") showOpHelpAtCursor(input);
    });
    input.addEventListener("click", () => id !== "path" && showOpHelpAtCursor(input));
    input.addEventListener("blur", () => setTimeout(() => {
      if (document.activeElement !== input && state.completion.input === input) hideCompletions();
    }, 100));
  }
  window.addEventListener("hashchange", restoreFromAddress);
}

async function start() {
  wire();
  try {
    await loadStores();
  } catch (error) {
    showError(error);
    return;
  }
  const wanted = readAddress();
  const first = state.stores.some((s) => s.name === wanted.store) ? wanted.store : state.stores[0]?.name;
  loadOps();
  try {
    if (first) await chooseStore(first);
    await restoreFromAddress();
  } finally {
    document.body.dataset.ready = "true";
  }
}

document.addEventListener("DOMContentLoaded", start);
