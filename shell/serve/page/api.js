// Calls to the service (docs/serve.md): the address of a route, the token kept for the tab
// and the form that asks for it, the errors as HttpError.

import { $ } from "./dom.js";

export const TOKEN_KEY = "treestore.token";

export class HttpError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

export function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export function apiUrl(route, params) {
  const url = new URL(route, document.baseURI);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, value);
  }
  return url;
}

/** The answer of a call as JSON; a 401 asks for the token and tries once more. */
export async function getJson(route, params, signal) {
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
export function askToken(refused) {
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

export function tokenGiven(event) {
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
