/**
 * The app's state and a tiny publish/subscribe.
 *
 * Data flows one way: actions (login, runs, uploads, conversations) change
 * `state` and `emit` a topic; views subscribe with `on` and redraw from state.
 *
 * Topics: "auth", "health", "conversations", "conversation" (a whole view to
 * draw), "item" (one appended to the open view), "turn" (an assistant turn
 * changed), "run" (a run started or ended in the open view), "loaded" (the view being fetched
 * is shown, or could not be), "upload",
 * "uploaded", "files", "run-ended", "conversation-created", "item-meta" (stored ids
 * reached the view's items), "edit-message", "regenerate", "switch-branch", "data-sources"
 * (the sources you see changed), "session-started" (the server started the open session's
 * conversation before its first message).
 */

export const STORAGE = {
  token: "pda.token",
  conversation: "pda.conversation",
  agent: "pda.agent",
  model: "pda.model",
};

export const state = {
  token: null,
  user: null,
  health: null,
  conversations: [],
  /** The open conversation: null until its first upload or message creates it. */
  conversationId: null,
  sessionId: null,
  /** Bumped whenever another conversation is opened; stale async results check it. */
  viewId: 0,
  /** True while a conversation (or, on sign-in, the list) is being fetched: nothing is sent until it is shown. */
  loading: false,
  /** The open view's items: {kind: "user", text} | {kind: "assistant", turn} | {kind: "upload", upload}. */
  items: [],
  /** Uploads made in this page, by session id, so a reopened view shows them again. */
  uploads: new Map(),
  /** The last message of the branch on view (a new message follows it); null: the latest. */
  leafId: null,
  /** The run the composer can stop: {turn, runId}, or null. */
  running: null,
  files: [],
};

const listeners = new Map();

export function on(topic, listener) {
  if (!listeners.has(topic)) listeners.set(topic, new Set());
  listeners.get(topic).add(listener);
  return () => listeners.get(topic).delete(listener);
}

export function emit(topic, detail) {
  for (const listener of listeners.get(topic) || []) listener(detail);
}

/** localStorage that never throws (private modes, disabled storage). */
export const storage = {
  get(key) {
    try {
      return localStorage.getItem(key);
    } catch {
      return null;
    }
  },
  set(key, value) {
    try {
      if (value === null || value === undefined) localStorage.removeItem(key);
      else localStorage.setItem(key, value);
    } catch {
      /* storage unavailable: the app still works for this page's life */
    }
  },
};
