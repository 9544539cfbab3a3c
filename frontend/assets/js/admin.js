/**
 * The Users dialog, for admins only: create users, see what each used today, set
 * their limits (empty means their groups' or the server's default; a daily limit of 0,
 * none), add them to groups and take them out, disable and re-enable them, reset a
 * password, delete.
 * The server refuses all of it to anyone else; this only keeps the button hidden.
 */

import { actionButton, mountAdminDialog, onActions } from "./admin-dialog.js";
import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { state } from "./state.js";
import { number, seconds } from "./usage.js";

// [field, label, least value]: a daily limit of 0 is none. The Groups dialog shares them.
export const LIMITS = [
  ["max_sandboxes", "Sandboxes", 1],
  ["max_runs", "Runs", 1],
  ["max_disk_mb", "Disk (MB)", 1],
  ["max_tokens_per_day", "Tokens per day", 0],
  ["max_sandbox_seconds_per_day", "Sandbox seconds per day", 0],
];

// What a membership from single sign-on means, for its badge's title.
export const FROM_SIGN_IN =
  "From sign-in: the identity provider names this group, and gives it back at each sign-in while it does";

let tell; // the dialog's messages (admin-dialog.js)

/** A limit's number input, empty when it is not set; `limitsOf` reads them back. */
export function limitInput(limits, [field, label, least], owner, placeholder) {
  const value = limits ? limits[field] : null;
  return h("input", {
    type: "number",
    min: String(least),
    step: "1",
    inputmode: "numeric",
    class: "limit-input",
    placeholder,
    value: value === null || value === undefined ? "" : String(value),
    "aria-label": `${label} for ${owner}`,
    dataset: { limit: field },
  });
}

/** The limits of the inputs under `container`: an empty one is null. */
export function limitsOf(container) {
  const limits = {};
  for (const input of container.querySelectorAll("input[data-limit]")) {
    const text = input.value.trim();
    limits[input.dataset.limit] = text === "" ? null : Number(text);
  }
  return limits;
}

/** A group of the user's as a badge, with × to take them out of it. */
function groupBadge(name, group) {
  const claim = group.origin === "claim";
  return h(
    "span",
    {
      class: claim ? "badge group-badge group-badge-claim" : "badge group-badge",
      title: claim ? FROM_SIGN_IN : null,
      testid: "user-group",
      dataset: { origin: group.origin },
    },
    String(group.name),
    claim ? h("span", { class: "visually-hidden" }, " (from sign-in)") : null,
    h(
      "button",
      {
        type: "button",
        class: "group-badge-remove",
        "aria-label": `Remove ${name} from ${group.name}`,
        dataset: { action: "ungroup", group: String(group.id), groupName: String(group.name), origin: group.origin },
        testid: "user-group-remove",
      },
      h("span", { "aria-hidden": "true" }, "×"),
    ),
  );
}

/** The user's groups, and a choice of the groups they are not in with a button to add them. */
function groupsCell(user, name, groups) {
  const joined = new Set(user.groups.map((group) => group.id));
  const others = groups.filter((group) => !joined.has(group.id));
  return h(
    "td",
    { class: "user-groups", testid: "user-groups" },
    h("div", { class: "group-badges" }, user.groups.map((group) => groupBadge(name, group))),
    others.length
      ? h(
          "div",
          { class: "group-add" },
          h(
            "select",
            { "aria-label": `Group to add ${name} to`, dataset: { groupChoice: "" }, testid: "user-group-choice" },
            h("option", { value: "" }, "Add to group…"),
            others.map((group) => h("option", { value: String(group.id) }, String(group.name))),
          ),
          actionButton("row", "group-add", "Add", `Add ${name} to the chosen group`),
        )
      : null,
  );
}

/** The name and email single sign-on last gave, under the username. */
function identity(user) {
  const parts = [user.display_name, user.email].filter(Boolean).map(String);
  if (!parts.length) return null;
  return h(
    "span",
    { class: "user-identity muted small", testid: "user-identity" },
    parts.map((part) => h("span", {}, part)),
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
      actionButton("row", "password", "Set", `Set the password of ${name}`),
    ),
  );
}

/** What the user used today, from `GET /api/usage` (absent: none yet). */
function usedToday(user, today) {
  const used = today.get(user.id);
  const text = used
    ? `${number(used.tokens)} tokens · ${seconds(used.sandbox_wall_seconds)} in the sandbox · ${number(used.sandbox_runs)} runs`
    : "";
  return h("td", { class: "small user-usage", testid: "user-usage" }, text);
}

function row(user, today, groups) {
  const self = Boolean(state.user && user.id === state.user.id);
  const name = String(user.username);
  const toggle = user.disabled ? ["enable", "Enable"] : ["disable", "Disable"];
  return h(
    "tr",
    { testid: "user-row", class: user.disabled ? "is-disabled" : null, dataset: { id: String(user.id), name } },
    h(
      "th",
      { scope: "row", class: "user-cell" },
      h("span", { class: "record-name" }, name),
      user.is_admin ? h("span", { class: "badge" }, "admin") : null,
      user.disabled ? h("span", { class: "badge badge-off" }, "disabled") : null,
      self ? h("span", { class: "muted small" }, " (you)") : null,
      identity(user),
    ),
    LIMITS.map((limit) => h("td", {}, limitInput(user.limits, limit, name, "default"))),
    usedToday(user, today),
    groupsCell(user, name, groups),
    h(
      "td",
      {},
      h(
        "div",
        { class: "row-actions" },
        actionButton("row", "limits", "Save limits", `Save the limits of ${name}`),
        // An admin cannot lock themselves out (the server refuses it too).
        self ? null : actionButton("row", toggle[0], toggle[1], `${toggle[1]} ${name}`),
        passwordReset(name),
        self ? null : actionButton("row", "delete", "Delete", `Delete ${name}`, "record-danger"),
      ),
    ),
  );
}

async function load() {
  let users;
  let usage;
  let groups;
  try {
    [users, usage, groups] = await Promise.all([request("/api/users"), request("/api/usage"), request("/api/groups")]);
  } catch (error) {
    tell(error.message);
    return;
  }
  const today = new Map(usage.users.map((entry) => [entry.user_id, entry.today]));
  byId("user-rows").replaceChildren(...users.map((user) => row(user, today, groups)));
}

async function addToGroup(tr) {
  const choice = tr.querySelector("select[data-group-choice]");
  const name = tr.dataset.name;
  if (!choice.value) throw new Error(`Choose a group to add ${name} to.`);
  const group = await request(`/api/groups/${encodeURIComponent(choice.value)}/members`, {
    method: "POST",
    body: { user_id: Number(tr.dataset.id) },
  });
  return `${name} is in ${group.name} now.`;
}

async function removeFromGroup(tr, button) {
  const name = tr.dataset.name;
  const { group, groupName, origin } = button.dataset;
  const again = origin === "claim" ? ` Their identity provider names ${groupName}: it comes back at their next sign-in unless it is changed there.` : "";
  if (again && !window.confirm(`Remove ${name} from ${groupName}?${again}`)) return null;
  await request(`/api/groups/${encodeURIComponent(group)}/members/${encodeURIComponent(tr.dataset.id)}`, {
    method: "DELETE",
  });
  return `${name} is no longer in ${groupName}.${again}`;
}

async function act(tr, action, button) {
  const id = encodeURIComponent(tr.dataset.id);
  const name = tr.dataset.name;
  if (action === "group-add") return addToGroup(tr);
  if (action === "ungroup") return removeFromGroup(tr, button);
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
  byId("user-rows").addEventListener("click", onActions("tr", { act, load, tell }));
}
