/**
 * Conversations: list them, open one (redrawing stored answers from their
 * steps, and attaching to a run still going), start a new one, delete one.
 * The open conversation's id is remembered, so a reload reopens it.
 */

import { request } from "./api.js";
import { newSessionId } from "./dom.js";
import { setIds } from "./branches.js";
import { attach, detachAll } from "./runs.js";
import { emit, on, state, STORAGE, storage } from "./state.js";
import { createTurn, turnFromMessage } from "./turn.js";
import { notify } from "./status.js";

export async function loadConversations() {
  try {
    const conversations = await request("/api/conversations");
    state.conversations = Array.isArray(conversations) ? conversations : [];
  } catch (error) {
    if (error.status !== 401) notify(`Could not load your conversations: ${error.message}`);
  }
  emit("conversations");
}

function remember(id) {
  state.conversationId = id;
  storage.set(STORAGE.conversation, id);
}

/** The view is shown (or could not be): what waited for it may go ("loaded"). Views
 * draw with `state.loading` already false, or their buttons would stay disabled. */
function loaded() {
  state.loading = false;
  emit("loaded");
}

export function newChat() {
  detachAll();
  state.viewId += 1;
  remember(null);
  state.sessionId = newSessionId();
  state.items = [];
  state.leafId = null;
  state.loading = false;
  emit("conversation");
  emit("conversations");
  loaded();
}

/** The view's items: stored messages, a live turn, and this page's uploads in place. */
function itemsOf(detail) {
  const messages = Array.isArray(detail.messages) ? [...detail.messages] : [];
  // The running turn's answer is stored only as it ends; if it just was, the replay redraws it.
  if (detail.active_run_id && messages.length && messages[messages.length - 1].role === "assistant") {
    messages.pop();
  }
  const items = [];
  let lastUser = "";
  for (const message of messages) {
    let item = null;
    if (message.role === "user") {
      lastUser = String(message.content || "");
      item = { kind: "user", text: lastUser };
    } else if (message.role === "assistant") {
      item = { kind: "assistant", turn: turnFromMessage(message, lastUser, detail.session_id) };
    }
    if (item) {
      setIds(item, message);
      items.push(item);
    }
  }
  let live = null;
  if (detail.active_run_id) {
    live = createTurn({ userText: lastUser, sessionId: detail.session_id });
    items.push({ kind: "assistant", turn: live });
  }
  const uploads = state.uploads.get(detail.session_id) || [];
  for (const upload of [...uploads].reverse()) {
    let position = 0;
    let seen = 0;
    while (position < items.length && seen < upload.afterCount) {
      if (items[position].kind !== "upload") seen += 1;
      position += 1;
    }
    items.splice(position, 0, { kind: "upload", upload });
  }
  return { items, live };
}

/** Open conversation `id`, on the branch through message `leaf` (default: its latest). */
export async function openConversation(id, leaf = null) {
  detachAll();
  state.viewId += 1;
  const viewId = state.viewId;
  remember(id);
  state.loading = true;
  emit("conversations"); // the highlight moves at once
  let detail;
  try {
    const branch = leaf ? `?leaf=${encodeURIComponent(leaf)}` : "";
    detail = await request(`/api/conversations/${encodeURIComponent(id)}${branch}`);
  } catch (error) {
    if (state.viewId !== viewId) return;
    if (error.status === 404) {
      state.conversations = state.conversations.filter((c) => c.id !== id);
      newChat();
      return;
    }
    if (error.status !== 401) notify(`Could not open the conversation: ${error.message}`);
    loaded();
    return;
  }
  if (state.viewId !== viewId) return;
  state.sessionId = detail.session_id;
  const { items, live } = itemsOf(detail);
  state.items = items;
  state.leafId = live ? null : detail.leaf_id || null;
  state.loading = false;
  emit("conversation");
  if (live) attach(live, detail.active_run_id);
  loaded();
}

export async function deleteConversation(id) {
  const conversation = state.conversations.find((c) => c.id === id);
  const title = (conversation && conversation.title) || "this conversation";
  if (!window.confirm(`Delete “${title}”? This cannot be undone.`)) return;
  try {
    await request(`/api/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (error) {
    if (error.status !== 404) {
      if (error.status !== 401) notify(`Could not delete the conversation: ${error.message}`);
      return;
    }
  }
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (state.conversationId === id) newChat();
  else emit("conversations");
}

/**
 * On sign-in: the list, then the conversation open last time (or a new one). Until one
 * is shown nothing is sent: a message sent into the view this replaces would vanish.
 */
export async function restoreConversations() {
  state.loading = true;
  const viewId = state.viewId;
  await loadConversations();
  if (state.viewId !== viewId) return; // a conversation was opened (or a new chat begun) meanwhile
  const last = storage.get(STORAGE.conversation);
  if (last && state.conversations.some((c) => c.id === last)) await openConversation(last);
  else newChat();
}

/** A conversation the server started for the open session (an upload, attaching a data
 * source): find it by session, so it is the open one. */
async function adoptConversation(sessionId) {
  if (state.conversationId) return;
  await loadConversations();
  if (state.conversationId || sessionId !== state.sessionId) return;
  const made = state.conversations.find((c) => c.session_id === state.sessionId);
  if (made) {
    remember(made.id);
    emit("conversations");
  }
}

export function mountConversations() {
  on("conversation-created", loadConversations);
  on("run-ended", loadConversations);
  on("uploaded", (upload) => adoptConversation(upload.sessionId));
  on("session-started", adoptConversation);
  on("switch-branch", (leaf) => {
    if (state.conversationId && !state.running) openConversation(state.conversationId, leaf);
  });
  on("run-lost", () => {
    if (state.conversationId) openConversation(state.conversationId);
  });
}
