/**
 * A table a run showed (its `table` event): the first rows at once, from the event;
 * then the server pages, sorts and filters it (`GET <url>/rows`), so the browser only
 * ever holds one page. Column types and a small summary come from `GET <url>`, once
 * the table is on screen. Every string is set as text.
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { whenVisible } from "./visible.js";

const PAGE = 20; // the event's preview is the first page
const XLSX_MAX_ROWS = 1048576; // a sheet's, header included
const TABLE_URL = /^\/api\/sessions\/[^/?#]+\/tables\/[0-9a-f]{12}_[1-9]$/;
// "> 5", "<=2020-01-01", "=paris", "!=lyon"; anything else means "contains".
const OPERATORS = [
  [">=", "ge"],
  ["<=", "le"],
  ["!=", "ne"],
  [">", "gt"],
  ["<", "lt"],
  ["=", "eq"],
];
const number = new Intl.NumberFormat();
const rounded = new Intl.NumberFormat(undefined, { maximumSignificantDigits: 4 });

export function isTableUrl(url) {
  return TABLE_URL.test(String(url));
}

/** The turn's `table` event, as the turn keeps it. */
export function tableFromEvent(event) {
  const columns = Array.isArray(event.columns) ? event.columns : [];
  return {
    url: String(event.url),
    name: String(event.name ?? ""),
    source: String(event.source ?? ""),
    rows: Number(event.rows) || 0,
    columns: columns.map((c) => ({ name: String(c.name), type: String(c.type) })),
    preview: Array.isArray(event.preview) ? event.preview : [],
  };
}

function parseFilter(column, text) {
  const trimmed = text.trim();
  if (!trimmed) return null;
  for (const [prefix, op] of OPERATORS) {
    if (trimmed.startsWith(prefix)) return { column, op, value: trimmed.slice(prefix.length).trim() };
  }
  return { column, op: "contains", value: trimmed };
}

function cellText(value) {
  if (value === null || value === undefined) return "";
  return String(value);
}

function summaryText(column) {
  const parts = [];
  if (column.min !== null && column.max !== null) parts.push(`${cellText(column.min)} – ${cellText(column.max)}`);
  if (column.mean !== null) parts.push(`mean ${rounded.format(column.mean)}`);
  if (column.distinct !== null) parts.push(`~${number.format(column.distinct)} distinct`);
  if (column.nulls) parts.push(`${number.format(column.nulls)} empty`);
  return parts.join(" · ");
}

/**
 * The table's element; it loads what it needs by itself. A DataFrame the run only saved
 * (a variable) starts folded, until the answer names it (`openNamedTables`).
 */
export function tableView(table) {
  const section = tableSection(table);
  if (table.source !== "variable") return section;
  const rows = `${number.format(table.rows)} rows × ${table.columns.length} columns`;
  return h(
    "details",
    { class: "table-details", dataset: { url: table.url, name: table.name }, testid: "table-details" },
    h("summary", {}, h("span", { class: "table-caption-text" }, `Table ${table.name || ""}`), h("span", { class: "muted small" }, ` · ${rows}`)),
    section,
  );
}

/** Unfold the variables' tables that `text` (the answer) names. */
export function openNamedTables(container, text) {
  if (!text) return;
  for (const details of container.querySelectorAll("details.table-details:not([open])")) {
    const name = details.dataset.name || "";
    const named = new RegExp(`(^|[^\\w])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}($|[^\\w])`);
    if (name && named.test(text)) details.open = true;
  }
}

function tableSection(table) {
  const state = { offset: 0, sort: null, desc: false, filters: new Map(), total: table.rows, rows: table.preview, busy: 0 };
  const title = table.name || "Table";
  const caption = h("span", { class: "table-caption-text" });
  const status = h("p", { class: "table-status muted small", role: "status", "aria-live": "polite", testid: "table-status" });
  const head = h("thead");
  const body = h("tbody");
  const grid = h("table", { class: "data-grid", testid: "data-table" }, h("caption", { class: "visually-hidden" }, title), head, body);
  const pageInput = h("input", { type: "number", min: "1", class: "table-page-input", "aria-label": "Page", testid: "table-page" });
  const pageLabel = h("label", { class: "small" }, "Page ");
  const pages = h("span", { class: "muted small" });
  const buttons = {
    first: h("button", { type: "button", class: "button button-ghost button-small", "aria-label": "First page" }, "«"),
    prev: h("button", { type: "button", class: "button button-ghost button-small", "aria-label": "Previous page" }, "‹"),
    next: h("button", { type: "button", class: "button button-ghost button-small", "aria-label": "Next page", testid: "table-next" }, "›"),
    last: h("button", { type: "button", class: "button button-ghost button-small", "aria-label": "Last page" }, "»"),
  };
  const downloads = h("span", { class: "table-downloads" });
  const summaries = [];
  const sortButtons = [];

  function query() {
    const params = new URLSearchParams();
    if (state.sort !== null) {
      params.set("sort", state.sort);
      params.set("order", state.desc ? "desc" : "asc");
    }
    const filters = Array.from(state.filters.values());
    if (filters.length) params.set("filters", JSON.stringify(filters));
    return params;
  }

  function drawRows() {
    body.replaceChildren(
      ...state.rows.map((row) => h("tr", {}, row.map((value) => h("td", { class: typeof value === "number" ? "num" : null }, cellText(value))))),
    );
    const lastPage = Math.max(1, Math.ceil(state.total / PAGE));
    const page = Math.floor(state.offset / PAGE) + 1;
    pageInput.max = String(lastPage);
    pageInput.value = String(page);
    pages.textContent = `of ${number.format(lastPage)}`;
    const first = state.total ? state.offset + 1 : 0;
    const last = Math.min(state.offset + state.rows.length, state.total);
    status.textContent = state.total
      ? `Rows ${number.format(first)}–${number.format(last)} of ${number.format(state.total)}`
      : "No rows match.";
    buttons.first.disabled = buttons.prev.disabled = page <= 1;
    buttons.next.disabled = buttons.last.disabled = page >= lastPage;
    drawDownloads();
  }

  function drawDownloads() {
    const params = query().toString();
    const link = (format, label) =>
      h("a", { class: "chip", href: `${table.url}/download?${params ? `${params}&` : ""}format=${format}`, download: "", testid: `table-download-${format}` }, label);
    const tooBig = state.total + 1 > XLSX_MAX_ROWS;
    downloads.replaceChildren(
      h("span", { class: "muted small" }, "Download"),
      link("csv", "CSV"),
      tooBig
        ? h("span", { class: "chip is-disabled", title: "An XLSX sheet holds at most 1,048,576 rows: filter first, or take CSV or Parquet." }, "XLSX (too many rows)")
        : link("xlsx", "XLSX"),
      h("a", { class: "chip", href: `${table.url}/download?format=parquet`, download: "", title: "The whole table, unfiltered" }, "Parquet"),
    );
  }

  let loading = null; // the page being fetched: a newer one aborts it, and the server stops its query
  async function load(offset) {
    const ticket = (state.busy += 1);
    const params = query();
    params.set("offset", String(Math.max(0, offset)));
    params.set("limit", String(PAGE));
    grid.setAttribute("aria-busy", "true");
    if (loading) loading.abort();
    const controller = (loading = new AbortController());
    try {
      const page = await request(`${table.url}/rows?${params}`, { signal: controller.signal });
      if (ticket !== state.busy) return; // a later request won
      Object.assign(state, { offset: page.offset, total: page.total, rows: page.rows });
      drawRows();
    } catch (error) {
      if (ticket === state.busy) status.textContent = `Could not load rows: ${error.message || error}`;
    } finally {
      if (ticket === state.busy) grid.removeAttribute("aria-busy");
    }
  }

  function goTo(page) {
    const lastPage = Math.max(1, Math.ceil(state.total / PAGE));
    const wanted = Math.min(Math.max(1, Math.floor(page) || 1), lastPage);
    load((wanted - 1) * PAGE);
  }

  function sortBy(index) {
    const name = table.columns[index].name;
    if (state.sort !== name) Object.assign(state, { sort: name, desc: false });
    else if (!state.desc) state.desc = true;
    else Object.assign(state, { sort: null, desc: false });
    sortButtons.forEach((button, i) => {
      const sorted = state.sort === table.columns[i].name;
      const th = button.parentElement;
      th.setAttribute("aria-sort", sorted ? (state.desc ? "descending" : "ascending") : "none");
      button.dataset.sort = sorted ? (state.desc ? "desc" : "asc") : "";
    });
    load(0);
  }

  const headerRow = h("tr");
  const filterRow = h("tr", { class: "table-filters" });
  table.columns.forEach((column, index) => {
    const button = h("button", { type: "button", class: "table-sort", testid: "table-sort" }, column.name, h("span", { class: "table-sort-mark", "aria-hidden": "true" }));
    button.addEventListener("click", () => sortBy(index));
    sortButtons.push(button);
    const summary = h("span", { class: "table-summary muted" });
    summaries.push(summary);
    headerRow.append(h("th", { scope: "col", "aria-sort": "none" }, button, h("span", { class: "table-type muted" }, column.type), summary));
    const input = h("input", { type: "search", class: "table-filter", placeholder: "filter", "aria-label": `Filter ${column.name}`, testid: "table-filter" });
    input.addEventListener("change", () => {
      const filter = parseFilter(column.name, input.value);
      if (filter) state.filters.set(column.name, filter);
      else state.filters.delete(column.name);
      load(0);
    });
    filterRow.append(h("td", {}, input));
  });
  head.append(headerRow);

  buttons.first.addEventListener("click", () => goTo(1));
  buttons.prev.addEventListener("click", () => goTo(state.offset / PAGE));
  buttons.next.addEventListener("click", () => goTo(state.offset / PAGE + 2));
  buttons.last.addEventListener("click", () => goTo(Infinity));
  pageInput.addEventListener("change", () => goTo(Number(pageInput.value)));

  caption.textContent = `${title} · ${number.format(table.rows)} rows × ${table.columns.length} columns`;
  const section = h(
    "section",
    { class: "data-table", dataset: { url: table.url }, "aria-label": title, testid: "table" },
    h("div", { class: "table-head" }, caption, downloads),
    h("p", { class: "table-hint muted small" }, "Click a column to sort. Filters match part of a value, or compare with =, !=, >, >=, <, <=."),
    h("div", { class: "table-scroll", tabindex: "0", "aria-label": `${title}, scrollable` }, grid),
    h("div", { class: "table-pager" }, buttons.first, buttons.prev, pageLabel, pages, buttons.next, buttons.last, status),
  );
  // The inputs join the table once it comes near the screen. Chrome's autofill looks at
  // every input of the page when the page changes (a chart's frame, a new table), and an
  // input inside a message that is not drawn (content-visibility) costs it a layout of
  // that message: a long conversation's 60 filter inputs made that one task of 40-57 ms.
  whenVisible(section, () => {
    head.append(filterRow);
    pageLabel.append(pageInput);
  });
  drawRows();
  summarize(table, summaries, section);
  return section;
}

/** The columns' types and summaries, fetched once the table is on screen. */
function summarize(table, summaries, section) {
  const fetchSummary = async () => {
    try {
      const summary = await request(table.url);
      summary.columns.forEach((column, i) => {
        if (summaries[i]) summaries[i].textContent = summaryText(column);
      });
    } catch {
      section.dataset.summary = "unavailable"; // the table was deleted or rolled back
    }
  };
  if (typeof IntersectionObserver !== "function") return void fetchSummary();
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting)) {
      observer.disconnect();
      fetchSummary();
    }
  });
  observer.observe(section);
}
