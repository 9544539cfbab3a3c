/**
 * The Evaluations dialog: your question sets (the starter set, or one imported in
 * InfiAgent-DABench's format: questions and labels jsonl and the tables they name),
 * and a new run of a set on a model with an agent. The runs, their results and two
 * compared are eval-runs.js's. Sets and runs are their owner's alone (/api/evals).
 */

import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { loadRuns, mountEvalRuns, resetRuns, runStarted, stopFollowing } from "./eval-runs.js";
import { describeProfile } from "./models.js";
import { on, state } from "./state.js";

const SOURCES = { starter: "starter", dabench: "DABench" };

let dialog;
let sets = [];
let opened = 0; // bumped each time the dialog opens: a slow answer for an earlier opening is dropped

function show(id, message) {
  const box = byId(id);
  box.textContent = message;
  box.hidden = !message;
}

const tellSets = (error, done = "") => {
  show("eval-sets-error", error);
  show("eval-sets-done", done);
};

/** "10 questions · easy 5 · hard 5". */
function describeSet(set) {
  const kinds = Object.entries(set.kinds || {}).map(([kind, count]) => `${kind || "(no type)"} ${count}`);
  const count = `${set.question_count} question${set.question_count === 1 ? "" : "s"}`;
  return [count, ...kinds].join(" · ");
}

function setItem(set) {
  const name = String(set.name);
  return h(
    "li",
    { class: "record", testid: "eval-set-item", dataset: { id: set.id } },
    h(
      "div",
      { class: "record-main" },
      h("span", {}, h("span", { class: "record-name" }, name), h("span", { class: "badge" }, SOURCES[set.source] || set.source)),
      h("span", { class: "muted small", testid: "eval-set-count" }, describeSet(set)),
    ),
    h(
      "button",
      {
        type: "button",
        class: "button button-ghost button-small record-danger",
        "aria-label": `Delete the set ${name}`,
        testid: "eval-set-delete",
        dataset: { action: "delete" },
      },
      "Delete",
    ),
  );
}

function renderSets() {
  byId("eval-set-list").replaceChildren(...sets.map(setItem));
  byId("eval-set-empty").hidden = sets.length > 0;
  const select = byId("eval-run-set");
  const wanted = select.value;
  select.replaceChildren(...sets.map((set) => h("option", { value: set.id }, `${set.name} (${set.question_count})`)));
  if (sets.some((set) => set.id === wanted)) select.value = wanted;
  byId("eval-run-submit").disabled = sets.length < 1;
}

async function loadSets() {
  const mine = opened;
  let listed;
  try {
    listed = await request("/api/evals/sets");
  } catch (error) {
    if (mine === opened) tellSets(error.message);
    return;
  }
  if (mine !== opened) return;
  sets = Array.isArray(listed) ? listed : [];
  renderSets();
}

/** The server's models, the first chosen (its default); none listed: the server's default. */
async function loadModels() {
  const mine = opened;
  let models = [];
  try {
    models = (await request("/api/models"))?.data || [];
  } catch {
    models = [];
  }
  if (mine !== opened) return;
  byId("eval-run-model").replaceChildren(
    ...models.map((model) => h("option", { value: model.id, title: describeProfile(model.profile) }, model.id)),
  );
}

async function addStarter(event) {
  const button = event.currentTarget;
  tellSets("");
  button.disabled = true;
  button.textContent = "Adding…";
  try {
    const added = await request("/api/evals/sets/starter", { method: "POST" });
    tellSets("", `Added “${added.name}”: ${describeSet(added)}.`);
  } catch (error) {
    tellSets(error.message);
  } finally {
    button.disabled = false;
    button.textContent = "Add starter set";
  }
  await loadSets();
}

async function importSet(event) {
  event.preventDefault();
  const form = event.currentTarget;
  const questions = byId("eval-import-questions").files[0];
  const labels = byId("eval-import-labels").files[0];
  const tables = [...byId("eval-import-tables").files];
  tellSets("");
  if (!questions || !labels || !tables.length) {
    tellSets("Choose the questions file, the labels file and the tables the questions name.");
    return;
  }
  const body = new FormData();
  const name = byId("eval-import-name").value.trim();
  if (name) body.append("name", name);
  body.append("questions", questions);
  body.append("labels", labels);
  for (const table of tables) body.append("tables", table);
  const submit = form.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const added = await request("/api/evals/sets", { method: "POST", body });
    form.reset();
    tellSets("", `Imported “${added.name}”: ${describeSet(added)}.`);
  } catch (error) {
    tellSets(error.message);
  } finally {
    submit.disabled = false;
  }
  await loadSets();
}

async function deleteSet(event) {
  const button = event.target.closest("button[data-action=delete]");
  if (!button) return;
  const id = button.closest("li").dataset.id;
  const set = sets.find((s) => s.id === id);
  if (!set) return;
  if (!window.confirm(`Delete the set “${set.name}” with its runs and their conversations?`)) return;
  tellSets("");
  try {
    await request(`/api/evals/sets/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (error) {
    if (error.status !== 404) tellSets(error.message);
  }
  await Promise.all([loadSets(), loadRuns()]);
}

async function startRun(event) {
  event.preventDefault();
  show("eval-run-error", "");
  const setId = byId("eval-run-set").value;
  if (!setId) {
    show("eval-run-error", "Add or import a set first.");
    return;
  }
  const submit = byId("eval-run-submit");
  submit.disabled = true;
  try {
    const body = { set_id: setId, model: byId("eval-run-model").value || "", agent_type: byId("eval-run-agent").value };
    runStarted(await request("/api/evals/runs", { method: "POST", body }));
  } catch (error) {
    show("eval-run-error", error.message);
  } finally {
    submit.disabled = sets.length < 1;
  }
}

function open() {
  opened += 1;
  sets = [];
  tellSets("");
  show("eval-run-error", "");
  byId("eval-set-list").replaceChildren();
  byId("eval-set-empty").hidden = true; // until the list is read
  resetRuns();
  dialog.showModal();
  loadSets();
  loadModels();
  loadRuns();
}

export function mountEvals() {
  dialog = byId("evals-dialog");
  byId("evals-open").addEventListener("click", open);
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", stopFollowing);
  byId("eval-starter").addEventListener("click", addStarter);
  byId("eval-import-form").addEventListener("submit", importSet);
  byId("eval-set-list").addEventListener("click", deleteSet);
  byId("eval-run-form").addEventListener("submit", startRun);
  mountEvalRuns();
  on("auth", () => {
    if (!state.user && dialog.open) dialog.close();
  });
}
