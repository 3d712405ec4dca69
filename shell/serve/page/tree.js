// The tree browser: a node's children a page at a time, the breadcrumb, and a click that
// puts the node's path in the path box.

import { $, el, formatNumber } from "./dom.js";
import { getJson } from "./api.js";
import { state } from "./state.js";
import { setField } from "./boxes.js";

// ---- names as the path language writes them (query/syntax/path.lark, quote_name) ----

const BARE_NAME = /^[^/:,+*"()[\]|!@%$~;{}\s-][^/:,"()[\]|;{}$\s]*$/;
const PROPERTY_WORDS = new Set(["hits", "nodes", "count"]);

/** A node name as a path writes it: bare when it can be, else a JSON string. */
function quoteName(name) {
  if (BARE_NAME.test(name) && !PROPERTY_WORDS.has(name) && !name.startsWith("..")) {
    return name;
  }
  return JSON.stringify(name);
}

/** The path text of a node given by its names. */
function pathOf(names) {
  return names.map(quoteName).join("/");
}

export async function browse(names) {
  state.node = names;
  state.childrenNext = null;
  drawCrumbs();
  $("children").tBodies[0].replaceChildren();
  await loadChildren(null);
}

export async function loadChildren(after) {
  const store = state.store;
  const names = state.node;
  $("tree-error").hidden = true;
  $("tree-more").disabled = true;
  let body;
  try {
    body = await getJson(`stores/${encodeURIComponent(store)}/children`, {
      path: names.map(encodeURIComponent).join("/"),
      after: after ?? undefined,
      limit: state.childrenPage,
    });
  } catch (error) {
    $("tree-error").textContent = error.message;
    $("tree-error").hidden = false;
    return;
  } finally {
    $("tree-more").disabled = false;
  }
  if (store !== state.store || names !== state.node) return; // the user moved on meanwhile
  const tbody = $("children").tBodies[0];
  for (const child of body.children || []) {
    const leaf = !child.nodes;
    const row = el(
      "tr",
      { class: leaf ? "child leaf" : "child", "data-name": child.name, tabindex: "0" },
      el("td", { class: "name code", title: child.name }, child.name),
      el("td", { class: "num" }, formatNumber(child.hits ?? "")),
      el("td", { class: "num" }, formatNumber(child.nodes ?? ""))
    );
    const open = () => pickNode(child, row);
    row.addEventListener("click", open);
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter") open();
    });
    tbody.append(row);
  }
  state.childrenNext = body.next ?? null;
  $("tree-more").hidden = state.childrenNext === null;
  $("tree-empty").hidden = tbody.rows.length > 0;
}

/** A click on a node: its path goes into the query box; a node with children opens. */
function pickNode(child, row) {
  const names = [...state.node, child.name];
  setField("path", pathOf(names));
  if (child.nodes) {
    browse(names);
  } else {
    for (const other of $("children").tBodies[0].rows) other.classList.remove("picked");
    row.classList.add("picked");
  }
}

function drawCrumbs() {
  const crumbs = $("crumbs");
  const items = [el("button", { type: "button", class: "crumb", "data-depth": "0", text: state.store || "top" })];
  state.node.forEach((name, index) => {
    items.push(el("span", { class: "sep", "aria-hidden": "true" }, "/"));
    items.push(el("button", { type: "button", class: "crumb code", "data-depth": String(index + 1), title: name }, name));
  });
  items[items.length - 1].classList.add("current");
  for (const item of items) {
    if (item.tagName === "BUTTON") {
      const depth = Number(item.dataset.depth);
      item.addEventListener("click", () => {
        const names = state.node.slice(0, depth);
        if (depth > 0) setField("path", pathOf(names));
        browse(names);
      });
    }
  }
  crumbs.replaceChildren(...items);
}
