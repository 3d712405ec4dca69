// The query's three boxes (path, rops, ops): their values and the error line under each.

import { $ } from "./dom.js";
import { state } from "./state.js";

export function fields() {
  return {
    store: state.store,
    path: $("path").value.trim(),
    rops: $("rops").value.trim(),
    ops: $("ops").value.trim(),
  };
}

export function setField(name, value) {
  $(name).value = value;
  clearFieldError(name);
}

export function clearFieldError(name) {
  const box = $(`${name}-error`);
  box.hidden = true;
  box.replaceChildren();
  $(name).classList.remove("invalid");
}
