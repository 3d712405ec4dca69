// Completion from /complete: the list under a box, moving in it, putting a completion in.

import { $, el } from "./dom.js";
import { getJson } from "./api.js";
import { state } from "./state.js";
import { clearFieldError } from "./boxes.js";
import { showOpHelpAtCursor } from "./ops.js";

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

export function scheduleCompletion(input, now) {
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
export function hideCompletions() {
  clearTimeout(state.completion.timer);
  $("completions").hidden = true;
  state.completion.items = [];
  state.completion.index = -1;
  state.completion.seq += 1;
}

/** Put a completion in: it replaces the line's text from its `start` (code points) to the
 * cursor. */
export function acceptCompletion(input, item) {
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

export function moveCompletion(step) {
  const items = $("completions").children;
  if (!items.length) return;
  const index = (state.completion.index + step + items.length) % items.length;
  state.completion.index = index;
  for (let i = 0; i < items.length; i += 1) items[i].classList.toggle("active", i === index);
  items[index].scrollIntoView({ block: "nearest" });
}
