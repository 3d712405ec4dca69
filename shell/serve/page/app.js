// The page of `treestore serve`: browse a store's tree, run queries, see rows stream in.
// Plain JavaScript, no build step, no framework; it fetches nothing but the service's own
// API (docs/serve.md). The address's hash says the query, so a link reproduces it.
"use strict";

const TOKEN_KEY = "treestore.token";
const TABLE_CAP = 5000; // rows drawn in the table; the count and the downloads have them all
const CHART_CAP = 40; // bars drawn

const $ = (id) => document.getElementById(id);

const state = {
  stores: [],
  store: "",
  node: [], // the browsed node's names, from the top
  childrenNext: null,
  childrenPage: 50, // children per call of the tree browser
  query: null, // {controller, started, rows, columns, ...} of the running or last query
  ops: [],
  completion: { items: [], index: -1, input: null, seq: 0, timer: 0 },
};

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

// ---- calls to the service ----

class HttpError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

function apiUrl(route, params) {
  const url = new URL(route, document.baseURI);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, value);
  }
  return url;
}

/** The answer of a call as JSON; a 401 asks for the token and tries once more. */
async function getJson(route, params, signal) {
  for (;;) {
    const response = await fetch(apiUrl(route, params), { headers: authHeaders(), signal });
    if (response.status === 401) {
      await askToken(sessionStorage.getItem(TOKEN_KEY) !== null);
      continue;
    }
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) throw new HttpError(response.status, body);
    return body;
  }
}

// ---- the token ----

let tokenWaiters = [];

/** Wait until the user gives a token (the form shows once however many calls wait). */
function askToken(refused) {
  sessionStorage.removeItem(TOKEN_KEY);
  const dialog = $("token-dialog");
  $("token-error").hidden = !refused;
  if (!dialog.open) {
    dialog.showModal();
    $("token-input").value = "";
    $("token-input").focus();
  }
  return new Promise((resolve) => tokenWaiters.push(resolve));
}

function tokenGiven(event) {
  event.preventDefault();
  const token = $("token-input").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token-dialog").close();
  $("forget-token").hidden = false;
  const waiters = tokenWaiters;
  tokenWaiters = [];
  for (const resolve of waiters) resolve();
}

// ---- small DOM helpers ----

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

function formatNumber(value) {
  return typeof value === "number" ? value.toLocaleString("en-US") : String(value);
}

function formatSeconds(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

// ---- stores ----

async function loadStores() {
  const body = await getJson("stores");
  state.stores = body.stores || [];
  const select = $("store");
  select.replaceChildren(
    ...state.stores.map((s) => el("option", { value: s.name, text: s.name }))
  );
  if (!state.stores.length) {
    select.append(el("option", { value: "", text: "no stores" }));
  }
}

function storeMeta(name) {
  const store = state.stores.find((s) => s.name === name);
  if (!store) return "";
  const parts = [];
  if (store.version !== undefined && store.version !== null) parts.push(`version ${store.version}`);
  if (store.shards !== undefined) parts.push(`${store.shards} shards`);
  if (store.location) parts.push(store.location);
  return parts.join(" · ");
}

async function chooseStore(name) {
  if (!name) return;
  state.store = name;
  $("store").value = name;
  $("store-meta").textContent = storeMeta(name);
  await Promise.all([browse([]), loadInfo()]);
}

// ---- the tree browser ----

async function browse(names) {
  state.node = names;
  state.childrenNext = null;
  drawCrumbs();
  $("children").tBodies[0].replaceChildren();
  await loadChildren(null);
}

async function loadChildren(after) {
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

// ---- the store's info ----

async function loadInfo() {
  const box = $("info");
  const store = state.store;
  let body;
  try {
    body = await getJson(`stores/${encodeURIComponent(store)}`);
  } catch (error) {
    box.replaceChildren(el("p", { class: "inline-error" }, error.message));
    return;
  }
  if (store !== state.store) return;
  box.replaceChildren(...renderInfo(body));
}

const INFO_SHOWN = new Set(["name", "newest", "location", "version", "kept", "shards", "nodes", "bytes", "inputs", "follower", "loads", "unpublished", "unreadable"]);

/** What `treestore info` says, laid out: the version and sizes, the follower and its lag,
 * the recent loads; the rest (each shard's tree, the dedup index...) folded below. */
function renderInfo(info) {
  const parts = [];
  const facts = el("dl", { class: "info-dl" });
  const fact = (label, value, cls) => {
    if (value === undefined || value === null || value === "") return;
    facts.append(el("dt", {}, label), el("dd", { class: cls || "" }, value));
  };
  const kept = Array.isArray(info.kept) && info.kept.length ? ` (kept: ${info.kept.join(", ")})` : "";
  fact("version", info.version !== undefined ? `${info.version}${kept}` : undefined, "code");
  if (typeof info.newest === "number" && info.newest > info.version) {
    fact("newest", `${info.newest} (the next query reads it)`, "code");
  }
  fact("shards", info.shards !== undefined ? formatNumber(info.shards) : undefined, "num-inline");
  fact("nodes", info.nodes !== undefined ? formatNumber(info.nodes) : undefined, "num-inline");
  fact("bytes", info.bytes !== undefined ? formatBytes(info.bytes) : undefined, "num-inline");
  fact("input files", info.inputs !== undefined ? formatNumber(info.inputs) : undefined, "num-inline");
  fact("location", info.location, "code");
  if (info.follower && typeof info.follower === "object") fact("follower", followerText(info.follower));
  parts.push(facts);
  for (const key of ["unpublished", "unreadable"]) {
    if (Array.isArray(info[key]) && info[key].length) {
      parts.push(el("p", { class: "inline-error" }, `${key}: ${info[key].join(", ")}`));
    }
  }
  if (Array.isArray(info.loads) && info.loads.length) {
    parts.push(el("h3", {}, "recent loads"));
    parts.push(
      el("ul", { class: "loads" }, ...info.loads.slice().reverse().map((load) =>
        el(
          "li",
          {},
          el("span", { class: "code" }, `v${load.version ?? "?"}`),
          el("span", { class: "when", title: String(load.started ?? "") }, String(load.started ?? "").replace("T", " ").replace("Z", "")),
          el("span", { class: "num-inline" }, load.seconds !== undefined ? `${load.seconds} s` : "")
        )
      ))
    );
  }
  const rest = Object.keys(info).filter((key) => !INFO_SHOWN.has(key) && info[key] !== null && info[key] !== undefined);
  for (const key of rest) {
    const value = info[key];
    const label = key.replace(/_/g, " ");
    if (value && typeof value === "object") {
      parts.push(el("details", { class: "more" }, el("summary", {}, `${label} · ${summarize(value)}`), el("div", { class: "scroll" }, renderValue(value, 1))));
    } else {
      facts.append(el("dt", {}, label), el("dd", {}, renderValue(value, 1)));
    }
  }
  return parts;
}

function followerText(follower) {
  if (!follower.running && !follower.last) return "none";
  const bits = [follower.running ? "running" : "not running"];
  if (follower.running && follower.pid) bits.push(`pid ${follower.pid}${follower.host ? ` on ${follower.host}` : ""}`);
  const last = follower.last;
  if (last) {
    bits.push(`last batch ${last.batch} → v${last.version}`);
    if (last.lag_seconds !== undefined && last.lag_seconds !== null) bits.push(`lag ${last.lag_seconds} s`);
  }
  return bits.join(" · ");
}

function formatBytes(bytes) {
  if (typeof bytes !== "number") return String(bytes);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit ? `${value.toFixed(1)} ${units[unit]}` : `${bytes} B`;
}

const INFO_FIRST = ["name", "location", "version", "versions", "kept", "shards", "nodes", "bytes", "follower"];

/** Any JSON as nested definition lists and small tables (what `treestore info` says). */
function renderValue(value, depth) {
  if (value === null || value === undefined) return el("span", { class: "null" }, "—");
  if (Array.isArray(value)) {
    if (!value.length) return el("span", { class: "quiet" }, "none");
    if (value.every((v) => v === null || typeof v !== "object")) {
      return el("span", { class: "code" }, value.map((v) => formatNumber(v)).join(", "));
    }
    if (value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
      const keys = [...new Set(value.flatMap((v) => Object.keys(v)))];
      const flat = keys.every((k) => value.every((v) => v[k] === null || typeof v[k] !== "object"));
      if (flat && keys.length <= 6) {
        return el(
          "table",
          { class: "mini" },
          el("thead", {}, el("tr", {}, ...keys.map((k) => el("th", { class: numericKey(value, k) ? "num" : "" }, k)))),
          el("tbody", {}, ...value.map((v) =>
            el("tr", {}, ...keys.map((k) => el("td", { class: typeof v[k] === "number" ? "num" : "code" }, v[k] === undefined || v[k] === null ? "" : formatNumber(v[k]))))
          ))
        );
      }
    }
    return el("ol", { class: "info-list" }, ...value.map((v) => el("li", {}, renderValue(v, depth + 1))));
  }
  if (typeof value === "object") {
    const keys = Object.keys(value).sort((a, b) => rank(a) - rank(b));
    const list = el("dl", { class: depth ? "info-dl nested" : "info-dl" });
    for (const key of keys) {
      const inner = value[key];
      const complex = inner && typeof inner === "object" && Object.keys(inner).length > 0;
      if (complex && depth >= 1) {
        list.append(el("dt", {}, key), el("dd", {}, el("details", {}, el("summary", {}, summarize(inner)), renderValue(inner, depth + 1))));
      } else {
        list.append(el("dt", { class: key === "follower" || key === "lag" ? "strong" : "" }, key), el("dd", {}, renderValue(inner, depth + 1)));
      }
    }
    return list;
  }
  return el("span", { class: typeof value === "number" ? "num-inline" : "code" }, formatNumber(value));
}

function rank(key) {
  const at = INFO_FIRST.indexOf(key);
  return at < 0 ? INFO_FIRST.length : at;
}

function numericKey(values, key) {
  return values.every((v) => v[key] === null || v[key] === undefined || typeof v[key] === "number");
}

function summarize(value) {
  if (Array.isArray(value)) return `${value.length} item${value.length === 1 ? "" : "s"}`;
  const keys = Object.keys(value);
  return keys.slice(0, 3).join(", ") + (keys.length > 3 ? ", …" : "");
}

// ---- the query ----

function fields() {
  return {
    store: state.store,
    path: $("path").value.trim(),
    rops: $("rops").value.trim(),
    ops: $("ops").value.trim(),
  };
}

function setField(name, value) {
  $(name).value = value;
  clearFieldError(name);
}

/** The fields of /query (rops and ops only when given). */
function queryParams(format) {
  const f = fields();
  return { store: f.store, path: f.path, rops: f.rops || undefined, ops: f.ops || undefined, format };
}

/** The address of this query, as a link: its hash says the store, path, rops and ops. */
function writeAddress() {
  const f = fields();
  const hash = new URLSearchParams();
  for (const key of ["store", "path", "rops", "ops"]) if (f[key]) hash.set(key, f[key]);
  const text = `#${hash.toString()}`;
  if (location.hash !== text) history.pushState(null, "", text);
}

function readAddress() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const search = new URLSearchParams(location.search);
  const get = (key) => hash.get(key) ?? search.get(key) ?? "";
  return { store: get("store"), path: get("path"), rops: get("rops"), ops: get("ops") };
}

async function restoreFromAddress() {
  const wanted = readAddress();
  if (wanted.store && wanted.store !== state.store && state.stores.some((s) => s.name === wanted.store)) {
    await chooseStore(wanted.store);
  }
  if (!wanted.path) return;
  setField("path", wanted.path);
  setField("rops", wanted.rops);
  setField("ops", wanted.ops);
  runQuery(false);
}

function setStatus(name, text) {
  $("status").dataset.state = name;
  $("state").textContent = text;
}

function clearResults() {
  $("results-hint").hidden = true;
  $("results-wrap").hidden = true;
  $("results").tHead.replaceChildren();
  $("results").tBodies[0].replaceChildren();
  $("results-note").hidden = true;
  $("error").hidden = true;
  $("chart").hidden = true;
  $("chart").replaceChildren();
  for (const id of ["row-count", "elapsed", "version", "where"]) $(id).textContent = "";
  for (const name of ["path", "rops", "ops"]) clearFieldError(name);
}

function clearFieldError(name) {
  const box = $(`${name}-error`);
  box.hidden = true;
  box.replaceChildren();
  $(name).classList.remove("invalid");
}

async function runQuery(remember = true) {
  hideCompletions();
  const f = fields();
  if (!f.store) return;
  if (!f.path) {
    $("path").focus();
    return;
  }
  if (state.query && state.query.controller) state.query.controller.abort();
  if (remember) writeAddress();
  clearResults();
  const query = {
    controller: new AbortController(),
    started: performance.now(),
    columns: null,
    count: 0,
    kept: [],
    pending: [],
    frame: 0,
    timer: 0,
    aligned: false,
    params: queryParams("jsonl"),
  };
  state.query = query;
  setDownloads(null);
  setStatus("running", "running");
  $("run").disabled = false;
  $("cancel").disabled = false;
  query.timer = setInterval(() => showElapsed(query), 100);
  try {
    await streamRows(query);
  } catch (error) {
    if (state.query !== query) return;
    if (error.name === "AbortError") {
      flushRows(query);
      setStatus("cancelled", "cancelled");
    } else {
      flushRows(query);
      showError(error);
    }
  } finally {
    clearInterval(query.timer);
    if (state.query === query) {
      showElapsed(query);
      query.controller = null;
      $("cancel").disabled = true;
    }
  }
}

function showElapsed(query) {
  $("elapsed").textContent = formatSeconds(performance.now() - query.started);
}

/** Read the jsonl answer as it arrives: a header line, one array per row, a last line. */
async function streamRows(query) {
  let response;
  for (;;) {
    response = await fetch(apiUrl("query", { ...query.params, format: "jsonl" }), {
      headers: authHeaders(),
      signal: query.controller.signal,
    });
    if (response.status !== 401) break;
    await askToken(sessionStorage.getItem(TOKEN_KEY) !== null);
  }
  if (!response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    throw new HttpError(response.status, body);
  }
  const version = response.headers.get("X-Treestore-Version");
  if (version) $("version").textContent = `version ${version}`;
  const where = response.headers.get("X-Treestore-Where");
  if (where) $("where").textContent = `on the ${where}`;
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let ending = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      if (line.trim()) ending = takeLine(query, JSON.parse(line)) || ending;
    }
  }
  buffer += decoder.decode();
  if (buffer.trim()) ending = takeLine(query, JSON.parse(buffer)) || ending;
  flushRows(query);
  if (ending && ending.error) {
    throw new HttpError(200, typeof ending.error === "object" ? ending.error : { error: String(ending.error) });
  }
  if (!ending || !ending.complete) throw new HttpError(200, { error: "the answer ended before its last row" });
  setStatus("done", "done");
  setDownloads(query.params);
  drawChart(query);
}

/** One line of the answer: the header, a row, or the ending (returned). */
function takeLine(query, item) {
  if (Array.isArray(item)) {
    query.count += 1;
    if (query.kept.length < TABLE_CAP) {
      query.kept.push(item);
      query.pending.push(item);
    }
    if (!query.frame) query.frame = requestAnimationFrame(() => flushRows(query));
    return null;
  }
  if (item.columns && !query.columns) {
    query.columns = item.columns;
    if (item.version !== undefined && !$("version").textContent) $("version").textContent = `version ${item.version}`;
    drawHeader(query.columns);
    return null;
  }
  return item;
}

function drawHeader(columns) {
  $("results-wrap").hidden = false;
  $("results").tHead.replaceChildren(
    el("tr", {}, el("th", { class: "rownum" }, "#"), ...columns.map((c) => el("th", { "data-column": c }, c)))
  );
}

/** Draw the rows that arrived since the last frame. */
function flushRows(query) {
  if (query.frame) cancelAnimationFrame(query.frame);
  query.frame = 0;
  if (state.query !== query) return;
  const tbody = $("results").tBodies[0];
  const fragment = document.createDocumentFragment();
  let number = tbody.rows.length;
  for (const row of query.pending) {
    number += 1;
    const tr = el("tr", {}, el("td", { class: "rownum" }, String(number)));
    for (const value of row) {
      if (value === null || value === undefined) tr.append(el("td", { class: "null" }, "null"));
      else if (typeof value === "number") tr.append(el("td", { class: "num" }, String(value)));
      else tr.append(el("td", {}, typeof value === "object" ? JSON.stringify(value) : value));
    }
    fragment.append(tr);
  }
  if (!query.aligned && query.kept.length) {
    query.aligned = true; // numbers right-aligned, their headers too
    const first = query.kept[0];
    [...$("results").tHead.querySelectorAll("th[data-column]")].forEach((th, index) => {
      if (typeof first[index] === "number") th.classList.add("num");
    });
  }
  query.pending = [];
  tbody.append(fragment);
  const count = query.count;
  if (!query.columns) return;
  $("row-count").textContent = `${count.toLocaleString("en-US")} row${count === 1 ? "" : "s"}`;
  if (count > query.kept.length) {
    $("results-note").textContent = `showing the first ${query.kept.length.toLocaleString("en-US")} rows: download the result for all of them`;
    $("results-note").hidden = false;
  }
}

function cancelQuery() {
  if (state.query && state.query.controller) state.query.controller.abort();
}

/** The download links of a query's result (`params`: its fields), or none (null). */
function setDownloads(params) {
  for (const format of ["csv", "json"]) {
    const link = $(`download-${format}`);
    link.hidden = !params;
    link.href = params ? apiUrl("query", { ...params, format }).toString() : "#";
  }
}

/** With a token, a plain link cannot carry it: fetch the file and hand it over. */
async function downloadWithToken(event) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return;
  event.preventDefault();
  const link = event.currentTarget;
  const response = await fetch(link.href, { headers: authHeaders() });
  if (!response.ok) {
    showError(new HttpError(response.status, await response.json().catch(() => null)));
    return;
  }
  const url = URL.createObjectURL(await response.blob());
  const save = el("a", { href: url, download: link.getAttribute("download") });
  document.body.append(save);
  save.click();
  save.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** An error: under its field with the caret when the server says where, else in the box. */
function showError(error) {
  setStatus("failed", "failed");
  const body = error.body || {};
  const field = body.field;
  if (field && ["path", "rops", "ops"].includes(field) && body.caret !== undefined) {
    const box = $(`${field}-error`);
    const where = body.line !== undefined ? ` line ${body.line}, column ${body.column}` : "";
    box.replaceChildren(
      el("pre", { class: "caret code" }, body.caret),
      el("p", { class: "message" }, firstLine(body.error || error.message)),
      body.expected && body.expected.length
        ? el("p", { class: "expected" }, "expected: ", el("span", { class: "code" }, body.expected.join("  ")))
        : null
    );
    box.dataset.where = where.trim();
    box.hidden = false;
    $(field).classList.add("invalid");
    if (body.column && body.line === 1) {
      const at = Math.min(body.column - 1, $(field).value.length);
      $(field).focus();
      $(field).setSelectionRange(at, at);
    }
    return;
  }
  const status = error.status && error.status !== 200 ? `HTTP ${error.status}: ` : "";
  $("error").replaceChildren(el("pre", { class: "code" }, status + (body.error || error.message)));
  $("error").hidden = false;
}

function firstLine(text) {
  return String(text).split("\n")[0];
}

// ---- the bar chart: one text column and one number column ----

function chartColumns(query) {
  const columns = query.columns || [];
  const rows = query.kept;
  if (columns.length !== 2 || rows.length < 1) return null;
  const kind = (index) => {
    if (rows.every((r) => typeof r[index] === "number")) return "number";
    if (rows.every((r) => typeof r[index] === "string")) return "text";
    return "other";
  };
  const kinds = [kind(0), kind(1)];
  if (kinds[0] === "text" && kinds[1] === "number") return { label: 0, value: 1 };
  if (kinds[0] === "number" && kinds[1] === "text") return { label: 1, value: 0 };
  return null;
}

function drawChart(query) {
  const pick = chartColumns(query);
  const box = $("chart");
  if (!pick) {
    box.hidden = true;
    return;
  }
  const rows = query.kept.slice(0, CHART_CAP);
  const max = Math.max(0, ...rows.map((r) => r[pick.value]));
  const min = Math.min(0, ...rows.map((r) => r[pick.value]));
  const NS = "http://www.w3.org/2000/svg";
  const bar = 20;
  const gap = 6;
  const labelWidth = 160;
  const width = 640;
  const valueWidth = 70;
  const plot = width - labelWidth - valueWidth;
  const height = rows.length * (bar + gap) + gap;
  const span = max - min || 1;
  const x = (v) => labelWidth + ((v - min) / span) * plot;
  const svg = document.createElementNS(NS, "svg");
  const attrs = (node, values) => {
    for (const [k, v] of Object.entries(values)) node.setAttribute(k, v);
    return node;
  };
  attrs(svg, { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", class: "bars" });
  svg.setAttribute("aria-label", `${query.columns[pick.value]} by ${query.columns[pick.label]}`);
  rows.forEach((row, index) => {
    const y = gap + index * (bar + gap);
    const value = row[pick.value];
    const label = String(row[pick.label]);
    const text = attrs(document.createElementNS(NS, "text"), { x: labelWidth - 8, y: y + bar / 2, class: "label" });
    text.textContent = label.length > 22 ? `${label.slice(0, 21)}…` : label;
    const title = document.createElementNS(NS, "title");
    title.textContent = `${label}: ${value}`;
    const rect = attrs(document.createElementNS(NS, "rect"), {
      x: Math.min(x(0), x(value)),
      y,
      width: Math.max(1, Math.abs(x(value) - x(0))),
      height: bar,
      rx: 2,
      class: "bar",
    });
    rect.append(title);
    const amount = attrs(document.createElementNS(NS, "text"), { x: Math.max(x(0), x(value)) + 6, y: y + bar / 2, class: "value" });
    amount.textContent = formatNumber(value);
    svg.append(text, rect, amount);
  });
  const caption = el(
    "p",
    { class: "chart-caption" },
    el("span", { class: "code" }, query.columns[pick.value]),
    " by ",
    el("span", { class: "code" }, query.columns[pick.label]),
    query.kept.length > CHART_CAP ? ` (the first ${CHART_CAP} of ${query.count.toLocaleString("en-US")} rows)` : ""
  );
  box.replaceChildren(caption, svg);
  box.hidden = false;
}

// ---- completion from /complete ----

/** The shell line the three boxes make (PATH | rops R | ops O), where the cursor is in it
 * and where the box's text starts in it (UTF-16 units, as the boxes count). */
function completionLine(input) {
  const path = $("path").value;
  const cursor = input.selectionStart ?? input.value.length;
  if (input.id === "path") return { text: path, cursor, offset: 0 };
  const rops = $("rops").value;
  const prefix =
    input.id === "rops" ? `${path} | rops ` : rops ? `${path} | rops ${rops} | ops ` : `${path} | ops `;
  return { text: prefix + input.value, cursor: prefix.length + cursor, offset: prefix.length };
}

/** Code points (the service's count) in the first `units` UTF-16 units of `text`. */
function codePoints(text, units) {
  return Array.from(text.slice(0, units)).length;
}

/** UTF-16 units in the first `points` code points of `text`. */
function utf16Units(text, points) {
  return Array.from(text).slice(0, points).join("").length;
}

function scheduleCompletion(input, now) {
  clearTimeout(state.completion.timer);
  state.completion.timer = setTimeout(() => fetchCompletions(input, now), now ? 0 : 180);
}

async function fetchCompletions(input, fromTab) {
  if (!state.store) return;
  const seq = ++state.completion.seq;
  const { text, cursor } = completionLine(input);
  const before = text.slice(0, cursor);
  let body;
  try {
    body = await getJson("complete", { store: state.store, text: before, cursor: codePoints(before, cursor) });
  } catch (_) {
    return;
  }
  if (seq !== state.completion.seq || document.activeElement !== input) return;
  const items = body.completions || [];
  if (fromTab && items.length === 1) {
    acceptCompletion(input, items[0]);
    return;
  }
  showCompletions(input, items);
}

function showCompletions(input, items) {
  const list = $("completions");
  state.completion.items = items;
  state.completion.input = input;
  state.completion.index = items.length ? 0 : -1;
  if (!items.length) {
    hideCompletions();
    return;
  }
  list.replaceChildren(
    ...items.slice(0, 50).map((item, index) =>
      el(
        "li",
        {
          role: "option",
          class: index === 0 ? "active" : "",
          "data-text": item.text,
          onmousedown: (event) => {
            event.preventDefault();
            acceptCompletion(input, item);
          },
        },
        el("span", { class: "code" }, item.display || item.text),
        item.meta ? el("span", { class: "meta" }, item.meta) : null
      )
    )
  );
  const field = input.closest(".field");
  const form = $("query-form");
  const box = field.getBoundingClientRect();
  const base = form.getBoundingClientRect();
  list.style.left = `${box.left - base.left}px`;
  list.style.top = `${input.getBoundingClientRect().bottom - base.top + 2}px`;
  list.style.minWidth = `${Math.min(box.width, 420)}px`;
  list.hidden = false;
}

/** Close the list; a completion still on its way is dropped. */
function hideCompletions() {
  clearTimeout(state.completion.timer);
  $("completions").hidden = true;
  state.completion.items = [];
  state.completion.index = -1;
  state.completion.seq += 1;
}

/** Put a completion in: it replaces the line's text from its `start` (code points) to the
 * cursor. */
function acceptCompletion(input, item) {
  const { text, cursor, offset } = completionLine(input);
  const start = typeof item.start === "number" ? utf16Units(text, item.start) : cursor;
  const from = Math.max(0, Math.min(start, cursor) - offset);
  const at = cursor - offset;
  input.value = input.value.slice(0, from) + item.text + input.value.slice(at);
  const end = from + item.text.length;
  input.setSelectionRange(end, end);
  hideCompletions();
  clearFieldError(input.id);
  input.focus();
  if (input.id !== "path") showOpHelpAtCursor(input);
}

function moveCompletion(step) {
  const items = $("completions").children;
  if (!items.length) return;
  const index = (state.completion.index + step + items.length) % items.length;
  state.completion.index = index;
  for (let i = 0; i < items.length; i += 1) items[i].classList.toggle("active", i === index);
  items[index].scrollIntoView({ block: "nearest" });
}

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

// ---- the op catalogue ----

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

async function loadOps() {
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

function drawOps() {
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
function showOpHelpAtCursor(input) {
  const before = input.value.slice(0, input.selectionStart ?? input.value.length);
  const chunk = before.split(/(?<!\\);/).pop();
  const name = chunk.split("=")[0].trim();
  if (state.ops.some((op) => op.name === name)) showOpHelp(name);
}

// ---- start ----

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
