/**
 * In a data source's view (Data dialog): a box for one read-only query, its rows drawn as
 * a table; and the answers verified on the source (their question, answer and queries,
 * kept as worked examples for later questions), each with Withdraw.
 *
 * Values and the database's messages are set as text.
 */

import { request } from "./api.js";
import { h } from "./dom.js";

const DEFAULT_ROWS = 100;
const MAX_ROWS = 10000;
const ANSWER_SHOWN = 400; // characters of a verified answer shown in the list

export function queryBox(source) {
  return h(
    "section",
    { class: "data-section", dataset: { scope: "query" }, testid: "data-query" },
    h("h4", { class: "data-section-title" }, "Query"),
    h(
      "label",
      { class: "field" },
      h("span", { class: "field-label" }, `SQL on ${source.name} (read-only)`),
      h("textarea", { class: "data-sql", rows: "4", spellcheck: "false", placeholder: "SELECT …", dataset: { sql: "" }, testid: "data-sql" }),
    ),
    h(
      "div",
      { class: "data-query-row" },
      h(
        "label",
        { class: "data-max-rows" },
        "At most ",
        h("input", {
          type: "number",
          min: "1",
          max: String(MAX_ROWS),
          value: String(DEFAULT_ROWS),
          "aria-label": "At most this many rows",
          dataset: { maxRows: "" },
          testid: "data-max-rows",
        }),
        " rows",
      ),
      h("button", { type: "button", class: "button button-secondary button-small", dataset: { action: "query" }, testid: "data-run-query" }, "Run query"),
      h("span", { class: "muted small" }, "or Ctrl+Enter"),
    ),
    h("p", { class: "form-error", role: "alert", hidden: true, dataset: { queryError: "" }, testid: "data-query-error" }),
    h("div", { class: "data-result", dataset: { queryResult: "" }, testid: "data-query-result" }),
  );
}

function cell(value) {
  if (value === null || value === undefined) return h("td", { class: "muted" }, "null");
  if (typeof value === "number") return h("td", { class: "num" }, String(value));
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return h("td", { title: text.length > 40 ? text : null }, text);
}

function resultView(result, maxRows) {
  const rows = Array.isArray(result.rows) ? result.rows : [];
  const count = `${rows.length.toLocaleString("en-US")} row${rows.length === 1 ? "" : "s"}`;
  const said = result.truncated ? `${count}: the first ${maxRows.toLocaleString("en-US")}; there are more.` : `${count}.`;
  return [
    h("p", { class: "muted small data-result-count", testid: "data-query-count" }, said),
    h(
      "div",
      { class: "table-scroll" },
      h(
        "table",
        { class: "data-grid" },
        h("thead", {}, h("tr", {}, result.columns.map((name) => h("th", { scope: "col" }, String(name))))),
        h("tbody", {}, rows.map((values) => h("tr", { testid: "data-query-row" }, values.map(cell)))),
      ),
    ),
  ];
}

/** Run the box's query on `source`; the rows, or the database's message, are shown under it. */
export async function runQuery(scope, source) {
  const error = scope.querySelector("[data-query-error]");
  const out = scope.querySelector("[data-query-result]");
  const sql = scope.querySelector("[data-sql]").value.trim();
  const fail = (message) => {
    error.textContent = message;
    error.hidden = !message;
  };
  fail("");
  if (!sql) {
    fail("Write a query first.");
    return;
  }
  const asked = Number.parseInt(scope.querySelector("[data-max-rows]").value, 10);
  const maxRows = Math.min(Math.max(Number.isFinite(asked) ? asked : DEFAULT_ROWS, 1), MAX_ROWS);
  out.setAttribute("aria-busy", "true");
  try {
    const path = `/api/data-sources/${encodeURIComponent(source.id)}/query`;
    const result = await request(path, { method: "POST", body: { sql, max_rows: maxRows } });
    out.replaceChildren(...resultView(result, maxRows));
  } catch (failure) {
    out.replaceChildren();
    fail(failure.message);
  } finally {
    out.removeAttribute("aria-busy");
  }
}

function clip(text, length) {
  const value = String(text || "");
  return value.length > length ? `${value.slice(0, length)}…` : value;
}

function answerRow(answer) {
  const question = String(answer.question || "(no question)");
  const when = new Date(answer.created_at * 1000).toLocaleString();
  return h(
    "li",
    { class: "record data-answer", dataset: { scope: "answer", answer: answer.id }, testid: "data-verified-answer" },
    h(
      "div",
      { class: "record-main" },
      h("span", { class: "data-answer-question", testid: "data-verified-question" }, question),
      h("span", { class: "data-answer-text" }, clip(answer.answer, ANSWER_SHOWN)),
      (answer.queries || []).map((sql) => h("code", { class: "data-answer-query", testid: "data-verified-query" }, String(sql))),
      h("span", { class: "muted small" }, `Verified by ${answer.verified_by || "someone"}, ${when}`),
    ),
    h(
      "button",
      {
        type: "button",
        class: "button button-ghost button-small record-danger",
        "aria-label": `Withdraw the verified answer to ${clip(question, 80)}`,
        dataset: { action: "withdraw" },
        testid: "data-withdraw",
      },
      "Withdraw",
    ),
  );
}

export function verifiedList(source, answers) {
  return h(
    "section",
    { class: "data-section", testid: "data-verified" },
    h("h4", { class: "data-section-title" }, "Verified answers"),
    h(
      "p",
      { class: "muted small" },
      "Answers marked verified under a conversation's answer: later questions on this source get their queries as examples.",
      source.owned ? "" : " You see those you verified.",
    ),
    answers.length
      ? h("ul", { class: "record-list" }, answers.map(answerRow))
      : h("p", { class: "muted small", testid: "data-verified-empty" }, "None yet."),
  );
}
