/**
 * One data source in the Data dialog: where it is and who may read it, a note on it, its
 * catalog with notes (data-catalog.js), a query box and its verified answers
 * (data-query.js).
 *
 * Anyone who sees a source may read its catalog again, run a query and write notes (the
 * owner's count at once, anyone else's are proposed to the owner). Only its owner shares
 * it, changes it, accepts proposed notes and deletes it; the server refuses the rest, the
 * view only leaves their buttons out.
 */

import { request } from "./api.js";
import { catalogView, noteEditor, sourceNote } from "./data-catalog.js";
import { queryBox, runQuery, verifiedList } from "./data-query.js";
import { byId, h } from "./dom.js";
import { state } from "./state.js";

export const FILE_KINDS = new Set(["sqlite", "duckdb"]);
const NETWORK_KINDS = new Set(["postgresql", "mysql"]);

let hooks = { tell: () => {}, changed: () => {}, gone: () => {} };
let shown = null; // {source, answers}: the source on view, as the server last sent it
let views = 0; // bumped by each showSource: a slow answer for an earlier one is dropped

const pathOf = (id) => `/api/data-sources/${encodeURIComponent(id)}`;

export const tablesText = (count) => `${count} table${count === 1 ? "" : "s"}`;

/** "private", "shared with 2 users", "shared with everyone", "shared with you". */
export function sharedState(source) {
  if (source.shared_with_everyone) return "shared with everyone";
  if (!source.owned) return "shared with you";
  const count = source.shared_with.length;
  return count ? `shared with ${count} user${count === 1 ? "" : "s"}` : "private";
}

function actionButton(action, text, label, extra = "button-ghost") {
  return h(
    "button",
    { type: "button", class: `button button-small ${extra}`, "aria-label": label, dataset: { action }, testid: `data-${action}` },
    text,
  );
}

/** "reader@db.example:5432/shop", or "sqlite file". */
function whereOf(source) {
  if (!NETWORK_KINDS.has(source.kind)) return FILE_KINDS.has(source.kind) ? `${source.kind} file` : String(source.kind);
  const port = source.port ? `:${source.port}` : "";
  const user = source.username ? `${source.username}@` : "";
  return `${user}${source.host}${port}/${source.database}`;
}

function head(source) {
  const name = String(source.name);
  const read = source.catalog_at ? `catalog read ${new Date(source.catalog_at * 1000).toLocaleString()}` : "catalog not read yet";
  return h(
    "div",
    { class: "data-detail-head" },
    h(
      "div",
      { class: "data-title-row" },
      h("h3", { class: "data-detail-title", testid: "data-detail-name" }, name),
      h("span", { class: "badge" }, String(source.kind)),
      h("span", { class: "muted small", testid: "data-detail-owner" }, source.owned ? "yours" : `by ${source.owner}`),
    ),
    source.description ? h("p", { class: "data-description" }, String(source.description)) : null,
    h("p", { class: "muted small data-facts", testid: "data-detail-facts" }, [whereOf(source), tablesText(source.tables), read].join(" · ")),
    h(
      "div",
      { class: "row-actions" },
      actionButton("refresh", "Refresh catalog", `Read the catalog of ${name} again`, "button-secondary"),
      source.owned ? actionButton("delete", "Delete", `Delete ${name}`, "button-ghost record-danger") : null,
    ),
  );
}

function sharing(source) {
  if (!source.owned) {
    return h(
      "p",
      { class: "muted small", testid: "data-read-only" },
      `Shared with you by ${source.owner}, read-only: your notes are proposed to them.`,
    );
  }
  const admin = Boolean(state.user && state.user.is_admin);
  return h(
    "fieldset",
    { class: "data-fieldset", dataset: { scope: "share" }, testid: "data-sharing" },
    h("legend", {}, "Sharing"),
    h("p", { class: "muted small", testid: "data-shared-state" }, `Now ${sharedState(source)}${source.shared_with.length ? `: ${source.shared_with.join(", ")}` : ""}.`),
    h(
      "div",
      { class: "inline-form data-share-form" },
      h(
        "label",
        { class: "field" },
        h("span", { class: "field-label" }, "Share read-only with (usernames, separated by commas)"),
        h("input", {
          type: "text",
          value: source.shared_with.join(", "),
          autocomplete: "off",
          autocapitalize: "none",
          spellcheck: "false",
          dataset: { shareUsers: "" },
          testid: "data-share-users",
        }),
      ),
      admin
        ? h(
            "label",
            { class: "check" },
            h("input", { type: "checkbox", checked: source.shared_with_everyone, dataset: { shareEveryone: "" }, testid: "data-share-everyone" }),
            "Everyone",
          )
        : null,
      actionButton("share", "Save sharing", `Save whom ${source.name} is shared with`, "button-secondary"),
    ),
  );
}

function textField(label, value, data, type = "text") {
  return h(
    "label",
    { class: "field" },
    h("span", { class: "field-label" }, label),
    h("input", { type, value, autocomplete: type === "password" ? "new-password" : "off", spellcheck: "false", dataset: data }),
  );
}

/** The owner's Change… form: the description, and a server's address and account. */
function changeForm(source) {
  if (!source.owned) return null;
  const network = NETWORK_KINDS.has(source.kind);
  return h(
    "details",
    { class: "data-change", dataset: { scope: "change" }, testid: "data-change" },
    h("summary", { class: "button button-ghost button-small" }, "Change…"),
    h(
      "div",
      { class: "data-change-body" },
      textField("Description", String(source.description || ""), { change: "description" }),
      network
        ? h(
            "div",
            { class: "inline-form" },
            textField("Host", String(source.host), { change: "host" }),
            textField("Port", source.port ? String(source.port) : "", { change: "port" }, "number"),
            textField("Database", String(source.database), { change: "database" }),
            textField("Username", String(source.username), { change: "username" }),
            textField(source.has_password ? "Password (kept; empty keeps it)" : "Password", "", { change: "password" }, "password"),
          )
        : null,
      actionButton("change", "Save changes", `Save the changes to ${source.name}`, "button-secondary"),
    ),
  );
}

function draw() {
  const { source, answers } = shown;
  const box = byId("data-detail");
  // Drawn again (reopened, refreshed, a note saved): the query being written, and its
  // result, stay as they are.
  const writing = box.dataset.source === source.id ? box.querySelector('[data-scope="query"]') : null;
  box.dataset.source = source.id;
  box.replaceChildren(
    head(source),
    changeForm(source),
    h(
      "section",
      { class: "data-section" },
      h("h4", { class: "data-section-title" }, "About this source"),
      h("p", { class: "muted small" }, "Notes tell the agents what the data means: on the source, a table or a column."),
      noteEditor(source, "", sourceNote(source), source.name),
    ),
    sharing(source),
    catalogView(source),
    writing || queryBox(source),
    verifiedList(source, answers),
  );
}

/** Show source `id` (its detail too, if already at hand) with its verified answers. */
export async function showSource(id, detail = null) {
  const view = (views += 1);
  const box = byId("data-detail");
  box.hidden = false;
  if (!shown || shown.source.id !== id) box.replaceChildren(h("p", { class: "muted small" }, "Loading…"));
  let answers;
  try {
    [detail, answers] = await Promise.all([detail || request(pathOf(id)), request(`${pathOf(id)}/verified-answers`)]);
  } catch (error) {
    if (view !== views) return;
    if (error.status === 404) {
      shown = null;
      hooks.gone();
    }
    hooks.tell(error.message);
    return;
  }
  if (view !== views) return;
  shown = { source: detail, answers };
  draw();
}

/** The PATCH body of the Change… form; an empty password keeps the one stored. */
function changesOf(scope) {
  const body = {};
  for (const input of scope.querySelectorAll("input[data-change]")) {
    const field = input.dataset.change;
    const value = field === "password" ? input.value : input.value.trim();
    if (field === "port") body.port = value ? Number(value) : 0;
    else if (field !== "password" || value) body[field] = value;
  }
  return body;
}

function sharesOf(scope) {
  const users = scope
    .querySelector("input[data-share-users]")
    .value.split(/[,\s]+/)
    .map((name) => name.trim())
    .filter(Boolean);
  const everyone = scope.querySelector("input[data-share-everyone]");
  return everyone ? { users, everyone: everyone.checked } : { users };
}

/** Do `action` (a button's data-action) in `scope`; says what was done, or null. */
async function act(scope, action) {
  const source = shown.source;
  const name = source.name;
  const path = pathOf(source.id);
  if (action === "refresh") {
    shown.source = await request(`${path}/refresh`, { method: "POST" });
    draw();
    hooks.changed();
    return `The catalog of ${name} is read again: ${tablesText(shown.source.tables)}.`;
  }
  if (action === "delete") {
    if (!window.confirm(`Delete the data source ${name}? Every conversation that attached it loses it.`)) return null;
    await request(path, { method: "DELETE" });
    shown = null;
    await hooks.gone();
    return `${name} is deleted.`;
  }
  if (action === "share") {
    const shared = await request(`${path}/shares`, { method: "PUT", body: sharesOf(scope) });
    shown.source = { ...shown.source, ...shared };
    draw();
    hooks.changed();
    return `${name} is ${sharedState(shown.source)}.`;
  }
  if (action === "change") {
    shown.source = await request(path, { method: "PATCH", body: changesOf(scope) });
    draw();
    hooks.changed();
    return `${shown.source.name} is saved.`;
  }
  if (action === "note") {
    const target = scope.dataset.target;
    const note = scope.querySelector("input").value.trim();
    const written = await request(`${path}/notes`, { method: "PUT", body: { target, note } });
    const what = target || name;
    if (written.status === "proposed") return `Your note on ${what} is proposed to ${source.owner}: it counts once they accept it.`;
    return note ? `The note on ${what} is saved.` : `The note on ${what} is removed.`;
  }
  if (action === "accept") {
    const target = scope.dataset.target;
    await request(`${path}/notes/accept`, { method: "POST", body: { target } });
    shown.source = await request(path);
    draw();
    return `The note proposed on ${target || name} is accepted.`;
  }
  if (action === "query") {
    await runQuery(scope, source);
    return null;
  }
  if (action === "withdraw") {
    if (!window.confirm("Withdraw this verified answer? Later questions no longer get it as an example.")) return null;
    const id = scope.dataset.answer;
    await request(`${path}/verified-answers/${encodeURIComponent(id)}`, { method: "DELETE" });
    shown.answers = shown.answers.filter((answer) => answer.id !== id);
    draw();
    return "The verified answer is withdrawn.";
  }
  return null;
}

async function onClick(event) {
  const button = event.target.closest("button[data-action]");
  if (!button || !shown) return;
  hooks.tell("");
  button.disabled = true;
  try {
    const done = await act(button.closest("[data-scope]") || byId("data-detail"), button.dataset.action);
    if (done !== null) hooks.tell("", done);
  } catch (error) {
    hooks.tell(error.message);
  } finally {
    button.disabled = false;
  }
}

/** Enter in a note saves it; Ctrl+Enter (⌘+Enter) in the query box runs it. */
function onKey(event) {
  if (event.key !== "Enter") return;
  const note = event.target.closest("[data-scope=note] input");
  const sql = event.target.closest("textarea[data-sql]");
  if (!note && !(sql && (event.ctrlKey || event.metaKey))) return;
  event.preventDefault();
  const button = event.target.closest("[data-scope]").querySelector("button[data-action=note], button[data-action=query]");
  if (button && !button.disabled) button.click();
}

/** `tell(error, done)`, `changed()` (the list is to be drawn again), `gone()` (the source is no more). */
export function mountSourceView(callbacks) {
  hooks = callbacks;
  byId("data-detail").addEventListener("click", onClick);
  byId("data-detail").addEventListener("keydown", onKey);
}
