/**
 * Branches: edit an earlier message, regenerate an answer, and move between the
 * branches that made ("‹ 2 / 3 ›"), as in ChatGPT. Each branch keeps its own data:
 * the server rolls the session's variables back to match (POST /api/runs with
 * `parent_message_id`), so the view only has to say which message a turn follows.
 *
 * Stored items carry their message's `id`, `parentId` and `siblings`; items
 * drawn in this page get them once their run ends (`refreshIds`).
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { feedbackControls } from "./feedback.js";
import { emit, on, state } from "./state.js";
import { verifiedControl } from "./verified.js";

const ROOT = 0; // parent_message_id of a new first message

/** The controls under a message: edit or regenerate, the branch switch, thumbs and Mark verified. */
export function branchControls(item) {
  if (!item.id) return null;
  const busy = Boolean(state.running) || state.loading;
  const actions = [];
  if (item.kind === "user") {
    actions.push(button("Edit", "Edit this message and send it again", () => emit("edit-message", item), busy, "edit-message"));
  } else if (item.kind === "assistant" && item.turn.userText && item.turn.runState !== "running") {
    actions.push(button("Regenerate", "Write this answer again", () => emit("regenerate", item), busy, "regenerate"));
  }
  const thumbs = feedbackControls(item, () => emit("item-meta"));
  if (thumbs) actions.push(thumbs);
  const verified = verifiedControl(item, () => emit("item-meta"));
  if (verified) actions.push(verified);
  const switcher = branchSwitch(item, busy);
  if (!actions.length && !switcher) return null;
  return h("div", { class: "message-actions", testid: "message-actions" }, switcher, ...actions);
}

function button(label, title, onclick, disabled, testid) {
  return h("button", { type: "button", class: "link-button", title, onclick, disabled, testid }, label);
}

function branchSwitch(item, busy) {
  const siblings = Array.isArray(item.siblings) ? item.siblings : [];
  if (siblings.length < 2) return null;
  const at = siblings.indexOf(item.id);
  const go = (step) => () => emit("switch-branch", siblings[at + step]);
  return h(
    "span",
    { class: "branch-switch", testid: "branch-switch", role: "group", "aria-label": "Versions of this message" },
    h("button", { type: "button", class: "link-button", "aria-label": "Previous version", disabled: busy || at <= 0, onclick: go(-1), testid: "branch-previous" }, "‹"),
    h("span", { class: "branch-position", testid: "branch-position" }, `${at + 1} / ${siblings.length}`),
    h("button", { type: "button", class: "link-button", "aria-label": "Next version", disabled: busy || at >= siblings.length - 1, onclick: go(1), testid: "branch-next" }, "›"),
  );
}

/** The editor that replaces a user message's bubble: Enter sends, Escape cancels. */
export function messageEditor(item, onSend, onCancel) {
  const input = h("textarea", { class: "edit-input", rows: "3", "aria-label": "Edit your message", testid: "edit-input" });
  input.value = item.text;
  const send = () => {
    const text = input.value.trim();
    if (text) onSend(text);
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      send();
    } else if (event.key === "Escape") onCancel();
  });
  const editor = h(
    "div",
    { class: "message-editor", testid: "message-editor" },
    input,
    h(
      "div",
      { class: "message-editor-actions" },
      h("button", { type: "button", class: "button button-secondary button-small", onclick: onCancel }, "Cancel"),
      h("button", { type: "button", class: "button button-small", onclick: send, testid: "edit-send" }, "Send"),
    ),
  );
  requestAnimationFrame(() => input.focus());
  return editor;
}

/** Where a message edited as `item` goes: after its parent, or first. */
export function editParent(item) {
  return item.parentId || ROOT;
}

/** Give the items drawn in this page their stored ids, once their run has ended. */
async function refreshIds() {
  const id = state.conversationId;
  if (!id || state.running) return;
  const viewId = state.viewId;
  let detail;
  try {
    detail = await request(`/api/conversations/${encodeURIComponent(id)}`);
  } catch {
    return; // the ids come with the next open
  }
  if (state.viewId !== viewId || state.running) return;
  const items = state.items.filter((item) => item.kind !== "upload");
  const messages = Array.isArray(detail.messages) ? detail.messages : [];
  if (items.length !== messages.length) return;
  items.forEach((item, index) => {
    if (item.kind !== (messages[index].role === "user" ? "user" : "assistant")) return;
    setIds(item, messages[index]);
  });
  state.leafId = detail.leaf_id || null;
  emit("item-meta");
}

export function setIds(item, message) {
  item.id = message.id;
  item.parentId = message.parent_id;
  item.siblings = message.siblings;
  item.feedback = message.feedback || null;
}

export function mountBranches() {
  on("run-ended", refreshIds);
}
