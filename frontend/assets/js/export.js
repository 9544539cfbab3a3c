/**
 * The top bar's Export menu: the open conversation's session as a notebook or a
 * script (`GET /api/sessions/{id}/export`, which the sign-in cookie authorises).
 * Shown once the conversation is stored: a new chat has nothing to export yet.
 */

import { byId } from "./dom.js";
import { on, state } from "./state.js";

let menu;
let toggle;
let options;

function setOpen(open) {
  options.hidden = !open;
  toggle.setAttribute("aria-expanded", String(open));
}

function refresh() {
  const sessionId = state.conversationId ? state.sessionId : null;
  menu.hidden = !sessionId;
  setOpen(false);
  if (!sessionId) return;
  // The branch on view: a conversation with branches exports the one being read.
  const leaf = state.leafId ? `&leaf=${encodeURIComponent(state.leafId)}` : "";
  const base = `/api/sessions/${encodeURIComponent(sessionId)}/export?format=`;
  byId("export-ipynb").href = `${base}ipynb${leaf}`;
  byId("export-py").href = `${base}py${leaf}`;
}

export function mountExport() {
  menu = byId("export-menu");
  toggle = byId("export-toggle");
  options = byId("export-options");
  toggle.addEventListener("click", () => {
    setOpen(options.hidden);
    if (!options.hidden) options.querySelector("a").focus();
  });
  options.addEventListener("click", () => setOpen(false));
  options.addEventListener("keydown", (event) => {
    const items = Array.from(options.querySelectorAll("a"));
    const at = items.indexOf(document.activeElement);
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      items[(at + step + items.length) % items.length].focus();
    } else if (event.key === "Escape") {
      setOpen(false);
      toggle.focus();
    }
  });
  document.addEventListener("click", (event) => {
    if (!menu.contains(event.target)) setOpen(false);
  });
  for (const topic of ["conversation", "conversation-created", "conversations", "auth", "item-meta"]) {
    on(topic, refresh);
  }
  refresh();
}
