/**
 * A data source's catalog in the Data dialog: its tables, each with its columns (type,
 * key, what a foreign key references, sample values), and a note on each table and
 * column, edited in place. The owner's note counts at once; anyone else's is proposed,
 * and the owner sees the proposal under the note with an Accept button.
 *
 * Names, samples and notes come from the database or from users: all set as text.
 */

import { h } from "./dom.js";

const OPEN_UP_TO = 5; // more tables than this start folded

/** The note the owner accepted on the source itself (target ""). */
export function sourceNote(source) {
  const found = source.notes.find((note) => note.target === "" && note.status === "accepted");
  return found ? found.note : "";
}

function proposedOn(source, target) {
  const found = source.notes.find((note) => note.target === target && note.status === "proposed");
  return found ? found.note : "";
}

/** A note's input and its Save (owner) or Propose button; `label` names what it is on. */
export function noteEditor(source, target, note, label) {
  const owned = source.owned;
  const proposed = owned ? proposedOn(source, target) : "";
  return h(
    "div",
    { class: "note", dataset: { scope: "note", target }, testid: "note" },
    h(
      "div",
      { class: "note-row" },
      h("input", {
        type: "text",
        class: "note-input",
        value: note,
        maxlength: "4000",
        placeholder: owned ? "Add a note for the agents" : "Propose a note",
        "aria-label": `Note on ${label}`,
        testid: "note-input",
      }),
      h(
        "button",
        {
          type: "button",
          class: "button button-ghost button-small",
          "aria-label": `${owned ? "Save" : "Propose"} the note on ${label}`,
          dataset: { action: "note" },
          testid: "note-save",
        },
        owned ? "Save" : "Propose",
      ),
    ),
    proposed
      ? h(
          "div",
          { class: "note-proposed", testid: "note-proposed" },
          h("span", { class: "muted small" }, "Proposed:"),
          h("span", { class: "note-proposed-text", testid: "note-proposed-text" }, proposed),
          h(
            "button",
            {
              type: "button",
              class: "button button-secondary button-small",
              "aria-label": `Accept the note proposed on ${label}`,
              dataset: { action: "accept" },
              testid: "note-accept",
            },
            "Accept",
          ),
        )
      : null,
  );
}

function rowsText(rows) {
  // PostgreSQL estimates -1 for a table it has not analysed yet: no estimate either.
  return typeof rows === "number" && rows >= 0 ? `≈ ${rows.toLocaleString("en-US")} rows` : "rows unknown";
}

function columnRow(source, table, column) {
  const target = `${table.name}.${column.name}`;
  const samples = Array.isArray(column.samples) ? column.samples.map(String) : [];
  return h(
    "tr",
    { testid: "catalog-column", dataset: { name: String(column.name) } },
    h("th", { scope: "row" }, h("code", {}, String(column.name))),
    h("td", { class: "dtype", testid: "data-column-type" }, String(column.type)),
    h("td", { testid: "data-column-key" }, String(column.key || "")),
    h("td", { testid: "data-column-references" }, column.references ? h("code", {}, String(column.references)) : ""),
    h("td", { class: "data-samples", title: samples.join(", ") || null, testid: "data-column-samples" }, samples.join(", ")),
    h("td", { class: "data-note-cell" }, noteEditor(source, target, String(column.note || ""), target)),
  );
}

function tableView(source, table, open) {
  const name = String(table.name);
  const columns = Array.isArray(table.columns) ? table.columns : [];
  const header = ["Column", "Type", "Key", "References", "Samples", "Note"];
  return h(
    "details",
    { class: "catalog-table", open, testid: "catalog-table", dataset: { name } },
    h(
      "summary",
      { class: "catalog-table-summary" },
      h("code", { class: "catalog-table-name" }, name),
      h("span", { class: "muted small" }, [String(table.kind), rowsText(table.rows), `${columns.length} columns`].join(" · ")),
    ),
    noteEditor(source, name, String(table.note || ""), name),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "users-table data-columns" },
        h("thead", {}, h("tr", {}, header.map((text) => h("th", { scope: "col" }, text)))),
        h("tbody", {}, columns.map((column) => columnRow(source, table, column))),
      ),
    ),
  );
}

/** Proposals on a target the catalog no longer has (a table dropped since): still to accept. */
function strayProposals(source) {
  if (!source.owned) return null;
  const targets = new Set([""]);
  for (const table of source.catalog) {
    targets.add(table.name);
    for (const column of table.columns) targets.add(`${table.name}.${column.name}`);
  }
  const stray = source.notes.filter((note) => note.status === "proposed" && !targets.has(note.target));
  if (!stray.length) return null;
  return h(
    "div",
    { class: "data-stray" },
    h("p", { class: "muted small" }, "Proposed on what the catalog no longer has:"),
    stray.map((note) => noteEditor(source, note.target, "", note.target)),
  );
}

export function catalogView(source) {
  const tables = Array.isArray(source.catalog) ? source.catalog : [];
  return h(
    "section",
    { class: "data-section", testid: "data-catalog" },
    h("h4", { class: "data-section-title" }, `Tables (${tables.length})`),
    tables.length
      ? tables.map((table) => tableView(source, table, tables.length <= OPEN_UP_TO))
      : h("p", { class: "muted small" }, "No tables: the account may read none. Refresh catalog reads it again."),
    strayProposals(source),
  );
}
