/**
 * The composer: a growing textarea (Enter sends, Shift+Enter breaks the line,
 * nothing is sent mid-IME composition), the agent picker, and Send, which
 * becomes Stop while a run is going. A message sent while the conversation is
 * still loading waits in the box, said so, and goes once it is shown.
 */

import { byId } from "./dom.js";
import { send, stop } from "./runs.js";
import { on, state, STORAGE, storage } from "./state.js";

const AGENTS = ["auto", "chat", "react", "plan_execute"];
const MAX_HEIGHT = 240; // px; the textarea scrolls beyond

let textarea;
let select;
let sendButton;
let stopButton;
let hint;
let waiting = false; // Enter was pressed while the view loaded
const HINT = "Enter to send · Shift+Enter for a new line";

function autosize() {
  textarea.style.height = "auto";
  textarea.style.height = `${Math.min(textarea.scrollHeight, MAX_HEIGHT)}px`;
}

function wait(yes) {
  waiting = yes;
  hint.textContent = yes ? "Sends once the conversation has loaded…" : HINT;
}

function submit() {
  if (state.running) return;
  const text = textarea.value;
  if (!text.trim()) return;
  if (state.loading) {
    wait(true);
    return;
  }
  wait(false);
  textarea.value = "";
  autosize();
  send(text, select.value);
}

function renderRun() {
  const running = Boolean(state.running);
  sendButton.hidden = running;
  stopButton.hidden = !running;
  if (!running && document.activeElement === document.body) textarea.focus();
}

export function mountComposer() {
  textarea = byId("composer");
  select = byId("agent-select");
  sendButton = byId("send");
  stopButton = byId("stop");
  hint = byId("composer-hint");

  const saved = storage.get(STORAGE.agent);
  if (AGENTS.includes(saved)) select.value = saved;
  select.addEventListener("change", () => storage.set(STORAGE.agent, select.value));

  byId("composer-form").addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  textarea.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
    event.preventDefault();
    submit();
  });
  textarea.addEventListener("input", autosize);
  stopButton.addEventListener("click", () => {
    stop();
    textarea.focus();
  });
  on("run", renderRun);
  on("loaded", () => {
    if (!waiting) return;
    wait(false);
    submit();
  });
  on("auth", () => wait(false));
  renderRun();
}
