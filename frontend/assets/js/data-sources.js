/**
 * The Data dialog: your data sources and those shared with you, a form to add one (a
 * database server's read-only account, or a SQLite or DuckDB file sent first through
 * POST /v1/files), and the chosen source's view (data-source-view.js).
 *
 * The server checks what matters (a name code can call, an account that may only read);
 * its `detail` is shown as it says it. "data-sources" is emitted when the list changes,
 * so the Files panel's checkboxes follow (session-sources.js).
 */

import { request } from "./api.js";
import { FILE_KINDS, mountSourceView, sharedState, showSource, tablesText } from "./data-source-view.js";
import { byId, h } from "./dom.js";
import { emit, on, state } from "./state.js";

const NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

let dialog;
let shownId = null; // the source on view; null: the form to add one

function show(id, message) {
  const box = byId(id);
  box.textContent = message;
  box.hidden = !message;
}

/** The dialog's two lines: what went wrong, what was done (an empty one hides its line). */
function tell(error, done = "") {
  show("data-error", error);
  show("data-done", done);
}

function row(source) {
  const name = String(source.name);
  const shown = source.id === shownId;
  const facts = [source.owned ? "yours" : `by ${source.owner}`, tablesText(source.tables), sharedState(source)];
  return h(
    "li",
    { class: `data-source${shown ? " is-shown" : ""}`, testid: "data-source", dataset: { id: source.id, name } },
    h(
      "button",
      {
        type: "button",
        class: "data-source-open",
        "aria-current": shown ? "true" : null,
        "aria-label": `Open ${name}`,
        testid: "data-source-open",
      },
      h("span", { class: "data-source-title" }, h("span", { class: "record-name" }, name), h("span", { class: "badge" }, String(source.kind))),
      h("span", { class: "muted small", testid: "data-source-facts" }, facts.join(" · ")),
    ),
  );
}

async function loadSources() {
  let sources;
  try {
    sources = await request("/api/data-sources");
  } catch (error) {
    tell(error.message);
    return;
  }
  byId("data-list").replaceChildren(...sources.map(row));
  byId("data-empty").hidden = sources.length > 0;
}

function markShown() {
  for (const li of byId("data-list").querySelectorAll("li[data-id]")) {
    const shown = li.dataset.id === shownId;
    li.classList.toggle("is-shown", shown);
    const button = li.querySelector("button");
    if (shown) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

function showForm() {
  shownId = null;
  byId("data-detail").hidden = true;
  byId("data-detail").replaceChildren();
  byId("data-add").hidden = false;
  markShown();
}

function openSource(id, detail = null) {
  shownId = id;
  byId("data-add").hidden = true;
  markShown();
  return showSource(id, detail);
}

function showKind() {
  const kind = byId("data-kind").value;
  const file = FILE_KINDS.has(kind);
  byId("data-network").hidden = file || kind === "dataset";
  byId("data-file-field").hidden = !file;
  byId("data-files-field").hidden = kind !== "dataset";
}

/** The form's server fields, those filled in only (an empty port is the kind's default). */
function serverFields() {
  const body = {};
  for (const field of ["host", "database", "username"]) {
    const value = byId(`data-${field}`).value.trim();
    if (value) body[field] = value;
  }
  const port = byId("data-port").value.trim();
  if (port) body.port = Number(port);
  const password = byId("data-password").value;
  if (password) body.password = password;
  return body;
}

/** A database file through the Files API; resolves to its file id. */
async function uploadDatabase(file) {
  const form = new FormData();
  form.append("file", file);
  form.append("purpose", "user_data");
  const uploaded = await request("/v1/files", { method: "POST", body: form });
  return uploaded.id;
}

async function createSource(event) {
  event.preventDefault();
  const kind = byId("data-kind").value;
  const name = byId("data-name").value.trim();
  if (!NAME.test(name)) {
    tell("Give the source a name code can call: a letter, then letters, digits or underscores (at most 64).");
    byId("data-name").focus();
    return;
  }
  const file = FILE_KINDS.has(kind) ? byId("data-file").files[0] : null;
  if (FILE_KINDS.has(kind) && !file) {
    tell("Choose the database file.");
    return;
  }
  const files = kind === "dataset" ? [...byId("data-files").files] : [];
  if (kind === "dataset" && !files.length) {
    tell("Choose the dataset's files: each CSV, TSV, Parquet or JSON file becomes a table.");
    return;
  }
  const body = { name, kind };
  const description = byId("data-description").value.trim();
  if (description) body.description = description;
  const button = byId("data-create");
  button.disabled = true;
  let fileId = null;
  const fileIds = [];
  try {
    if (file) {
      tell("", `Uploading ${file.name}…`);
      fileId = await uploadDatabase(file);
      body.file_id = fileId;
    } else if (files.length) {
      for (const each of files) {
        tell("", `Uploading ${each.name}…`);
        fileIds.push(await uploadDatabase(each));
      }
      body.file_ids = fileIds;
    } else Object.assign(body, serverFields());
    tell("", file || files.length ? "Reading its tables…" : "Checking the account and reading the catalog…");
    const source = await request("/api/data-sources", { method: "POST", body });
    byId("data-form").reset();
    showKind();
    await loadSources();
    emit("data-sources");
    await openSource(source.id, source);
    tell("", `${source.name} is added (${tablesText(source.tables)}). Attach it to a conversation in the Files panel.`);
  } catch (error) {
    // A file the source was not made from would only take up room.
    for (const id of fileId ? [fileId, ...fileIds] : fileIds) {
      request(`/v1/files/${encodeURIComponent(id)}`, { method: "DELETE" }).catch(() => {});
    }
    tell(error.message);
  } finally {
    button.disabled = false;
  }
}

export function mountDataSources() {
  dialog = byId("data-dialog");
  mountSourceView({
    tell,
    changed: async () => {
      await loadSources();
      emit("data-sources");
    },
    gone: async () => {
      showForm();
      await loadSources();
      emit("data-sources");
    },
  });
  byId("data-open").addEventListener("click", () => {
    tell("");
    dialog.showModal();
    loadSources();
    if (shownId) openSource(shownId);
    else showForm();
  });
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
  byId("data-new").addEventListener("click", () => {
    tell("");
    showForm();
    byId("data-name").focus();
  });
  byId("data-list").addEventListener("click", (event) => {
    const li = event.target.closest("li[data-id]");
    if (!li) return;
    tell("");
    openSource(li.dataset.id);
  });
  byId("data-kind").addEventListener("change", showKind);
  byId("data-form").addEventListener("submit", createSource);
  on("auth", () => {
    if (state.user) return;
    if (dialog.open) dialog.close();
    showForm();
  });
  showKind();
}
