/**
 * The Files panel's "Data sources": a checkbox for each source you see, checked when the
 * open conversation has attached it. A toggle attaches exactly the checked ones
 * (PUT /api/sessions/{id}/data-sources).
 *
 * A new chat has a session id before the server knows it (as for uploads): attaching
 * starts its conversation, which is then adopted as the open one ("session-started").
 */

import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { emit, on, state } from "./state.js";

let visible = []; // the sources you see (GET /api/data-sources)
let attached = new Set(); // the ids the open session attached
let busy = false;

/** Whether the open conversation has attached a data source (verified.js asks). */
export const hasAttachedSources = () => attached.size > 0;

const sessionPath = (sessionId) => `/api/sessions/${encodeURIComponent(sessionId)}/data-sources`;

function tell(error, done = "") {
  const box = byId("session-sources-error");
  box.textContent = error;
  box.hidden = !error;
  byId("session-sources-done").textContent = done;
}

function render() {
  const list = byId("session-sources-list");
  const disabled = busy || state.loading || !state.sessionId;
  list.replaceChildren(
    ...visible.map((source) => {
      const name = String(source.name);
      return h(
        "li",
        { class: "session-source", testid: "session-source", dataset: { id: source.id, name } },
        h(
          "label",
          { class: "check session-source-check" },
          h("input", {
            type: "checkbox",
            value: source.id,
            checked: attached.has(source.id),
            disabled,
            "aria-label": `Attach ${name} to this conversation`,
            testid: "session-source-check",
          }),
          h("span", { class: "session-source-name" }, name),
          h("span", { class: "muted small" }, source.owned ? String(source.kind) : `${source.kind} · by ${source.owner}`),
        ),
      );
    }),
  );
  byId("session-sources-empty").hidden = visible.length > 0;
}

/** Load the sources you see and those the open session attached (a new chat: none yet). */
export async function refreshSessionSources() {
  const sessionId = state.sessionId;
  const known = Boolean(state.conversationId && sessionId);
  let sources = [];
  let chosen = [];
  try {
    [sources, chosen] = await Promise.all([request("/api/data-sources"), known ? request(sessionPath(sessionId)) : []]);
  } catch (error) {
    if (state.sessionId === sessionId && error.status !== 401) tell(error.message);
    return;
  }
  if (state.sessionId !== sessionId) return;
  // A source attached but no longer shared with you still shows, so it can be taken off.
  const seen = new Set(sources.map((source) => source.id));
  visible = [...sources, ...chosen.filter((source) => !seen.has(source.id))];
  attached = new Set(chosen.map((source) => source.id));
  render();
  emit("item-meta"); // "Mark verified" is offered where a source is attached
}

async function onToggle(event) {
  const input = event.target.closest("input[type=checkbox]");
  if (!input || busy) return;
  const sessionId = state.sessionId;
  const ids = Array.from(byId("session-sources-list").querySelectorAll("input:checked"), (box) => box.value);
  const name = input.closest("li").dataset.name;
  const before = attached;
  attached = new Set(ids); // drawn as checked while the server answers
  busy = true;
  tell("");
  render();
  try {
    const chosen = await request(sessionPath(sessionId), { method: "PUT", body: { source_ids: ids } });
    if (state.sessionId === sessionId) {
      attached = new Set(chosen.map((source) => source.id));
      tell("", `${name} ${attached.has(input.value) ? "is attached to" : "is taken off"} this conversation.`);
    }
    if (!state.conversationId) emit("session-started", sessionId);
  } catch (error) {
    if (state.sessionId === sessionId) attached = before;
    tell(error.message);
  } finally {
    busy = false;
    render();
    emit("item-meta");
  }
}

export function mountSessionSources() {
  byId("session-sources-list").addEventListener("change", onToggle);
  on("conversation", () => {
    attached = new Set();
    tell("");
    render();
    emit("item-meta");
    refreshSessionSources();
  });
  on("loaded", render);
  on("data-sources", refreshSessionSources);
  on("auth", () => {
    if (state.user) return;
    visible = [];
    attached = new Set();
    render();
  });
  byId("files-refresh").addEventListener("click", () => refreshSessionSources());
}
