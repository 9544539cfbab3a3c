/**
 * The agent's steps inside an assistant message: the router's choice, the plan
 * as a checklist, and a collapsible card per tool call with its code, output
 * and files. Plots are drawn by `renderPlots`, below the steps.
 *
 * Every string is set as text. Parts are redrawn only when their `rev` changed;
 * a card keeps its open/closed state and expanded outputs across redraws.
 */

import { chartView } from "./charts.js";
import { codeBlock } from "./code.js";
import { openNamedTables, tableView } from "./table.js";
import { fileUrl, h, isImagePath } from "./dom.js";
import { isAllowedImage } from "./render.js";
import { cardStatus } from "./turn.js";

const OUTPUT_LINES = 30;
const AGENT_NAMES = { chat: "Chat", react: "ReAct", plan_execute: "Plan & Execute", auto: "Auto" };
const STATUS_TEXT = {
  pending: "Pending",
  running: "Running…",
  done: "Done",
  failed: "Failed",
  stopped: "Stopped",
};

export function agentName(type) {
  return AGENT_NAMES[type] || type || "Agent";
}

function routerView(router) {
  return h(
    "div",
    { class: "step step-router", testid: "step-router" },
    h("span", { class: "step-router-label" }, "Agent"),
    h("span", { class: "badge" }, agentName(router.agentType)),
    router.reason ? h("span", { class: "step-router-reason" }, router.reason) : null,
  );
}

/** What was left out to fit the model's context window (or cut by its server). */
function notesView(notes) {
  return h(
    "div",
    { class: `step step-context${notes.cut ? " is-warning" : ""}`, testid: "step-context", role: "note" },
    h("span", { class: "step-router-label" }, "Context"),
    h("span", { class: "step-context-text" }, notes.messages.join(" ")),
  );
}

function planView(plan) {
  const items = plan.steps.map((step, i) =>
    h(
      "li",
      { class: "plan-step", dataset: { status: step.status } },
      h("span", { class: "plan-mark", "aria-hidden": "true" }),
      h(
        "span",
        { class: "plan-text" },
        h("span", { class: "plan-goal" }, `${i + 1}. ${step.goal}`),
        step.tool ? h("span", { class: "plan-tool" }, step.tool) : null,
      ),
      h("span", { class: "visually-hidden" }, ` (${STATUS_TEXT[step.status] || step.status})`),
    ),
  );
  return h(
    "div",
    { class: "step step-plan", testid: "step-plan" },
    h("div", { class: "step-title" }, plan.revised ? "Revised plan" : "Plan"),
    plan.reason ? h("p", { class: "plan-reason muted" }, plan.reason) : null,
    h("ol", { class: "plan-list" }, items),
  );
}

/** Output in a <pre>, the first 30 lines until "Show all". */
function outputView(execution, expanded, onExpand) {
  const stdout = execution.stdout.replace(/\n+$/, "");
  const error = execution.ok ? "" : execution.error.trim();
  // A tool without attempts reports its failure as both output and error: show it once.
  const text = error && !stdout.includes(error) ? [stdout, error].filter(Boolean).join("\n") : stdout;
  const lines = text.split("\n");
  const long = lines.length > OUTPUT_LINES;
  const pre = h(
    "pre",
    { class: `output${execution.ok ? "" : " is-error"}`, testid: "step-output" },
    text ? (long && !expanded ? lines.slice(0, OUTPUT_LINES).join("\n") : text) : "(no output)",
  );
  if (!text) pre.classList.add("is-empty");
  if (!long || expanded) return [pre];
  const button = h("button", { type: "button", class: "button button-ghost button-small show-all" }, `Show all ${lines.length} lines`);
  button.addEventListener("click", () => {
    onExpand();
    pre.textContent = text;
    button.remove();
  });
  return [pre, button];
}

function fileChips(sessionId, files) {
  const others = files.filter((path) => !isImagePath(path));
  if (!others.length || !sessionId) return null;
  return h(
    "div",
    { class: "chips" },
    others.map((path) =>
      h("a", { class: "chip", href: fileUrl(sessionId, path), download: path.split("/").pop() }, h("span", { "aria-hidden": "true" }, "↓ "), path),
    ),
  );
}

function cardView(card, turn, ui, mode) {
  const status = cardStatus(card, turn);
  const many = card.attempts.length > 1;
  const body = h(
    "div",
    { class: "tool-body" },
    card.thought ? h("p", { class: "tool-thought" }, card.thought) : null,
    card.input ? h("div", { class: "tool-input" }, h("span", { class: "label" }, "Input"), h("p", {}, String(card.input))) : null,
  );
  for (const attempt of card.attempts) {
    const runId = attempt.execution && attempt.execution.runId;
    const section = h("section", { class: "attempt", dataset: runId ? { runId } : null });
    if (many && attempt.code === null) section.append(h("div", { class: "attempt-label" }, `Attempt ${attempt.attempt}`));
    if (attempt.code !== null) {
      const title = many ? `Attempt ${attempt.attempt} · python` : "python";
      section.append(codeBlock(attempt.code, { lang: "python", title, mode, testid: "step-code" }));
    }
    if (attempt.execution) {
      const key = `${card.key}:${attempt.attempt}`;
      section.append(...outputView(attempt.execution, ui.expanded.has(key), () => ui.expanded.add(key)));
      section.append(fileChips(turn.sessionId, attempt.execution.files) || "");
    } else if (status === "running") {
      section.append(h("p", { class: "muted small running-note" }, "Running…"));
    }
    body.append(section);
  }
  const title = card.label ? `${card.label} · ${card.tool}` : card.tool;
  const details = h(
    "details",
    { class: "step tool-card", dataset: { status } },
    h(
      "summary",
      {},
      h("span", { class: "tool-title" }, title),
      card.input ? h("span", { class: "tool-preview" }, String(card.input)) : null,
      h("span", { class: `status-badge status-${status}` }, STATUS_TEXT[status]),
    ),
    body,
  );
  details.open = !ui.closed.has(card.key);
  details.addEventListener("toggle", () => {
    if (details.open) ui.closed.delete(card.key);
    else ui.closed.add(card.key);
  });
  return details;
}

/**
 * Draw `turn`'s steps into `container`, reusing the elements of parts whose
 * revision has not changed. `mode`: how code is highlighted ("now"/"later").
 */
export function renderTimeline(container, turn, mode = "now") {
  const view = (container.timelineView ||= { parts: new Map(), closed: new Set(), expanded: new Set() });
  const wanted = [];
  if (turn.router) wanted.push([turn.router, () => routerView(turn.router)]);
  if (turn.notes) wanted.push([turn.notes, () => notesView(turn.notes)]);
  if (turn.plan) wanted.push([turn.plan, () => planView(turn.plan)]);
  for (const card of turn.tools) wanted.push([card, () => cardView(card, turn, view, mode)]);
  const elements = wanted.map(([part, build]) => {
    const cached = view.parts.get(part.key);
    if (cached && cached.rev === part.rev) return cached.el;
    const el = build();
    if (cached) cached.el.replaceWith(el);
    view.parts.set(part.key, { rev: part.rev, el });
    return el;
  });
  elements.forEach((el, i) => {
    if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
  });
  while (container.children.length > elements.length) container.lastElementChild.remove();
  container.hidden = elements.length === 0;
}

/** Plots as inline images (a click enlarges one, see lightbox.js), then live charts (charts.js),
 * then tables (table.js). */
export function renderPlots(container, turn) {
  const shown = new Set(Array.from(container.children, (el) => el.dataset.url));
  const plots = turn.plots.filter((plot) => isAllowedImage(plot.url));
  const charts = turn.charts.filter((chart) => isAllowedImage(chart.pngUrl) && isAllowedImage(chart.specUrl));
  for (const chart of charts) {
    if (!shown.has(chart.specUrl)) container.append(chartView(chart));
  }
  for (const plot of plots) {
    if (shown.has(plot.url)) continue;
    const name = plot.path.split("/").pop() || "plot";
    container.append(
      h(
        "figure",
        { class: "plot", dataset: { url: plot.url } },
        h(
          "button",
          { type: "button", class: "plot-open", dataset: { lightbox: plot.url }, "aria-label": `Enlarge ${name}` },
          h("img", { src: plot.url, alt: `Plot ${name}`, testid: "plot" }),
        ),
        h("figcaption", { class: "muted small" }, name),
      ),
    );
  }
  for (const table of turn.tables) {
    if (!shown.has(table.url)) container.append(tableView(table));
  }
  openNamedTables(container, turn.text);
  container.hidden = plots.length + charts.length + turn.tables.length === 0;
}
