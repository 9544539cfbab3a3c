/**
 * The MCP servers dialog, for admins only: register a server (an HTTP endpoint or a
 * local stdio program), choose which of its tools the agents are offered and which
 * users may use it, change its address or secrets, disable and re-enable it, delete it.
 *
 * Secrets go in and never come back: the server names them only, so their inputs
 * always start empty. The server refuses all of it to anyone but an admin; this only
 * keeps the button hidden.
 */

import { actionButton, mountAdminDialog, onActions } from "./admin-dialog.js";
import { request } from "./api.js";
import { byId, h } from "./dom.js";

// After these the list stays as it is (a reload would fold away the loaded tools).
const KEEPS_LIST = new Set(["tools"]);

let tell; // the dialog's messages (admin-dialog.js)
let users = []; // [{id, username}]: the choices for who may use a server

/** "Name: value" lines → {Name: "value"}; blank lines are skipped. */
function parseSecrets(text) {
  const secrets = {};
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const colon = line.indexOf(":");
    // The message never quotes the line: it may hold a secret.
    if (colon < 1) throw new Error('Write each secret as "Name: value", one a line.');
    secrets[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return secrets;
}

/** One argument a line, so an argument may hold spaces; blank lines are skipped. */
function parseCommand(text) {
  return text
    .split("\n")
    .map((arg) => arg.trim())
    .filter(Boolean);
}

function addressOf(server) {
  return server.transport === "http" ? server.url : server.command.join(" ");
}

function usersOf(server) {
  if (server.user_ids === null) return "everyone";
  if (!server.user_ids.length) return "nobody";
  const names = new Map(users.map((user) => [user.id, String(user.username)]));
  return server.user_ids.map((id) => names.get(id) || `user #${id}`).join(", ");
}

function summary(server) {
  const listed = (names) => (names.length ? names.join(", ") : "none");
  return h(
    "div",
    { class: "record-main" },
    h(
      "span",
      {},
      h("span", { class: "record-name" }, server.name),
      h("span", { class: "badge" }, server.transport),
      server.enabled ? null : h("span", { class: "badge badge-off" }, "disabled"),
    ),
    h("code", { class: "mcp-address", testid: "mcp-address" }, addressOf(server)),
    h("span", { class: "muted small", testid: "mcp-secret-names" }, `Secrets: ${listed(server.secret_names)}`),
    h("span", { class: "muted small", testid: "mcp-allowed" }, `Tools allowed: ${listed(server.allowed_tools)}`),
    h("span", { class: "muted small", testid: "mcp-used-by" }, `Used by: ${usersOf(server)}`),
  );
}

function more(text, ...children) {
  return h(
    "details",
    { class: "mcp-more" },
    h("summary", { class: "button button-ghost button-small" }, text),
    h("div", { class: "mcp-more-body" }, ...children),
  );
}

function userChoice(server) {
  const everyone = server.user_ids === null;
  const chosen = new Set(server.user_ids || []);
  const group = `mcp-access-${server.id}`;
  const radio = (value, text, checked) =>
    h(
      "label",
      { class: "check" },
      h("input", { type: "radio", name: group, value, checked, dataset: { access: value }, testid: `mcp-access-${value}` }),
      text,
    );
  return more(
    "Users…",
    h(
      "fieldset",
      { class: "mcp-fieldset" },
      h("legend", {}, `Who may use ${server.name}`),
      radio("everyone", "Everyone", everyone),
      radio("some", "Only these users", !everyone),
      h(
        "div",
        { class: "mcp-checks", dataset: { users: "" } },
        users.map((user) =>
          h(
            "label",
            { class: "check" },
            h("input", {
              type: "checkbox",
              value: String(user.id),
              checked: chosen.has(user.id),
              disabled: everyone,
              dataset: { user: "" },
            }),
            String(user.username),
          ),
        ),
      ),
    ),
    actionButton("mcp", "users", "Save users", `Save who may use ${server.name}`, "button-secondary"),
  );
}

function secretInput(server, secretName) {
  return h(
    "label",
    { class: "field" },
    h("span", { class: "field-label" }, secretName),
    h("input", {
      type: "password",
      autocomplete: "new-password",
      spellcheck: "false",
      placeholder: "stored sealed; leave empty to keep",
      "aria-label": `New value of ${secretName} for ${server.name}`,
      dataset: { secret: secretName },
    }),
  );
}

function changeForm(server) {
  const name = server.name;
  const address =
    server.transport === "http"
      ? h("input", { type: "url", value: server.url, spellcheck: "false", "aria-label": `URL of ${name}`, dataset: { address: "" } })
      : h(
          "textarea",
          { rows: "3", spellcheck: "false", "aria-label": `Command of ${name}, one argument a line`, dataset: { address: "" } },
          server.command.join("\n"),
        );
  return more(
    "Change…",
    h("label", { class: "field" }, h("span", { class: "field-label" }, server.transport === "http" ? "URL" : "Command"), address),
    server.secret_names.map((secretName) => secretInput(server, secretName)),
    h(
      "label",
      { class: "field" },
      h("span", { class: "field-label" }, "More secrets"),
      h("textarea", {
        rows: "2",
        spellcheck: "false",
        autocomplete: "off",
        placeholder: "Name: value",
        "aria-label": `More secrets for ${name}, one "Name: value" a line`,
        dataset: { moreSecrets: "" },
      }),
    ),
    h(
      "p",
      { class: "muted small" },
      "Secrets are stored sealed and never shown back: a secret left empty keeps its value. " +
        "To remove one, add the line \"Name:\" with no value under More secrets.",
    ),
    actionButton("mcp", "change", "Save changes", `Save the changes to ${name}`, "button-secondary"),
  );
}

function row(server) {
  const name = server.name;
  const toggle = server.enabled ? ["disable", "Disable"] : ["enable", "Enable"];
  return h(
    "li",
    { class: "record mcp-server", testid: "mcp-server", dataset: { id: String(server.id), name, transport: server.transport } },
    summary(server),
    h(
      "div",
      { class: "row-actions" },
      actionButton("mcp", "tools", "Tools", `Load the tools of ${name}`),
      userChoice(server),
      changeForm(server),
      actionButton("mcp", toggle[0], toggle[1], `${toggle[1]} ${name}`),
      actionButton("mcp", "delete", "Delete", `Delete ${name}`, "record-danger"),
    ),
    h("div", { class: "mcp-tools", dataset: { tools: "" } }),
  );
}

function toolList(name, tools) {
  return h(
    "fieldset",
    { class: "mcp-fieldset", testid: "mcp-tool-list" },
    h("legend", {}, `Tools of ${name} the agents may use`),
    tools.length
      ? tools.map((tool) =>
          h(
            "label",
            { class: "mcp-tool" },
            h("input", {
              type: "checkbox",
              value: String(tool.name),
              checked: Boolean(tool.allowed),
              "aria-label": `Allow ${tool.name}`,
              dataset: { tool: "" },
            }),
            h("code", {}, String(tool.name)),
            h("span", { class: "muted small" }, String(tool.description || "")),
          ),
        )
      : h("p", { class: "muted small" }, "It offers no tools."),
    actionButton("mcp", "tools-save", "Save tools", `Save the tools of ${name}`, "button-secondary"),
  );
}

async function load() {
  let servers;
  try {
    [servers, users] = await Promise.all([request("/api/mcp-servers"), request("/api/users")]);
  } catch (error) {
    tell(error.message);
    return;
  }
  byId("mcp-list").replaceChildren(...servers.map(row));
  byId("mcp-empty").hidden = servers.length > 0;
}

function checkedValues(li, selector) {
  return Array.from(li.querySelectorAll(`${selector}:checked`), (input) => input.value);
}

/** The PATCH body of the Change… form: the address, and the secrets if any was entered. */
function changesOf(li) {
  const address = li.querySelector("[data-address]").value;
  const body = li.dataset.transport === "http" ? { url: address.trim() } : { command: parseCommand(address) };
  const secrets = {};
  for (const input of li.querySelectorAll("input[data-secret]")) {
    if (input.value) secrets[input.dataset.secret] = input.value;
  }
  Object.assign(secrets, parseSecrets(li.querySelector("[data-more-secrets]").value));
  if (Object.keys(secrets).length) body.secrets = secrets;
  return body;
}

async function act(li, action) {
  const name = li.dataset.name;
  const path = `/api/mcp-servers/${encodeURIComponent(li.dataset.id)}`;
  const patch = (body) => request(path, { method: "PATCH", body });
  if (action === "tools") {
    const { tools, error } = await request(`${path}/tools`);
    if (error) throw new Error(error); // the server could not be reached: why
    li.querySelector("[data-tools]").replaceChildren(toolList(name, tools));
    return `${name} offers ${tools.length} tool${tools.length === 1 ? "" : "s"}.`;
  }
  if (action === "tools-save") {
    const server = await patch({ allowed_tools: checkedValues(li, "input[data-tool]") });
    return `The agents may use ${server.allowed_tools.length} tool(s) of ${name}.`;
  }
  if (action === "users") {
    const everyone = li.querySelector('input[data-access="everyone"]').checked;
    const ids = checkedValues(li, "input[data-user]").map(Number);
    await patch(everyone ? { everyone: true } : { user_ids: ids });
    return everyone ? `Everyone may use ${name}.` : `${ids.length} user(s) may use ${name}.`;
  }
  if (action === "change") {
    const server = await patch(changesOf(li));
    return `${name} saved; its secrets: ${server.secret_names.join(", ") || "none"}.`;
  }
  if (action === "disable" || action === "enable") {
    await patch({ enabled: action === "enable" });
    return `${name} is ${action === "disable" ? "disabled" : "enabled again"}.`;
  }
  if (action === "delete") {
    if (!window.confirm(`Delete the MCP server ${name}? The agents lose its tools at once.`)) return null;
    await request(path, { method: "DELETE" });
    return `${name} is deleted.`;
  }
  return null;
}

/** "Everyone" greys out the user checkboxes; "Only these users" brings them back. */
function onListChange(event) {
  const radio = event.target.closest("input[data-access]");
  if (!radio) return;
  const everyone = radio.dataset.access === "everyone";
  for (const input of radio.closest("fieldset").querySelectorAll("input[data-user]")) {
    input.disabled = everyone;
  }
}

function showTransport() {
  const http = byId("mcp-transport").value === "http";
  byId("mcp-url-field").hidden = !http;
  byId("mcp-command-field").hidden = http;
}

function newServer() {
  const transport = byId("mcp-transport").value;
  const body = {
    name: byId("mcp-name").value.trim(),
    transport,
    secrets: parseSecrets(byId("mcp-secrets").value),
  };
  if (transport === "http") body.url = byId("mcp-url").value.trim();
  else body.command = parseCommand(byId("mcp-command").value);
  return body;
}

async function createServer(event) {
  event.preventDefault();
  if (!byId("mcp-name").value.trim()) {
    tell("Enter a name for the server.");
    return;
  }
  try {
    const server = await request("/api/mcp-servers", { method: "POST", body: newServer() });
    byId("mcp-form").reset();
    showTransport();
    tell("", `${server.name} is registered: choose its tools under Tools.`);
  } catch (error) {
    tell(error.message);
    return;
  }
  await load();
}

export function mountMcpAdmin() {
  tell = mountAdminDialog("mcp", load);
  byId("mcp-transport").addEventListener("change", showTransport);
  byId("mcp-form").addEventListener("submit", createServer);
  const keepsList = (action) => KEEPS_LIST.has(action);
  byId("mcp-list").addEventListener("click", onActions("li", { act, load, tell, keepsList }));
  byId("mcp-list").addEventListener("change", onListChange);
}
