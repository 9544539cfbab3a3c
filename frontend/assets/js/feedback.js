/**
 * Thumbs on an answer: up or down (pressed again: taken back), and after a thumb down a
 * short note on what was wrong. PUT / DELETE
 * /api/conversations/{id}/messages/{message id}/feedback; the answer's stored feedback
 * comes with the conversation (`item.feedback`).
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { state } from "./state.js";
import { notify } from "./status.js";

function url(item) {
  const conversation = encodeURIComponent(state.conversationId || "");
  return `/api/conversations/${conversation}/messages/${item.id}/feedback`;
}

async function rate(item, rating, note, redraw) {
  const taken = item.feedback && item.feedback.rating === rating && note === null;
  try {
    if (taken) {
      await request(url(item), { method: "DELETE" });
      item.feedback = null;
    } else {
      item.feedback = await request(url(item), { method: "PUT", body: { rating, note: note || "" } });
    }
  } catch (error) {
    notify(`Your feedback was not saved: ${error.message}`);
  }
  redraw();
}

function noteForm(item, redraw) {
  const input = h("input", {
    type: "text",
    class: "feedback-note",
    maxlength: "2000",
    placeholder: "What was wrong? (optional)",
    "aria-label": "What was wrong with this answer",
    testid: "feedback-note",
  });
  input.value = item.feedback?.note || "";
  const save = () => rate(item, "down", input.value.trim(), redraw);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      save();
    }
  });
  return h(
    "span",
    { class: "feedback-form" },
    input,
    h("button", { type: "button", class: "link-button", onclick: save, testid: "feedback-save" }, "Save"),
  );
}

/** The thumbs under a stored answer (null for one still running or not stored yet). */
export function feedbackControls(item, redraw) {
  if (item.kind !== "assistant" || !item.id || item.turn.runState === "running") return null;
  const rating = item.feedback?.rating || null;
  const thumb = (value, label, glyph) =>
    h(
      "button",
      {
        type: "button",
        class: `link-button thumb${rating === value ? " thumb-on" : ""}`,
        "aria-label": label,
        "aria-pressed": String(rating === value),
        title: label,
        onclick: () => rate(item, value, null, redraw),
        testid: `thumb-${value}`,
      },
      glyph,
    );
  return h(
    "span",
    { class: "feedback", role: "group", "aria-label": "Rate this answer", testid: "feedback" },
    thumb("up", "Good answer", "👍"),
    thumb("down", "Bad answer", "👎"),
    rating === "down" ? noteForm(item, redraw) : null,
    item.feedback?.note ? h("span", { class: "muted small", testid: "feedback-saved-note" }, item.feedback.note) : null,
  );
}
