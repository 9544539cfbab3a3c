/**
 * The Evaluations dialog's runs: the list, newest first, with each one's progress and
 * score, Stop while it goes and Delete; the results of the one chosen; and two runs
 * compared. While a run goes it is read again every second (GET /api/evals/runs/{id}),
 * and no longer once it ends or the dialog closes.
 */

import { request } from "./api.js";
import { loadConversations, openConversation } from "./conversations.js";
import { byId, h } from "./dom.js";
import { comparison, isFinished, progressText, runName, runResults, scoreText } from "./eval-results.js";

const POLL_MS = 1000;

let runs = [];
let shownId = null; // the run whose results are shown
let drawn = ""; // what they show: redrawn only when that changed
let compareKey = "";
let timer = 0;
let generation = 0; // bumped when the dialog opens or closes: answers that come later are dropped

function show(id, message) {
  const box = byId(id);
  box.textContent = message;
  box.hidden = !message;
}

const tell = (message) => show("eval-runs-error", message);
const runUrl = (id, tail = "") => `/api/evals/runs/${encodeURIComponent(id)}${tail}`;
const when = (run) => new Date(run.created_at * 1000).toLocaleString();

function action(name, text, label, run, extra = "") {
  return h(
    "button",
    {
      type: "button",
      class: `button button-ghost button-small ${extra}`,
      "aria-label": label,
      testid: `eval-run-${name}`,
      dataset: { action: name, focusKey: `${name}:${run.id}` },
    },
    text,
  );
}

function runItem(run) {
  const going = !isFinished(run);
  const name = runName(run);
  return h(
    "li",
    { class: `record eval-run${run.id === shownId ? " is-shown" : ""}`, testid: "eval-run-item", dataset: { id: run.id } },
    h(
      "div",
      { class: "record-main" },
      h("span", { class: "record-name" }, name),
      h("span", { class: "muted small" }, `Started ${when(run)}`),
      h("span", { class: "small", testid: "eval-run-progress" }, progressText(run)),
      h("span", { class: "small", testid: "eval-run-score" }, scoreText(run.score)),
      going ? h("progress", { max: String(run.total || 1), value: String(run.done), "aria-label": `Questions asked of ${name}` }) : null,
    ),
    h(
      "div",
      { class: "row-actions" },
      action("show", "Results", `Results of ${name}`, run),
      going ? action("stop", "Stop", `Stop ${name}`, run) : null,
      action("delete", "Delete", `Delete ${name}`, run, "record-danger"),
    ),
  );
}

/** The compare form's choices: the newest two, again whenever a run comes or goes. */
function fillCompare() {
  const key = runs.map((run) => run.id).join(",");
  if (key === compareKey) return;
  compareKey = key;
  const options = () => runs.map((run) => h("option", { value: run.id }, `${runName(run)} · ${when(run)}`));
  byId("eval-compare-first").replaceChildren(...options());
  byId("eval-compare-second").replaceChildren(...options());
  if (runs.length) {
    byId("eval-compare-first").value = runs[Math.min(1, runs.length - 1)].id;
    byId("eval-compare-second").value = runs[0].id;
  }
  byId("eval-compare-submit").disabled = runs.length < 2;
}

function renderList() {
  const list = byId("eval-run-list");
  const focused = list.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
  list.replaceChildren(...runs.map(runItem));
  byId("eval-run-empty").hidden = runs.length > 0;
  if (focused) list.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`)?.focus();
  fillCompare();
}

/** Close the dialog and open a question's conversation in the chat. */
async function openChat(conversationId) {
  byId("evals-dialog").close();
  await openConversation(conversationId);
  await loadConversations(); // the sidebar lists it too
}

function drawResults(run) {
  const key = `${run.id}:${run.status}:${run.done}:${run.current}:${(run.results || []).length}`;
  if (key === drawn) return;
  drawn = key;
  const body = byId("eval-results-body");
  const opened = new Set([...body.querySelectorAll("details[open]")].map((d) => d.closest("tr")?.dataset.question));
  body.replaceChildren(...runResults(run, openChat).filter(Boolean));
  for (const row of body.querySelectorAll("tr[data-question]")) {
    if (opened.has(row.dataset.question)) row.querySelector("details").open = true;
  }
  byId("eval-results").hidden = false;
}

function hideResults() {
  shownId = null;
  drawn = "";
  byId("eval-results-body").replaceChildren();
  byId("eval-results").hidden = true;
}

function replace(fresh) {
  runs = runs.map((run) => (run.id === fresh.id ? fresh : run));
}

function forget(id) {
  runs = runs.filter((run) => run.id !== id);
  if (shownId === id) hideResults();
  byId("eval-comparison").replaceChildren();
}

function schedule() {
  clearTimeout(timer);
  timer = 0;
  if (byId("evals-dialog").open && runs.some((run) => !isFinished(run))) timer = setTimeout(poll, POLL_MS);
}

/** Progress from the light list; the shown run's results again only when they changed. */
async function poll() {
  const mine = generation;
  let listed;
  try {
    listed = await request("/api/evals/runs");
  } catch (error) {
    if (mine !== generation) return;
    tell(error.message);
    schedule();
    return;
  }
  if (mine !== generation) return;
  const before = new Map(runs.map((run) => [run.id, run]));
  runs = Array.isArray(listed) ? listed : [];
  const shown = runs.find((run) => run.id === shownId);
  if (shownId && !shown) hideResults();
  const was = shown && before.get(shown.id);
  if (shown && (!was || was.done !== shown.done || was.status !== shown.status)) {
    let fresh;
    try {
      fresh = await request(runUrl(shown.id));
    } catch (error) {
      if (mine === generation) tell(error.message);
    }
    if (mine !== generation) return;
    if (fresh) {
      replace(fresh);
      drawResults(fresh);
    }
  } else if (shown && was) {
    replace({ ...was, ...shown }); // the results already drawn stay with it
  }
  renderList();
  schedule();
}

async function showRun(id) {
  const mine = generation;
  shownId = id;
  drawn = "";
  let run;
  try {
    run = await request(runUrl(id));
  } catch (error) {
    if (mine === generation) tell(error.message);
    return;
  }
  if (mine !== generation || shownId !== id) return;
  replace(run);
  drawResults(run);
  renderList();
  byId("eval-results").scrollIntoView({ block: "nearest" });
  schedule();
}

async function act(button) {
  const id = button.closest("li").dataset.id;
  const run = runs.find((r) => r.id === id);
  if (!run) return;
  tell("");
  const name = button.dataset.action;
  if (name === "show") {
    await showRun(id);
  } else if (name === "stop") {
    button.disabled = true;
    try {
      replace(await request(runUrl(id, "/cancel"), { method: "POST" }));
    } catch (error) {
      tell(error.message);
    }
    renderList();
    if (shownId === id) await showRun(id);
  } else if (name === "delete") {
    const question = `Delete the run “${runName(run)}” with its results and its questions' conversations?`;
    if (!window.confirm(question)) return;
    try {
      await request(runUrl(id), { method: "DELETE" });
    } catch (error) {
      if (error.status !== 404) {
        tell(error.message);
        return;
      }
    }
    forget(id);
    renderList();
    await loadConversations();
  }
}

async function compare(event) {
  event.preventDefault();
  const first = byId("eval-compare-first").value;
  const second = byId("eval-compare-second").value;
  show("eval-compare-error", "");
  if (!first || !second || first === second) {
    show("eval-compare-error", "Choose two different runs.");
    return;
  }
  try {
    const compared = await request(runUrl(first, `/compare/${encodeURIComponent(second)}`));
    byId("eval-comparison").replaceChildren(...comparison(compared));
  } catch (error) {
    show("eval-compare-error", error.message);
  }
}

/** Your runs, again; a run still going is followed. */
export async function loadRuns() {
  const mine = generation;
  let listed;
  try {
    listed = await request("/api/evals/runs");
  } catch (error) {
    if (mine === generation) tell(error.message);
    return;
  }
  if (mine !== generation) return;
  runs = Array.isArray(listed) ? listed : [];
  if (shownId && !runs.some((run) => run.id === shownId)) hideResults();
  renderList();
  schedule();
}

/** A run just started (POST /api/evals/runs): listed first, its results shown and followed. */
export function runStarted(run) {
  runs = [run, ...runs.filter((r) => r.id !== run.id)];
  shownId = run.id;
  drawn = "";
  drawResults(run);
  renderList();
  schedule();
}

/** Stop following runs; answers still on their way are dropped. */
export function stopFollowing() {
  generation += 1;
  clearTimeout(timer);
  timer = 0;
}

/** A fresh start as the dialog opens (it may be another user's page by now). */
export function resetRuns() {
  stopFollowing();
  runs = [];
  compareKey = "";
  hideResults();
  tell("");
  show("eval-compare-error", "");
  byId("eval-comparison").replaceChildren();
  byId("eval-run-list").replaceChildren();
  byId("eval-run-empty").hidden = true; // until the list is read
  byId("eval-compare-first").replaceChildren();
  byId("eval-compare-second").replaceChildren();
  byId("eval-compare-submit").disabled = true;
}

export function mountEvalRuns() {
  byId("eval-run-list").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) act(button);
  });
  byId("eval-compare-form").addEventListener("submit", compare);
}
