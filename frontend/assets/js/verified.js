/**
 * "Mark verified" under a finished answer whose code ran, in a conversation with a data
 * source attached: its question, code and queries are kept on each attached source it
 * queried, as a worked example for later questions
 * (POST /api/conversations/{id}/messages/{message id}/verified). The server refuses an
 * answer that queried no attached source, in words shown beside the button.
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { hasAttachedSources } from "./session-sources.js";
import { state } from "./state.js";

function ranCode(turn) {
  return turn.tools.some((card) => card.attempts.some((attempt) => attempt.code || attempt.execution));
}

async function markVerified(item, button, redraw) {
  const conversation = encodeURIComponent(state.conversationId || "");
  button.disabled = true;
  try {
    item.verified = await request(`/api/conversations/${conversation}/messages/${item.id}/verified`, { method: "POST" });
    item.verifiedError = "";
  } catch (error) {
    item.verifiedError = error.message;
  }
  redraw();
}

/** The action under a stored, finished answer that ran code (null for any other). */
export function verifiedControl(item, redraw) {
  if (item.kind !== "assistant" || !item.id || item.turn.runState !== "done" || !ranCode(item.turn)) return null;
  if (item.verified) {
    const count = item.verified.length;
    return h(
      "span",
      { class: "verified-mark", title: `Kept as a worked example on ${count} data source${count === 1 ? "" : "s"}`, testid: "verified" },
      "✓ Verified",
    );
  }
  if (!hasAttachedSources()) return null;
  const button = h(
    "button",
    {
      type: "button",
      class: "link-button",
      title: "Keep this answer's queries as a worked example for later questions on its data sources",
      testid: "mark-verified",
    },
    "Mark verified",
  );
  button.addEventListener("click", () => markVerified(item, button, redraw));
  return h(
    "span",
    { class: "verified" },
    button,
    item.verifiedError ? h("span", { class: "verified-error small", role: "alert", testid: "verified-error" }, item.verifiedError) : null,
  );
}
