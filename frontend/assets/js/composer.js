/**
 * The composer: a growing textarea (Enter sends, Shift+Enter breaks the line,
 * nothing is sent mid-IME composition), the agent picker, and Send, which
 * becomes Stop while a run is going.
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

function autosize() {
  textarea.style.height = "auto";
  textarea.style.height = `${Math.min(textarea.scrollHeight, MAX_HEIGHT)}px`;
}

function submit() {
  if (state.running || state.loading) return;
  const text = textarea.value;
  if (!text.trim()) return;
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
  renderRun();
}
