/**
 * An evaluation run drawn: its progress and score ("7/10 right (70%, 95% CI 40–89%)"),
 * the score per question type, a row per question (the answer's values against the
 * expected ones, calls, tokens, time, its conversation, and its answer and code on
 * demand), and two runs side by side. Every string from the server becomes text.
 */

import { codeBlock } from "./code.js";
import { h } from "./dom.js";
import { agentName } from "./timeline.js";
import { number, seconds } from "./usage.js";

const ENDED = new Set(["completed", "cancelled", "failed", "interrupted"]);
const STATUS = {
  queued: "Waiting to start",
  running: "Running",
  completed: "Finished",
  cancelled: "Stopped",
  failed: "Failed",
  interrupted: "Interrupted (the server restarted)",
};

export const isFinished = (run) => ENDED.has(run.status);

const percent = (value) => `${Math.round(Number(value || 0) * 100)}%`;

/** "7/10 right (70%, 95% CI 40–89%)": the interval is Wilson's, from the server. */
export function scoreText(score) {
  if (!score || !score.answered) return "No answers yet";
  const interval = `95% CI ${Math.round(Number(score.low || 0) * 100)}–${percent(score.high)}`;
  return `${score.right}/${score.answered} right (${percent(score.accuracy)}, ${interval})`;
}

/** "ten · scripted · ReAct". */
export function runName(run) {
  return `${run.set_name} · ${run.model || "default model"} · ${agentName(run.agent_type)}`;
}

/** "Running · 3/10 asked · asking question 4". */
export function progressText(run) {
  const parts = [STATUS[run.status] || String(run.status), `${run.done}/${run.total} asked`];
  if (run.status === "running" && run.current) parts.push(`asking question ${run.current}`);
  return parts.join(" · ");
}

export function verdict(result) {
  if (!result) return h("span", { class: "muted", testid: "eval-verdict" }, "not asked");
  if (result.stopped) return h("span", { class: "muted", testid: "eval-verdict" }, "Stopped");
  const right = Boolean(result.correct);
  const mark = `eval-verdict ${right ? "eval-right" : "eval-wrong"}`;
  return h("span", { class: mark, testid: "eval-verdict" }, right ? "Right" : "Wrong");
}

/** Each expected value against the answer's, then any the answer gave unasked. */
function values(result) {
  const expected = result.expected || {};
  const extracted = result.extracted || {};
  const lines = Object.entries(expected).map(([name, want]) => {
    const got = Object.hasOwn(extracted, name) ? String(extracted[name]) : "none";
    const mark = result.values && result.values[name] ? "eval-right" : "eval-wrong";
    return h("li", { class: mark }, `${name}: ${got} (expected ${want})`);
  });
  for (const [name, got] of Object.entries(extracted)) {
    if (!Object.hasOwn(expected, name)) lines.push(h("li", { class: "muted" }, `${name}: ${got} (not asked for)`));
  }
  if (result.error) lines.push(h("li", { class: "eval-wrong" }, `Error: ${result.error}`));
  return h("ul", { class: "eval-values", testid: "eval-values" }, lines);
}

/** The question, the answer and the code, built when first opened. */
function more(result) {
  const code = Array.isArray(result.code) ? result.code : [];
  const details = h(
    "details",
    { class: "eval-more", testid: "eval-more" },
    h("summary", { class: "link-button" }, code.length ? `Answer and code (${code.length})` : "Answer"),
  );
  details.addEventListener(
    "toggle",
    () => {
      details.append(
        h(
          "div",
          { class: "eval-more-body" },
          h("p", { class: "eval-question" }, result.question),
          h("p", { class: "eval-answer", testid: "eval-answer" }, result.answer || "(no answer)"),
          code.map((text, at) => codeBlock(text, { lang: "python", title: `python · run ${at + 1}`, testid: "eval-code" })),
        ),
      );
    },
    { once: true },
  );
  return details;
}

function resultRow(result, openConversation) {
  const id = String(result.question_id);
  const open = result.conversation_id
    ? h(
        "button",
        {
          type: "button",
          class: "link-button",
          "aria-label": `Open the conversation of question ${id}`,
          testid: "eval-open-conversation",
          onclick: () => openConversation(result.conversation_id),
        },
        "Open",
      )
    : h("span", { class: "muted" }, "—");
  return h(
    "tr",
    { testid: "eval-result", dataset: { question: id } },
    h("th", { scope: "row", title: result.question }, id),
    h("td", {}, result.kind),
    h("td", {}, verdict(result)),
    h("td", {}, values(result)),
    h("td", { class: "num" }, number(result.llm_calls)),
    h("td", { class: "num" }, number(result.tokens)),
    h("td", { class: "num" }, seconds(result.seconds)),
    h("td", {}, open),
    h("td", {}, more(result)),
  );
}

/** A table that scrolls sideways in its own box when wider than the dialog (a phone). */
function table(label, headings, rows, testid) {
  return h(
    "div",
    { class: "table-wrap eval-table-wrap", tabindex: "0", role: "region", "aria-label": label },
    h(
      "table",
      { class: "users-table eval-table", testid },
      h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col" }, text)))),
      h("tbody", {}, rows),
    ),
  );
}

function kindScores(byKind) {
  if (!byKind || !byKind.length) return null;
  return h(
    "ul",
    { class: "eval-kinds", "aria-label": "Score per question type" },
    byKind.map((kind) =>
      h(
        "li",
        { testid: "eval-kind", dataset: { kind: kind.kind } },
        h("span", { class: "eval-kind-name" }, kind.kind || "(no type)"),
        ` ${kind.right}/${kind.answered} right · ${number(kind.llm_calls)} calls · ${number(kind.tokens)} tokens · ${seconds(kind.seconds)}`,
      ),
    ),
  );
}

/** A run's heading, progress, score and per-type scores, and its table of questions. */
export function runResults(run, openConversation) {
  const results = Array.isArray(run.results) ? run.results : [];
  const running = !isFinished(run);
  return [
    h("p", { class: "eval-run-name", testid: "eval-results-name" }, runName(run)),
    h(
      "p",
      { class: "eval-progress", testid: "eval-results-progress" },
      running ? h("span", { class: "spinner spinner-small", "aria-hidden": "true" }) : null,
      progressText(run),
    ),
    running ? h("progress", { max: String(run.total || 1), value: String(run.done), "aria-label": "Questions asked" }) : null,
    run.error ? h("p", { class: "form-error" }, run.error) : null,
    h("p", { class: "eval-score", testid: "eval-score" }, scoreText(run.score)),
    kindScores(run.by_kind),
    results.length
      ? table(
          "Each question's result",
          ["Question", "Type", "Result", "Values (expected)", "Calls", "Tokens", "Time", "Conversation", "Details"],
          results.map((result) => resultRow(result, openConversation)),
          "eval-result-table",
        )
      : null,
  ];
}

/** Two runs, question by question: right or wrong in each, and both scores. */
export function comparison(compared) {
  const side = (label, run, testid) =>
    h("p", { class: "eval-compare-side", testid }, h("strong", {}, `${label}: `), `${runName(run)} — ${scoreText(run.score)}`);
  const rows = compared.questions.map((pair) => {
    const scored = (result) => result && !result.stopped;
    const differs = scored(pair.first) && scored(pair.second) && pair.first.correct !== pair.second.correct;
    return h(
      "tr",
      { testid: "eval-pair", class: differs ? "eval-differs" : null, dataset: { question: String(pair.question_id) } },
      h("th", { scope: "row", title: pair.question }, String(pair.question_id)),
      h("td", {}, pair.kind),
      h("td", { testid: "eval-pair-first" }, verdict(pair.first)),
      h("td", { testid: "eval-pair-second" }, verdict(pair.second)),
    );
  });
  return [
    side("First", compared.first, "eval-compare-first-score"),
    side("Second", compared.second, "eval-compare-second-score"),
    table("The two runs, question by question", ["Question", "Type", "First", "Second"], rows, "eval-compare-table"),
  ];
}
