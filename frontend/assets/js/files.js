/**
 * The files panel: the open session's workspace files (uploads and what the
 * code wrote), with sizes and download links. Refreshed when a conversation
 * opens, after each upload and after each run.
 */

import { request } from "./api.js";
import { byId, fileUrl, formatBytes, h } from "./dom.js";
import { emit, on, state } from "./state.js";

const WIDE = window.matchMedia("(min-width: 1100px)");
let app;
let toggle;

/** Load the open session's file list (a session the server has not seen yet has none). */
export async function refreshFiles() {
  const sessionId = state.sessionId;
  const known = state.conversationId || (state.uploads.get(sessionId) || []).some((u) => u.status === "done");
  let files = [];
  if (sessionId && known) {
    try {
      files = await request(`/api/sessions/${encodeURIComponent(sessionId)}/files`);
    } catch {
      files = [];
    }
  }
  if (state.sessionId !== sessionId) return;
  state.files = Array.isArray(files) ? files : [];
  emit("files");
}

function folderOf(path) {
  const slash = path.lastIndexOf("/");
  return slash >= 0 ? path.slice(0, slash + 1) : "";
}

function render() {
  const listEl = byId("files-list");
  const files = [...state.files].sort((a, b) => String(a.path).localeCompare(String(b.path)));
  listEl.replaceChildren(
    ...files.map((file) => {
      const path = String(file.path);
      const name = path.slice(folderOf(path).length);
      return h(
        "li",
        { class: "file-row" },
        h(
          "a",
          { class: "file-link", href: fileUrl(state.sessionId, path), download: name, title: `Download ${path}` },
          h("span", { class: "file-folder" }, folderOf(path)),
          h("span", { class: "file-base" }, name),
        ),
        h("span", { class: "file-size muted small" }, formatBytes(Number(file.size))),
      );
    }),
  );
  byId("files-empty").hidden = files.length > 0;
  toggle.textContent = files.length ? `Files (${files.length})` : "Files";
}

function setOpen(open) {
  app.classList.toggle("files-open", open);
  toggle.setAttribute("aria-expanded", String(open));
  byId("files-backdrop").hidden = !open || WIDE.matches;
}

export function mountFiles() {
  app = byId("app");
  toggle = byId("files-toggle");
  setOpen(WIDE.matches);
  WIDE.addEventListener("change", () => setOpen(WIDE.matches));
  toggle.addEventListener("click", () => setOpen(!app.classList.contains("files-open")));
  byId("files-close").addEventListener("click", () => {
    setOpen(false);
    toggle.focus();
  });
  byId("files-backdrop").addEventListener("click", () => setOpen(false));
  byId("files-refresh").addEventListener("click", () => refreshFiles());
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !WIDE.matches && app.classList.contains("files-open")) setOpen(false);
  });
  on("files", render);
  on("conversation", () => {
    state.files = [];
    render();
    refreshFiles();
  });
  on("uploaded", () => refreshFiles());
  on("run-ended", () => refreshFiles());
  render();
}
