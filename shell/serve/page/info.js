// The store's info panel: what `treestore info` says, laid out.

import { $, el, formatBytes, formatNumber } from "./dom.js";
import { getJson } from "./api.js";
import { state } from "./state.js";

export async function loadInfo() {
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
