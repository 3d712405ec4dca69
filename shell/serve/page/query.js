// Running a query: its fields, its address (the hash says the query, so a link reproduces
// it), the jsonl answer read as it streams in, and cancelling it.

import { $ } from "./dom.js";
import { HttpError, TOKEN_KEY, apiUrl, askToken, authHeaders } from "./api.js";
import { state } from "./state.js";
import { fields, setField } from "./boxes.js";
import { chooseStore } from "./stores.js";
import { hideCompletions } from "./completion.js";
import {
  TABLE_CAP,
  clearResults,
  drawHeader,
  flushRows,
  setDownloads,
  setStatus,
  showElapsed,
  showError,
} from "./results.js";
import { drawChart } from "./chart.js";

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

export function readAddress() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const search = new URLSearchParams(location.search);
  const get = (key) => hash.get(key) ?? search.get(key) ?? "";
  return { store: get("store"), path: get("path"), rops: get("rops"), ops: get("ops") };
}

export async function restoreFromAddress() {
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

export async function runQuery(remember = true) {
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

export function cancelQuery() {
  if (state.query && state.query.controller) state.query.controller.abort();
}
