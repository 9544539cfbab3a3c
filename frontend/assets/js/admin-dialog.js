/**
 * What the admins' dialogs (Users, Groups, MCP servers) share: a button shown to admins only
 * that opens the dialog and loads it, a close button, and a line each for an error and
 * for what was done. The server refuses their calls to anyone else; this only keeps
 * the button hidden.
 */

import { byId } from "./dom.js";
import { on, state } from "./state.js";

function show(id, message) {
  const box = byId(id);
  box.textContent = message;
  box.hidden = !message;
}

/**
 * Wire the dialog `prefix`-dialog, opened by `prefix`-open, with its messages in
 * `prefix`-error and `prefix`-done; `load` runs each time it opens. Returns
 * `tell(error, done)`, which shows both (an empty one hides its line).
 */
export function mountAdminDialog(prefix, load) {
  const dialog = byId(`${prefix}-dialog`);
  const open = byId(`${prefix}-open`);
  const tell = (error, done = "") => {
    show(`${prefix}-error`, error);
    show(`${prefix}-done`, done);
  };
  open.addEventListener("click", () => {
    tell("");
    dialog.showModal();
    load();
  });
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
  on("auth", () => {
    const isAdmin = Boolean(state.user && state.user.is_admin);
    open.hidden = !isAdmin;
    if (!isAdmin && dialog.open) dialog.close();
  });
  return tell;
}
