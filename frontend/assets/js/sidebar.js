/**
 * The sidebar: conversations newest first (the open one highlighted), New chat,
 * delete, the signed-in user and Sign out. Below 768 px it slides in over the
 * chat from a toggle button and closes on Escape, a click outside or a choice.
 */

import { deleteConversation, newChat, openConversation } from "./conversations.js";
import { byId, h } from "./dom.js";
import { on, state } from "./state.js";

const NARROW = window.matchMedia("(max-width: 767px)");
let app;
let toggle;

function setOpen(open) {
  app.classList.toggle("sidebar-open", open);
  toggle.setAttribute("aria-expanded", String(open));
  toggle.setAttribute("aria-label", open ? "Hide conversations" : "Show conversations");
  byId("sidebar-backdrop").hidden = !open;
}

function closeIfNarrow() {
  if (NARROW.matches) setOpen(false);
}

function titleOf(conversation) {
  return (conversation && conversation.title && String(conversation.title).trim()) || "New chat";
}

function render() {
  const list = byId("conversation-list");
  const focused = document.activeElement && list.contains(document.activeElement)
    ? document.activeElement.dataset.focusKey
    : null;
  const items = state.conversations.map((conversation) => {
    const active = conversation.id === state.conversationId;
    const title = titleOf(conversation);
    return h(
      "li",
      {
        class: `conversation-item${active ? " is-active" : ""}`,
        testid: "conversation-item",
        "aria-current": active ? "true" : null,
        dataset: { id: conversation.id },
      },
      h(
        "button",
        {
          type: "button",
          class: "conversation-open",
          "aria-current": active ? "page" : null,
          title,
          dataset: { action: "open", focusKey: `open:${conversation.id}` },
        },
        conversation.active_run_id ? h("span", { class: "spinner spinner-small", "aria-label": "running" }) : null,
        h("span", { class: "conversation-title" }, title),
      ),
      h(
        "button",
        {
          type: "button",
          class: "conversation-delete",
          "aria-label": `Delete conversation ${title}`,
          title: "Delete",
          testid: "delete-conversation",
          dataset: { action: "delete", focusKey: `delete:${conversation.id}` },
        },
        h("span", { "aria-hidden": "true" }, "×"),
      ),
    );
  });
  list.replaceChildren(...items);
  byId("conversation-empty").hidden = items.length > 0;
  if (focused) {
    const again = list.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
  const current = state.conversations.find((c) => c.id === state.conversationId);
  byId("conversation-title").textContent = state.conversationId ? titleOf(current) : "New chat";
}

export function mountSidebar({ onLogout }) {
  app = byId("app");
  toggle = byId("sidebar-toggle");
  setOpen(false);
  toggle.addEventListener("click", () => setOpen(!app.classList.contains("sidebar-open")));
  byId("sidebar-backdrop").addEventListener("click", () => setOpen(false));
  NARROW.addEventListener("change", () => setOpen(false));
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && app.classList.contains("sidebar-open")) {
      setOpen(false);
      toggle.focus();
    }
  });
  byId("new-chat").addEventListener("click", () => {
    newChat();
    closeIfNarrow();
    byId("composer").focus();
  });
  byId("logout").addEventListener("click", onLogout);
  byId("conversation-list").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button) return;
    const id = button.closest("li").dataset.id;
    if (button.dataset.action === "delete") deleteConversation(id);
    else {
      if (id !== state.conversationId) openConversation(id);
      closeIfNarrow();
    }
  });
  on("conversations", render);
  on("auth", () => {
    byId("user-name").textContent = state.user ? String(state.user.username || "") : "";
  });
}
