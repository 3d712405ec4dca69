// What a query shows: the status line, the result table drawn as rows arrive, the
// downloads, and its errors (under the box the server points at, else in the error box).

import { $, el, firstLine, formatSeconds } from "./dom.js";
import { HttpError, TOKEN_KEY, apiUrl, authHeaders } from "./api.js";
import { state } from "./state.js";
import { clearFieldError } from "./boxes.js";

export const TABLE_CAP = 5000; // rows drawn in the table; the count and the downloads have them all

export function setStatus(name, text) {
  $("status").dataset.state = name;
  $("state").textContent = text;
}

export function clearResults() {
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

export function showElapsed(query) {
  $("elapsed").textContent = formatSeconds(performance.now() - query.started);
}

export function drawHeader(columns) {
  $("results-wrap").hidden = false;
  $("results").tHead.replaceChildren(
    el("tr", {}, el("th", { class: "rownum" }, "#"), ...columns.map((c) => el("th", { "data-column": c }, c)))
  );
}

/** Draw the rows that arrived since the last frame. */
export function flushRows(query) {
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

/** The download links of a query's result (`params`: its fields), or none (null). */
export function setDownloads(params) {
  for (const format of ["csv", "json"]) {
    const link = $(`download-${format}`);
    link.hidden = !params;
    link.href = params ? apiUrl("query", { ...params, format }).toString() : "#";
  }
}

/** With a token, a plain link cannot carry it: fetch the file and hand it over. */
export async function downloadWithToken(event) {
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
export function showError(error) {
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
