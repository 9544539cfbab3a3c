/**
 * Uploads: checked against the server's limits, sent with a progress bar,
 * then shown as a card with what the server read from the file (summary,
 * columns and types, rows, sheets, pages). Files come from the paperclip button or a
 * drop anywhere on the page. Every name and value is set as text.
 */

import { fileInfo, uploadFile } from "./api.js";
import { byId, formatBytes, h } from "./dom.js";
import { emit, on, state } from "./state.js";

const MAX_COLUMNS_SHOWN = 50;
const CONVERSION_POLL_MS = 1000;
let uploadKeys = 0;
let waiting = []; // files given while the view loaded: they go to the conversation shown next

function extensionOf(name) {
  const dot = name.lastIndexOf(".");
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
}

/** Why the server would refuse `file`, or "" (the limits come from /api/status, kept in state.health). */
function problemWith(file) {
  const limits = state.health && state.health.upload;
  if (!limits) return "";
  const extension = extensionOf(file.name);
  const allowed = Array.isArray(limits.extensions) ? limits.extensions : [];
  if (allowed.length && !allowed.includes(extension)) {
    const what = extension ? `.${extension} files are not supported` : "files without an extension are not supported";
    return `“${file.name}” was not uploaded: ${what}. Supported: ${allowed.join(", ")}.`;
  }
  const maxMb = Number(limits.max_upload_mb ?? limits.max_file_mb); // the UI uploads over tus
  if (maxMb > 0 && file.size > maxMb * 1024 * 1024) {
    return `“${file.name}” was not uploaded: it is ${formatBytes(file.size)}, over the ${maxMb} MB limit.`;
  }
  return "";
}

export function uploadFiles(files) {
  if (state.loading) waiting.push(...files);
  else for (const file of files) startUpload(file);
}

function startUpload(file) {
  const upload = {
    key: `upload${(uploadKeys += 1)}`,
    sessionId: state.sessionId,
    name: file.name,
    size: file.size,
    status: "uploading",
    progress: 0,
    info: null,
    error: "",
    // where it sits among the conversation's messages, for when the view is redrawn
    afterCount: state.items.filter((item) => item.kind !== "upload").length,
  };
  if (!state.uploads.has(upload.sessionId)) state.uploads.set(upload.sessionId, []);
  state.uploads.get(upload.sessionId).push(upload);
  const item = { kind: "upload", upload };
  state.items.push(item);
  emit("item", item);
  const problem = problemWith(file);
  if (problem) {
    finish(upload, "error", { error: problem });
    return;
  }
  const { promise } = uploadFile(file, upload.sessionId, (fraction) => {
    upload.progress = fraction;
    emit("upload", upload);
  });
  promise.then(
    (info) => {
      finish(upload, "done", { info });
      emit("uploaded", upload);
      followConversion(upload);
    },
    (error) => finish(upload, "error", { error: error.message }),
  );
}

/** A large table's Parquet copy is made in the background: show its progress until it ends. */
function followConversion(upload) {
  const details = (upload.info && upload.info.details) || {};
  const conversion = details.conversion;
  if (!conversion || !["queued", "converting"].includes(conversion.state)) return;
  setTimeout(() => {
    fileInfo(upload.sessionId, `uploads/${upload.name}`).then(
      (info) => {
        upload.info = { ...info, name: upload.name };
        emit("upload", upload);
        followConversion(upload);
      },
      () => {}, // the file was removed, or the session ended: nothing more to show
    );
  }, CONVERSION_POLL_MS);
}

function finish(upload, status, fields) {
  Object.assign(upload, fields, { status, progress: 1 });
  emit("upload", upload);
}

// ---- views -----------------------------------------------------------------

/** A view for one upload: `{el, update(upload)}`. */
export function renderUpload(upload) {
  const view = { el: null, status: null, progress: null, update: null };
  view.update = (current) => {
    if (view.status === current.status && view.progress) {
      view.progress.value = current.progress;
      return;
    }
    const el = buildUpload(current, view);
    if (view.el) view.el.replaceWith(el);
    view.el = el;
    view.status = current.status;
  };
  view.update(upload);
  return view;
}

function buildUpload(upload, view) {
  view.progress = null;
  if (upload.status === "error") {
    return h(
      "div",
      { class: "upload upload-failed", role: "alert" },
      h("p", { class: "upload-error", testid: "upload-error" }, upload.error),
    );
  }
  if (upload.status === "uploading") {
    view.progress = h("progress", { class: "upload-progress", max: "1", value: String(upload.progress), testid: "upload-progress", "aria-label": `Uploading ${upload.name}` });
    return h(
      "div",
      { class: "upload upload-running" },
      h("div", { class: "file-card-head" }, h("span", { class: "file-name" }, upload.name), h("span", { class: "muted small" }, formatBytes(upload.size))),
      view.progress,
    );
  }
  return fileCard(upload.info || {}, upload);
}

function fileCard(info, upload) {
  const details = info.details && typeof info.details === "object" ? info.details : {};
  const facts = [];
  if (typeof details.rows === "number") facts.push(`${details.rows_estimated ? "≈ " : ""}${details.rows.toLocaleString()} rows`);
  if (Array.isArray(details.columns)) facts.push(`${details.columns.length} columns`);
  if (typeof details.pages === "number") facts.push(`${details.pages} pages`);
  if (Array.isArray(details.sheet_names)) facts.push(`${details.sheet_names.length} sheets`);
  return h(
    "article",
    { class: "upload file-card", testid: "file-card" },
    h(
      "div",
      { class: "file-card-head" },
      h("span", { class: "file-icon", "aria-hidden": "true" }, "▤"),
      h("span", { class: "file-name" }, String(info.name || upload.name)),
      h("span", { class: "muted small" }, [formatBytes(info.size ?? upload.size), info.kind ? ` · ${info.kind}` : ""].join("")),
    ),
    info.summary ? h("p", { class: "file-summary" }, String(info.summary)) : null,
    facts.length ? h("p", { class: "file-facts muted small" }, facts.join(" · ")) : null,
    columnsTable(details.columns),
    sheetsList(details),
    conversionLine(details.conversion),
    info.error ? h("p", { class: "file-warning small" }, String(info.error)) : null,
  );
}

function conversionLine(conversion) {
  if (!conversion || typeof conversion !== "object") return null;
  const text = {
    queued: "Parquet copy: waiting to start",
    converting: `Parquet copy: ${Math.round(Number(conversion.progress) || 0)}%`,
    done: "Parquet copy ready: queries on this file run faster",
    failed: `Parquet copy failed: ${conversion.error || "unknown error"}`,
  }[conversion.state];
  return text ? h("p", { class: "file-conversion muted small", testid: "file-conversion" }, text) : null;
}

function columnsTable(columns) {
  if (!Array.isArray(columns) || !columns.length) return null;
  const rows = columns.slice(0, MAX_COLUMNS_SHOWN).map((column) =>
    h("tr", {}, h("td", {}, String(column && column.name !== undefined ? column.name : column)), h("td", { class: "dtype" }, String((column && column.dtype) || ""))),
  );
  const more = columns.length - rows.length;
  return h(
    "div",
    { class: "columns-wrap" },
    h("table", { class: "columns" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Column"), h("th", { scope: "col" }, "Type"))), h("tbody", {}, rows)),
    more > 0 ? h("p", { class: "muted small" }, `… and ${more} more columns`) : null,
  );
}

function sheetsList(details) {
  const sheets = Array.isArray(details.sheets) ? details.sheets : [];
  if (!sheets.length) {
    return Array.isArray(details.sheet_names) && details.sheet_names.length
      ? h("p", { class: "small" }, `Sheets: ${details.sheet_names.map(String).join(", ")}`)
      : null;
  }
  return h(
    "ul",
    { class: "sheets small" },
    sheets.map((sheet) => {
      const columns = Array.isArray(sheet.columns) ? sheet.columns.length : sheet.columns;
      const parts = [];
      if (columns !== undefined && columns !== null) parts.push(`${columns} columns`);
      if (typeof sheet.rows === "number") parts.push(`${sheet.rows.toLocaleString()} rows`);
      return h("li", {}, h("strong", {}, String(sheet.name ?? "")), parts.length ? ` — ${parts.join(", ")}` : "");
    }),
  );
}

// ---- picking and dropping ----------------------------------------------------

export function mountUploads() {
  on("loaded", () => uploadFiles(waiting.splice(0)));
  on("auth", () => {
    waiting = [];
  });
  const input = byId("upload-input");
  byId("upload-button").addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    if (input.files && input.files.length) uploadFiles(Array.from(input.files));
    input.value = "";
  });

  const overlay = byId("drop-overlay");
  let depth = 0;
  const carriesFiles = (event) => event.dataTransfer && Array.from(event.dataTransfer.types || []).includes("Files");
  const signedIn = () => !byId("app").hidden;
  const hide = () => {
    depth = 0;
    overlay.hidden = true;
  };
  window.addEventListener("dragenter", (event) => {
    if (!carriesFiles(event) || !signedIn()) return;
    event.preventDefault();
    depth += 1;
    overlay.hidden = false;
  });
  window.addEventListener("dragover", (event) => {
    if (!carriesFiles(event) || !signedIn()) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  });
  window.addEventListener("dragleave", (event) => {
    if (!carriesFiles(event)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0) overlay.hidden = true;
  });
  window.addEventListener("drop", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    hide();
    if (signedIn() && event.dataTransfer.files.length) uploadFiles(Array.from(event.dataTransfer.files));
  });
  window.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !overlay.hidden) hide();
  });
}
