/**
 * The Groups dialog, for admins only: create a group, set its limits and the models and
 * MCP servers its members may use, rename it, see its members (and which of them the
 * identity provider put there), delete it. Members are added and taken out in the Users
 * dialog (admin.js).
 *
 * "No say" is null on the wire: an empty limit, or no model or server checked. The server
 * refuses all of it to anyone but an admin; this only keeps the button hidden.
 */

import { FROM_SIGN_IN, LIMITS, limitInput, limitsOf } from "./admin.js";
import { actionButton, mountAdminDialog, onActions } from "./admin-dialog.js";
import { request } from "./api.js";
import { byId, h } from "./dom.js";

const EVERY_MODEL = "*";

let tell; // the dialog's messages (admin-dialog.js)
let models = []; // the model names to offer (GET /api/models)
let servers = []; // [{id, name}]: the MCP servers to offer

function check(value, text, checked, data, disabled = false) {
  return h(
    "label",
    { class: "check" },
    h("input", { type: "checkbox", value, checked, disabled, dataset: data }),
    text,
  );
}

/** What a fieldset's checks say right now: "no say" when none is checked. */
function sayOf(fieldset) {
  const every = fieldset.querySelector("input[data-every]");
  if (every && every.checked) return "Members may use every model.";
  const chosen = Array.from(fieldset.querySelectorAll("input[data-choice]:checked"), (input) =>
    input.closest("label").textContent.trim(),
  );
  return chosen.length ? `Members may use ${chosen.join(", ")}.` : "No say: none checked.";
}

/** A fieldset of checks, with a line that says what they give (kept up by `onListChange`). */
function fieldset(kind, legend, ...children) {
  const box = h(
    "fieldset",
    { class: "group-fieldset", dataset: { kind }, testid: `group-${kind}` },
    h("legend", {}, legend),
    ...children,
  );
  if (box.querySelector("input")) {
    box.append(h("span", { class: "muted small", dataset: { say: "" }, testid: `group-${kind}-say` }, sayOf(box)));
  }
  return box;
}

function limitFields(group) {
  return h(
    "fieldset",
    { class: "group-fieldset" },
    h("legend", {}, "Limits"),
    h(
      "div",
      { class: "group-limits" },
      LIMITS.map((limit) =>
        h(
          "label",
          { class: "group-limit" },
          h("span", { class: "field-label" }, limit[1]),
          limitInput(group.limits, limit, group.name, "no say"),
        ),
      ),
    ),
  );
}

/** The models to check: those the server offers, and any the group names it does not. */
function modelChoices(group) {
  const named = (group.models || []).filter((name) => name !== EVERY_MODEL);
  return [...models, ...named.filter((name) => !models.includes(name))];
}

function modelFields(group) {
  const listed = new Set(group.models || []);
  const every = listed.has(EVERY_MODEL);
  return fieldset(
    "models",
    `Models the members of ${group.name} may use`,
    check(EVERY_MODEL, "Every model (*)", every, { every: "" }),
    h(
      "div",
      { class: "group-checks" },
      modelChoices(group).map((name) => check(name, name, listed.has(name), { choice: "" }, every)),
    ),
  );
}

function serverFields(group) {
  const listed = new Set(group.mcp_server_ids || []);
  return fieldset(
    "servers",
    `MCP servers the members of ${group.name} may use`,
    servers.length
      ? h(
          "div",
          { class: "group-checks" },
          servers.map((server) => check(String(server.id), String(server.name), listed.has(server.id), { choice: "" })),
        )
      : h("span", { class: "muted small" }, "No MCP servers are registered: this group has no say."),
  );
}

function members(group) {
  if (!group.members.length) return h("span", { class: "muted small", testid: "group-members" }, "No members yet.");
  return h(
    "div",
    { class: "group-members", testid: "group-members" },
    h("span", { class: "field-label" }, "Members"),
    group.members.map((member) =>
      h(
        "span",
        {
          class: member.origin === "claim" ? "badge group-badge group-badge-claim" : "badge group-badge",
          title: member.origin === "claim" ? FROM_SIGN_IN : null,
          testid: "group-member",
        },
        String(member.username || `user #${member.user_id}`),
        member.origin === "claim" ? [" ", h("span", { class: "group-origin" }, "from sign-in")] : null,
      ),
    ),
  );
}

function textInput(value, label, data, maxlength) {
  return h("input", {
    type: "text",
    value,
    maxlength: String(maxlength),
    autocomplete: "off",
    spellcheck: "false",
    "aria-label": label,
    dataset: data,
  });
}

function row(group) {
  const name = String(group.name);
  return h(
    "li",
    { class: "record group", testid: "group", dataset: { id: String(group.id), name } },
    h(
      "div",
      { class: "group-head" },
      h("label", { class: "field" }, h("span", { class: "field-label" }, "Name"), textInput(name, `Name of ${name}`, { name: "" }, 100)),
      h(
        "label",
        { class: "field" },
        h("span", { class: "field-label" }, "Description"),
        textInput(String(group.description || ""), `Description of ${name}`, { description: "" }, 500),
      ),
    ),
    limitFields(group),
    modelFields(group),
    serverFields(group),
    members(group),
    h(
      "div",
      { class: "row-actions" },
      actionButton("group", "save", "Save", `Save ${name}`, "button-secondary"),
      actionButton("group", "delete", "Delete", `Delete ${name}`, "record-danger"),
    ),
  );
}

async function load() {
  let groups;
  let listed;
  try {
    [groups, listed, servers] = await Promise.all([
      request("/api/groups"),
      request("/api/models"),
      request("/api/mcp-servers"),
    ]);
  } catch (error) {
    tell(error.message);
    return;
  }
  models = listed.data.map((model) => String(model.id));
  byId("group-list").replaceChildren(...groups.map(row));
  byId("group-empty").hidden = groups.length > 0;
}

/** The checked values of a fieldset, or null (no say) when none is checked. */
function chosen(li, kind) {
  const box = li.querySelector(`fieldset[data-kind="${kind}"]`);
  const every = box.querySelector("input[data-every]");
  if (every && every.checked) return [EVERY_MODEL];
  const values = Array.from(box.querySelectorAll("input[data-choice]:checked"), (input) => input.value);
  return values.length ? values : null;
}

function changesOf(li) {
  const serverIds = chosen(li, "servers");
  return {
    name: li.querySelector("input[data-name]").value.trim(),
    description: li.querySelector("input[data-description]").value.trim(),
    limits: limitsOf(li),
    models: chosen(li, "models"),
    mcp_server_ids: serverIds && serverIds.map(Number),
  };
}

async function act(li, action) {
  const name = li.dataset.name;
  const path = `/api/groups/${encodeURIComponent(li.dataset.id)}`;
  if (action === "save") {
    const group = await request(path, { method: "PATCH", body: changesOf(li) });
    return `${group.name} saved: it applies to its members at their next request.`;
  }
  if (action === "delete") {
    const count = li.querySelectorAll("[data-testid=group-member]").length;
    const back = li.querySelector(".group-badge-claim")
      ? " The identity provider names it, so it comes back, with no limits or rights, at such a member's next sign-in."
      : "";
    const question = `Delete the group ${name}? Its ${count} member(s) lose its limits and rights at once.${back}`;
    if (!window.confirm(question)) return null;
    await request(path, { method: "DELETE" });
    return `${name} is deleted.`;
  }
  return null;
}

/** "Every model" greys out the single models; each check updates its fieldset's say. */
function onListChange(event) {
  const input = event.target.closest("fieldset[data-kind] input");
  if (!input) return;
  const box = input.closest("fieldset");
  if (input.dataset.every !== undefined) {
    for (const single of box.querySelectorAll("input[data-choice]")) single.disabled = input.checked;
  }
  box.querySelector("[data-say]").textContent = sayOf(box);
}

async function createGroup(event) {
  event.preventDefault();
  const name = byId("group-name");
  const description = byId("group-description");
  if (!name.value.trim()) {
    tell("Enter a name for the group.");
    return;
  }
  try {
    const group = await request("/api/groups", {
      method: "POST",
      body: { name: name.value.trim(), description: description.value.trim() },
    });
    byId("group-form").reset();
    await load();
    tell("", `${group.name} is created: set its limits and rights below, and add members in the Users dialog.`);
  } catch (error) {
    tell(error.message);
  }
}

export function mountGroupsAdmin() {
  tell = mountAdminDialog("groups", load);
  byId("group-form").addEventListener("submit", createGroup);
  byId("group-list").addEventListener("click", onActions("li", { act, load, tell }));
  byId("group-list").addEventListener("change", onListChange);
}
