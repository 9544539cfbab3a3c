/**
 * The Users dialog, for admins only: create users, see what each used today, set
 * their limits (empty means the server's default; a daily limit of 0, none), disable
 * and re-enable them, reset a password, delete.
 * The server refuses all of it to anyone else; this only keeps the button hidden.
 */

import { mountAdminDialog } from "./admin-dialog.js";
import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { state } from "./state.js";
import { number, seconds } from "./usage.js";

// [field, label, least value]: a daily limit of 0 is none.
const LIMITS = [
  ["max_sandboxes", "Sandboxes", 1],
  ["max_runs", "Runs", 1],
  ["max_disk_mb", "Disk (MB)", 1],
  ["max_tokens_per_day", "Tokens per day", 0],
  ["max_sandbox_seconds_per_day", "Sandbox seconds per day", 0],
];

let tell; // the dialog's messages (admin-dialog.js)

function limitInput(user, [field, label, least]) {
  const value = user.limits ? user.limits[field] : null;
  return h(
    "td",
    {},
    h("input", {
      type: "number",
      min: String(least),
      step: "1",
      inputmode: "numeric",
      class: "limit-input",
      placeholder: "default",
      value: value === null || value === undefined ? "" : String(value),
      "aria-label": `${label} for ${user.username}`,
      dataset: { limit: field },
    }),
  );
}

function actionButton(action, text, label, extra = "") {
  return h(
    "button",
    {
      type: "button",
      class: `button button-ghost button-small ${extra}`,
      "aria-label": label,
      dataset: { action },
      testid: `row-${action}`,
    },
    text,
  );
}

function passwordReset(name) {
  return h(
    "details",
    { class: "reset" },
    h("summary", { class: "button button-ghost button-small" }, "Password…"),
    h(
      "span",
      { class: "reset-form" },
      h("input", {
        type: "password",
        autocomplete: "new-password",
        minlength: "8",
        placeholder: "New password",
        "aria-label": `New password for ${name}`,
        dataset: { password: "" },
      }),
      actionButton("password", "Set", `Set the password of ${name}`),
    ),
  );
}

/** What the user used today, from `GET /api/usage` (absent: none yet). */
function usedToday(user, today) {
  const used = today.get(user.id);
  const text = used
    ? `${number(used.tokens)} tokens · ${seconds(used.sandbox_wall_seconds)} in the sandbox · ${number(used.sandbox_runs)} runs`
    : "";
  return h("td", { class: "small", testid: "user-usage" }, text);
}

function row(user, today) {
  const self = Boolean(state.user && user.id === state.user.id);
  const name = String(user.username);
  const toggle = user.disabled ? ["enable", "Enable"] : ["disable", "Disable"];
  return h(
    "tr",
    { testid: "user-row", class: user.disabled ? "is-disabled" : null, dataset: { id: String(user.id), name } },
    h(
      "th",
      { scope: "row" },
      h("span", { class: "record-name" }, name),
      user.is_admin ? h("span", { class: "badge" }, "admin") : null,
      user.disabled ? h("span", { class: "badge badge-off" }, "disabled") : null,
      self ? h("span", { class: "muted small" }, " (you)") : null,
    ),
    LIMITS.map((limit) => limitInput(user, limit)),
    usedToday(user, today),
    h(
      "td",
      {},
      h(
        "div",
        { class: "row-actions" },
        actionButton("limits", "Save limits", `Save the limits of ${name}`),
        // An admin cannot lock themselves out (the server refuses it too).
        self ? null : actionButton(toggle[0], toggle[1], `${toggle[1]} ${name}`),
        passwordReset(name),
        self ? null : actionButton("delete", "Delete", `Delete ${name}`, "record-danger"),
      ),
    ),
  );
}

async function load() {
  let users;
  let usage;
  try {
    [users, usage] = await Promise.all([request("/api/users"), request("/api/usage")]);
  } catch (error) {
    tell(error.message);
    return;
  }
  const today = new Map(usage.users.map((entry) => [entry.user_id, entry.today]));
  byId("user-rows").replaceChildren(...users.map((user) => row(user, today)));
}

function limitsOf(tr) {
  const limits = {};
  for (const input of tr.querySelectorAll("input[data-limit]")) {
    const text = input.value.trim();
    limits[input.dataset.limit] = text === "" ? null : Number(text);
  }
  return limits;
}

async function act(tr, action) {
  const id = encodeURIComponent(tr.dataset.id);
  const name = tr.dataset.name;
  if (action === "limits") {
    await request(`/api/users/${id}`, { method: "PATCH", body: { limits: limitsOf(tr) } });
    return `Limits of ${name} saved.`;
  }
  if (action === "disable" || action === "enable") {
    await request(`/api/users/${id}`, { method: "PATCH", body: { disabled: action === "disable" } });
    return `${name} is ${action === "disable" ? "disabled" : "enabled again"}.`;
  }
  if (action === "password") {
    const input = tr.querySelector("input[data-password]");
    await request(`/api/users/${id}/password`, { method: "PUT", body: { password: input.value } });
    input.value = "";
    return `Password of ${name} set: their sessions and API keys have ended, and they sign in again with it.`;
  }
  if (action === "delete") {
    if (!window.confirm(`Delete ${name} with all their conversations, files and API keys? This cannot be undone.`)) {
      return null;
    }
    await request(`/api/users/${id}`, { method: "DELETE" });
    return `${name} is deleted.`;
  }
  return null;
}

async function onRowClick(event) {
  const button = event.target.closest("button[data-action]");
  if (!button) return;
  const tr = button.closest("tr");
  button.disabled = true;
  try {
    const done = await act(tr, button.dataset.action);
    if (done === null) return;
    tell("", done);
    await load();
  } catch (error) {
    tell(error.message);
  } finally {
    button.disabled = false;
  }
}

async function createUser(event) {
  event.preventDefault();
  const username = byId("user-username");
  const password = byId("user-password");
  const admin = byId("user-admin");
  if (!username.value.trim() || password.value.length < 8) {
    tell("Enter a username and a password of at least 8 characters.");
    return;
  }
  try {
    const user = await request("/api/users", {
      method: "POST",
      body: { username: username.value.trim(), password: password.value, is_admin: admin.checked },
    });
    username.value = "";
    password.value = "";
    admin.checked = false;
    tell("", `${user.username} can sign in now.`);
  } catch (error) {
    tell(error.message);
  }
  await load();
}

export function mountAdmin() {
  tell = mountAdminDialog("admin", load);
  byId("user-form").addEventListener("submit", createUser);
  byId("user-rows").addEventListener("click", onRowClick);
}
