/**
 * The Account dialog: change your password, sign out everywhere, and create and
 * revoke personal API keys. A new key is shown once, in a read-only field; the
 * server keeps only its hash, so it cannot be shown again.
 */

import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { on, state, STORAGE, storage } from "./state.js";

let dialog;
let signedOut; // main.js's signOutLocally: this page forgets its token and shows the login

function show(id, message) {
  const box = byId(id);
  box.textContent = message;
  box.hidden = !message;
}

function when(seconds) {
  return seconds ? new Date(seconds * 1000).toLocaleString() : "never";
}

async function loadKeys() {
  let keys;
  try {
    keys = await request("/api/keys");
  } catch (error) {
    show("key-error", error.message);
    return;
  }
  const rows = keys.map((key) =>
    h(
      "li",
      { class: "record", testid: "key-item", dataset: { id: String(key.id) } },
      h(
        "div",
        { class: "record-main" },
        h("span", { class: "record-name" }, String(key.name)),
        h("span", { class: "muted small" }, `Created ${when(key.created_at)} · last used ${when(key.last_used_at)}`),
      ),
      h(
        "button",
        {
          type: "button",
          class: "button button-ghost button-small record-danger",
          "aria-label": `Revoke the key ${key.name}`,
          testid: "key-revoke",
          dataset: { action: "revoke" },
        },
        "Revoke",
      ),
    ),
  );
  byId("key-list").replaceChildren(...rows);
  byId("key-empty").hidden = rows.length > 0;
}

async function createKey(event) {
  event.preventDefault();
  const input = byId("key-name");
  const name = input.value.trim();
  show("key-error", "");
  if (!name) {
    show("key-error", "Give the key a name, to tell it apart later.");
    return;
  }
  try {
    const created = await request("/api/keys", { method: "POST", body: { name } });
    input.value = "";
    byId("key-secret").value = created.key;
    byId("key-created").hidden = false;
    byId("key-secret").select();
  } catch (error) {
    show("key-error", error.message);
  }
  await loadKeys();
}

async function revokeKey(event) {
  const button = event.target.closest("button[data-action=revoke]");
  if (!button) return;
  const item = button.closest("li");
  const name = item.querySelector(".record-name").textContent;
  if (!window.confirm(`Revoke the key “${name}”? Clients using it stop working at once.`)) return;
  show("key-error", "");
  try {
    await request(`/api/keys/${encodeURIComponent(item.dataset.id)}`, { method: "DELETE" });
  } catch (error) {
    show("key-error", error.message);
  }
  await loadKeys();
}

async function changePassword(event) {
  event.preventDefault();
  const current = byId("password-current");
  const fresh = byId("password-new");
  show("password-error", "");
  show("password-done", "");
  if (!current.value || fresh.value.length < 8) {
    show("password-error", "Enter your current password and a new one of at least 8 characters.");
    return;
  }
  const everywhere = byId("password-everywhere").checked;
  const submit = event.target.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const token = await request("/api/auth/password", {
      method: "POST",
      body: { current_password: current.value, new_password: fresh.value, sign_out_everywhere: everywhere },
    });
    // The old token ended with the old password; this page goes on with the new one.
    state.token = token.access_token;
    storage.set(STORAGE.token, token.access_token);
    const keys = everywhere ? "and your API keys were ended" : "your API keys still work";
    show("password-done", `Password changed. You are signed out everywhere else; ${keys}.`);
  } catch (error) {
    show("password-error", error.message);
  } finally {
    current.value = "";
    fresh.value = "";
    submit.disabled = false;
  }
  await loadKeys();
}

async function signOutEverywhere() {
  const question = "Sign out everywhere? Every session of yours ends, this one too, and every API key stops working.";
  if (!window.confirm(question)) return;
  show("everywhere-error", "");
  const button = byId("everywhere-submit");
  button.disabled = true;
  try {
    await request("/api/auth/logout-everywhere", { method: "POST" });
  } catch (error) {
    show("everywhere-error", error.message);
    return;
  } finally {
    button.disabled = false;
  }
  dialog.close();
  signedOut("You are signed out everywhere: every session and API key of yours has ended.");
}

function reset() {
  for (const id of ["password-error", "password-done", "everywhere-error", "key-error"]) show(id, "");
  byId("key-secret").value = "";
  byId("key-created").hidden = true;
}

/** `onSignedOut(message)`: forget this page's sign-in and show the login with `message`. */
export function mountAccount({ onSignedOut }) {
  signedOut = onSignedOut;
  dialog = byId("account-dialog");
  byId("account-open").addEventListener("click", () => {
    reset();
    dialog.showModal();
    loadKeys();
  });
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
  // The key's secret leaves the page when the dialog closes.
  dialog.addEventListener("close", reset);
  byId("password-form").addEventListener("submit", changePassword);
  byId("key-form").addEventListener("submit", createKey);
  byId("key-list").addEventListener("click", revokeKey);
  byId("everywhere-submit").addEventListener("click", signOutEverywhere);
  on("auth", () => {
    if (!state.user && dialog.open) dialog.close();
  });
}
