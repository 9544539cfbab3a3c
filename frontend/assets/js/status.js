/**
 * The status line (LLM backend and model, sandbox mode and whether a sandbox runs code,
 * from /api/status once signed in; before that /health, which only says whether the
 * server is up) and short notices for errors that belong to no message.
 */

import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { emit, on, state } from "./state.js";

let loads = 0;
let recheck = 0;
const RECHECK_MS = 2000; // while the server's start-up sandbox check runs

/** Read what the server runs into `state.health` (reloaded on every sign-in and sign-out). */
export async function loadStatus() {
  const load = ++loads;
  let status = null;
  try {
    status = state.token ? await request("/api/status") : await request("/health", { auth: false });
  } catch {
    status = null;
  }
  if (load !== loads) return; // a later load (after signing in or out) has the newer answer
  state.health = status;
  emit("health");
  clearTimeout(recheck);
  if (status?.sandbox?.state === "checking") recheck = setTimeout(loadStatus, RECHECK_MS);
}

/** The sandbox's part of the line: broken (why), still being checked, or its isolation. */
function sandboxItem(sandbox) {
  const title = sandbox.detail ? String(sandbox.detail) : null;
  if (sandbox.state === "broken") {
    return h(
      "span",
      { class: "status-item status-bad", title, testid: "sandbox-status" },
      `Sandbox: broken — ${sandbox.reason || "code cannot run"}`,
    );
  }
  const isolated = Boolean(sandbox.isolated);
  const checking = sandbox.state === "checking";
  return h(
    "span",
    { class: `status-item${isolated ? "" : " status-warn"}`, title, testid: "sandbox-status" },
    `Sandbox: ${sandbox.mode || "unknown"}`,
    h("span", { class: "muted" }, isolated ? " · isolated" : " · not isolated"),
    checking ? h("span", { class: "muted" }, " · checking…") : null,
  );
}

function demoNote() {
  return h(
    "div",
    { class: "demo-note", role: "note" },
    h("strong", {}, "Demo model. "),
    "The built-in SmolLM2-135M runs offline: it proves the plumbing, not the analysis. For real analysis, connect Ollama: run ",
    h("code", {}, "ollama serve"),
    ", then ",
    h("code", {}, "ollama pull qwen2.5-coder:7b"),
    ", and restart with ",
    h("code", {}, "OLLAMA_MODEL=qwen2.5-coder:7b make run"),
    ".",
  );
}

function render() {
  const line = byId("status-line");
  const health = state.health;
  if (!health) {
    line.replaceChildren(h("span", { class: "status-item status-bad" }, "The server is not reachable."));
    return;
  }
  if (!health.llm) {
    line.replaceChildren(h("span", { class: "status-item" }, "The server is up."));
    return;
  }
  const llm = health.llm;
  const parts = [
    h(
      "span",
      { class: "status-item" },
      h("span", { class: "status-dot status-ok", "aria-hidden": "true" }),
      `LLM: ${llm.backend || "unknown"}`,
      llm.model ? h("span", { class: "muted" }, ` · ${llm.model}`) : null,
    ),
    sandboxItem(health.sandbox || {}),
  ];
  line.replaceChildren(h("div", { class: "status-items" }, parts), llm.backend === "embedded" ? demoNote() : "");
}

let noticeTimer = 0;

/** A short notice at the top of the page (errors with no message to attach to). */
export function notify(message) {
  let box = byId("notice");
  if (!box) {
    box = h("div", { id: "notice", class: "notice", role: "alert" });
    document.body.append(box);
  }
  box.replaceChildren(
    h("span", {}, message),
    h("button", { type: "button", class: "button button-ghost button-small", "aria-label": "Dismiss", onclick: () => box.remove() }, "×"),
  );
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => box.remove(), 8000);
}

export function mountStatus() {
  on("health", render);
  on("auth", loadStatus);
}
