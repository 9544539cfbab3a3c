/**
 * The Usage dialog: your model tokens and sandbox time today against your daily
 * limits, your disk against your quota, and the last 14 days. The counts are the
 * server's (`GET /api/users/me/usage`); limits reset at 00:00 UTC.
 */

import { request } from "./api.js";
import { byId, formatBytes, h } from "./dom.js";
import { on, state } from "./state.js";

const DAYS = 14;

let dialog;

export const number = (value) => Number(value || 0).toLocaleString("en-US");
export const seconds = (value) => `${Number(value || 0).toFixed(1)} s`;

/** "1,234 of 5,000" or "1,234 (no limit)". */
function against(used, limit, show) {
  return limit ? `${show(used)} of ${show(limit)}` : `${show(used)} (no limit)`;
}

function gauge(testid, label, used, limit, show) {
  return h(
    "div",
    { class: "usage-gauge", testid },
    h("span", { class: "field-label" }, label),
    h("span", { class: "usage-figure", testid: `${testid}-text` }, against(used, limit, show)),
    limit
      ? h("meter", { min: "0", max: String(limit), high: String(limit * 0.8), value: String(Math.min(used, limit)), "aria-label": label })
      : null,
  );
}

function dayRow(day) {
  return h(
    "tr",
    { testid: "usage-day", dataset: { day: day.day } },
    h("th", { scope: "row" }, day.day),
    h("td", {}, number(day.turns)),
    h("td", {}, number(day.tokens)),
    h("td", {}, number(day.sandbox_runs)),
    h("td", {}, seconds(day.sandbox_wall_seconds)),
  );
}

function render(usage) {
  const today = usage.today;
  const limits = usage.limits;
  byId("usage-today").replaceChildren(
    gauge("usage-tokens", "Model tokens today", today.tokens, limits.max_tokens_per_day, number),
    gauge("usage-sandbox", "Sandbox time today", today.sandbox_wall_seconds, limits.max_sandbox_seconds_per_day, seconds),
    gauge("usage-disk", "Disk", usage.disk_bytes, limits.max_disk_mb * 1024 * 1024, formatBytes),
  );
  const resets = new Date(usage.resets_at * 1000).toLocaleString();
  byId("usage-resets").textContent = `Daily limits start again at 00:00 UTC (${resets} here).`;
  byId("usage-days").replaceChildren(...usage.days.slice().reverse().map(dayRow));
}

async function load() {
  const error = byId("usage-error");
  error.hidden = true;
  try {
    render(await request(`/api/users/me/usage?days=${DAYS}`));
  } catch (failure) {
    error.textContent = failure.message;
    error.hidden = false;
  }
}

export function mountUsage() {
  dialog = byId("usage-dialog");
  byId("usage-open").addEventListener("click", () => {
    dialog.showModal();
    load();
  });
  dialog.querySelector("[data-close]").addEventListener("click", () => dialog.close());
  on("auth", () => {
    if (!state.user && dialog.open) dialog.close();
  });
}
