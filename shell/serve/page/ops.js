// The op catalogue: the list of ops with a filter, and an op's help (also for the op under
// the cursor in the rops and ops boxes).

import { $, el, firstLine } from "./dom.js";
import { getJson } from "./api.js";
import { state } from "./state.js";

function opEntries(body) {
  const raw = body && (body.ops ?? body);
  if (Array.isArray(raw)) {
    return raw.map((op) => (typeof op === "string" ? { name: op, summary: "" } : { name: op.name, summary: op.summary || op.help || op.doc || "" }));
  }
  if (raw && typeof raw === "object") {
    return Object.entries(raw).map(([name, summary]) => ({ name, summary: typeof summary === "string" ? summary : summary?.summary || "" }));
  }
  return [];
}

export async function loadOps() {
  let body;
  try {
    body = await getJson("ops");
  } catch (error) {
    $("ops-list").replaceChildren(el("li", { class: "inline-error" }, error.message));
    return;
  }
  state.ops = opEntries(body).sort((a, b) => a.name.localeCompare(b.name));
  drawOps();
}

export function drawOps() {
  const filter = $("ops-filter").value.trim().toLowerCase();
  const shown = state.ops.filter((op) => !filter || op.name.includes(filter) || op.summary.toLowerCase().includes(filter));
  $("ops-list").replaceChildren(
    ...shown.map((op) =>
      el(
        "li",
        { "data-op": op.name, tabindex: "0", onclick: () => showOpHelp(op.name), onkeydown: (e) => e.key === "Enter" && showOpHelp(op.name) },
        el("span", { class: "op-name code" }, op.name),
        el("span", { class: "op-summary", title: firstLine(op.summary) }, opMeaning(op.summary))
      )
    )
  );
}

/** What an op does, from its summary "SYNTAX : what it does". */
function opMeaning(summary) {
  const line = firstLine(summary);
  const at = line.indexOf(" : ");
  return at < 0 ? line : line.slice(at + 3);
}

let helpShown = "";

async function showOpHelp(name) {
  if (!name || name === helpShown) return;
  helpShown = name;
  let body;
  try {
    body = await getJson(`ops/${encodeURIComponent(name)}`);
  } catch (_) {
    helpShown = "";
    return;
  }
  if (helpShown !== name) return;
  const text = typeof body === "string" ? body : body.help || body.doc || body.text || body.summary || JSON.stringify(body, null, 2);
  const box = $("op-help");
  box.replaceChildren(
    el("div", { class: "op-help-head" }, el("span", { class: "code" }, name), el("button", { type: "button", class: "link-button", onclick: closeOpHelp }, "close")),
    el("pre", { class: "code" }, text)
  );
  box.hidden = false;
  for (const item of $("ops-list").children) item.classList.toggle("active", item.dataset.op === name);
}

function closeOpHelp() {
  helpShown = "";
  $("op-help").hidden = true;
  for (const item of $("ops-list").children) item.classList.remove("active");
}

/** The op under the cursor in a rops/ops box: its help beside the box. */
export function showOpHelpAtCursor(input) {
  const before = input.value.slice(0, input.selectionStart ?? input.value.length);
  const chunk = before.split(/(?<!\\);/).pop();
  const name = chunk.split("=")[0].trim();
  if (state.ops.some((op) => op.name === name)) showOpHelp(name);
}
