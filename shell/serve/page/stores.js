// The store picker: the stores the service serves, and choosing one.

import { $, el } from "./dom.js";
import { getJson } from "./api.js";
import { state } from "./state.js";
import { browse } from "./tree.js";
import { loadInfo } from "./info.js";

export async function loadStores() {
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

export async function chooseStore(name) {
  if (!name) return;
  state.store = name;
  $("store").value = name;
  $("store-meta").textContent = storeMeta(name);
  await Promise.all([browse([]), loadInfo()]);
}
