/**
 * What the admins' dialogs (Users, Groups, MCP servers) share: a button shown to admins only
 * that opens the dialog and loads it, a close button, and a line each for an error and
 * for what was done. The server refuses their calls to anyone else; this only keeps
 * the button hidden.
 */

import { byId, h } from "./dom.js";
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

/** A small button that says what it does to whom; `data-action` names the action. */
export function actionButton(prefix, action, text, label, extra = "") {
  return h(
    "button",
    {
      type: "button",
      class: `button button-ghost button-small ${extra}`,
      "aria-label": label,
      dataset: { action },
      testid: `${prefix}-${action}`,
    },
    text,
  );
}

/**
 * The click handler of a list's action buttons: `act(item, action, button)` does the action
 * on the `itemSelector` element around the button and says what was done (null: nothing).
 * The list is drawn again with `load` (unless `keepsList(action)`), and only then is it
 * told: a click meanwhile would land on a row about to go.
 */
export function onActions(itemSelector, { act, load, tell, keepsList = () => false }) {
  return async (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const action = button.dataset.action;
    button.disabled = true;
    try {
      const done = await act(button.closest(itemSelector), action, button);
      if (done === null) return;
      if (!keepsList(action)) await load();
      tell("", done);
    } catch (error) {
      tell(error.message);
    } finally {
      button.disabled = false;
    }
  };
}
