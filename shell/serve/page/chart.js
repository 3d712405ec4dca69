// The bar chart of a result with one text column and one number column.

import { $, el, formatNumber } from "./dom.js";

const CHART_CAP = 40; // bars drawn

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

export function drawChart(query) {
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
