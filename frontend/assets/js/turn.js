/**
 * An assistant turn as data: the router's choice, the plan, the tool calls with
 * their attempts, plots, the answer text and how the run ended.
 *
 * `applyEvent` folds one server event into a turn; a stored answer is rebuilt by
 * folding its `metadata.steps`, so live and stored turns draw the same way.
 * Each part has a `rev` that changes when it does, so a view redraws only what changed.
 */

import { isTableUrl, tableFromEvent } from "./table.js";

let keys = 0;
const nextKey = (prefix) => `${prefix}${(keys += 1)}`;

export function createTurn({ userText = "", sessionId = "", agentType = "auto", runState = "running" } = {}) {
  return {
    key: nextKey("turn"),
    runId: null,
    sessionId,
    userText,
    agentType,
    runState, // running | done | stopped | error
    router: null,
    plan: null,
    tools: [],
    plots: [],
    tables: [], // tables the runs showed (table.js pages them from the server)
    charts: [], // interactive charts (Plotly, Vega-Lite), each with its PNG
    notes: null, // what was left out to fit the model's context window, or cut by its server
    text: "",
    citations: [], // where the answer's numbers came from (the final event's)
    error: null,
    rev: 0, // the timeline's revision
    textRev: 0,
    lastSeq: 0,
  };
}

function touch(turn, part) {
  if (part) part.rev += 1;
  turn.rev += 1;
}

function newCard(turn, fields) {
  const card = {
    key: nextKey("tool"),
    rev: 0,
    tool: fields.tool || "tool",
    input: fields.input ?? "",
    thought: fields.thought ?? "",
    index: fields.index ?? null,
    label: fields.label || "",
    attempts: [],
  };
  turn.tools.push(card);
  return card;
}

/** The card an attempt belongs to: its P&E step's, else the latest one. */
function cardFor(turn, event) {
  const hasIndex = event.index !== undefined && event.index !== null;
  for (let i = turn.tools.length - 1; i >= 0; i -= 1) {
    const card = turn.tools[i];
    if (!hasIndex || card.index === event.index) return card;
  }
  return newCard(turn, { tool: event.tool, index: hasIndex ? event.index : null });
}

function planStep(turn, index) {
  return turn.plan ? turn.plan.steps.find((step) => step.index === index) : undefined;
}

function applyPlan(turn, event) {
  const started = turn.plan && event.revised ? turn.plan.steps.filter((s) => s.status !== "pending") : [];
  const steps = (Array.isArray(event.steps) ? event.steps : []).map((step) => ({
    goal: String(step.goal ?? ""),
    tool: String(step.tool ?? ""),
    status: "pending",
    index: null,
  }));
  turn.plan = {
    key: "plan",
    rev: (turn.plan ? turn.plan.rev : 0) + 1,
    revised: Boolean(event.revised),
    reason: event.reason ? String(event.reason) : "",
    steps: [...started, ...steps],
  };
  turn.rev += 1;
}

function startStep(turn, event) {
  if (!turn.plan) turn.plan = { key: "plan", rev: 0, revised: false, reason: "", steps: [] };
  const steps = turn.plan.steps;
  for (const step of steps) if (step.status === "running") step.status = "done";
  const goal = String(event.goal ?? "");
  let step = steps.find((s) => s.status === "pending" && s.goal === goal) || steps.find((s) => s.status === "pending");
  if (!step) {
    step = { goal, tool: String(event.tool ?? ""), status: "pending", index: null };
    steps.push(step);
  }
  step.status = "running";
  step.index = event.index ?? null;
  touch(turn, turn.plan);
  const number = steps.indexOf(step) + 1;
  newCard(turn, { tool: event.tool, input: goal, index: event.index ?? null, label: `Step ${number}` });
}

/** Settle what was still going when the run ended. */
function settle(turn) {
  if (turn.plan) {
    for (const step of turn.plan.steps) {
      if (step.status === "running") step.status = turn.runState === "done" ? "done" : "stopped";
    }
    touch(turn, turn.plan);
  }
  for (const card of turn.tools) touch(turn, card);
}

export function applyEvent(turn, event) {
  if (typeof event.seq === "number") turn.lastSeq = Math.max(turn.lastSeq, event.seq);
  switch (event.type) {
    case "router":
      turn.router = {
        key: "router",
        rev: (turn.router ? turn.router.rev : 0) + 1,
        agentType: String(event.agent_type ?? ""),
        reason: String(event.reason ?? ""),
      };
      turn.rev += 1;
      break;
    case "plan":
      applyPlan(turn, event);
      break;
    case "step_start":
      startStep(turn, event);
      break;
    case "tool_call":
      newCard(turn, { tool: event.tool, input: event.input, thought: event.thought });
      turn.rev += 1;
      break;
    case "code": {
      const card = cardFor(turn, event);
      card.attempts.push({
        attempt: event.attempt ?? card.attempts.length + 1,
        code: String(event.code ?? ""),
        execution: null,
      });
      touch(turn, card);
      break;
    }
    case "execution": {
      const card = cardFor(turn, event);
      const number = event.attempt ?? card.attempts.length;
      let attempt = card.attempts.find((a) => a.attempt === number && !a.execution);
      if (!attempt) {
        attempt = { attempt: number || card.attempts.length + 1, code: null, execution: null };
        card.attempts.push(attempt);
      }
      attempt.execution = {
        runId: event.run_id ? String(event.run_id) : "",
        ok: Boolean(event.ok),
        stdout: String(event.stdout ?? ""),
        error: event.error ? String(event.error) : "",
        files: Array.isArray(event.files) ? event.files.map(String) : [],
      };
      touch(turn, card);
      const step = event.index !== undefined ? planStep(turn, event.index) : undefined;
      if (step) {
        step.status = event.ok ? "done" : "failed";
        touch(turn, turn.plan);
      }
      break;
    }
    case "chart":
      if (event.spec_url && event.png_url && !turn.charts.some((chart) => chart.specUrl === event.spec_url)) {
        turn.charts.push({
          library: event.library === "plotly" ? "plotly" : "vega-lite",
          specUrl: String(event.spec_url),
          pngUrl: String(event.png_url),
          pngPath: String(event.png_path ?? ""),
        });
        turn.rev += 1;
      }
      break;
    case "table":
      if (isTableUrl(event.url) && !turn.tables.some((table) => table.url === event.url)) {
        turn.tables.push(tableFromEvent(event));
        turn.rev += 1;
      }
      break;
    case "plot":
      if (event.url && !turn.plots.some((plot) => plot.url === event.url)) {
        turn.plots.push({ key: `plot:${event.url}`, path: String(event.path ?? ""), url: String(event.url) });
        turn.rev += 1;
      }
      break;
    case "context": {
      const message = String(event.message ?? "");
      if (!turn.notes) turn.notes = { key: "notes", rev: 0, messages: [], cut: false };
      if (message && !turn.notes.messages.includes(message)) turn.notes.messages.push(message);
      turn.notes.cut ||= Boolean(event.cut_upstream);
      touch(turn, turn.notes);
      break;
    }
    case "token":
      turn.text += String(event.text ?? "");
      turn.textRev += 1;
      break;
    case "final":
      if (typeof event.text === "string") turn.text = event.text;
      if (Array.isArray(event.citations)) turn.citations = event.citations;
      turn.textRev += 1;
      break;
    case "error":
      turn.error = { message: String(event.message || "The run failed."), code: event.code || "" };
      turn.rev += 1;
      break;
    case "done":
      turn.runState = event.status === "cancelled" ? "stopped" : event.status === "error" ? "error" : "done";
      if (turn.runState === "error" && !turn.error) turn.error = { message: "The run failed.", code: "" };
      settle(turn);
      turn.textRev += 1;
      break;
    default:
      break;
  }
}

/** Mark a turn stopped at once (the user pressed Stop); the server confirms later. */
export function markStopped(turn) {
  turn.runState = "stopped";
  settle(turn);
  turn.textRev += 1;
}

/** A turn redrawn from a stored assistant message. */
export function turnFromMessage(message, userText, sessionId) {
  const meta = (message && message.metadata) || {};
  const turn = createTurn({ userText, sessionId: meta.session_id || sessionId, runState: "done" });
  if (meta.agent_type) {
    applyEvent(turn, { type: "router", agent_type: meta.agent_type, reason: meta.route_reason || "" });
  }
  for (const step of Array.isArray(meta.steps) ? meta.steps : []) {
    if (step && typeof step === "object" && step.type !== "token") applyEvent(turn, step);
  }
  turn.text = String(message.content || "");
  turn.citations = Array.isArray(meta.citations) ? meta.citations : [];
  if (meta.finish_reason === "cancelled") turn.runState = "stopped";
  else if (meta.finish_reason === "error") {
    turn.runState = "error";
    turn.error = { message: String(meta.error || "The run failed."), code: "" };
  }
  settle(turn);
  return turn;
}

/** A card's state for its badge: running, done, failed or stopped. */
export function cardStatus(card, turn) {
  const last = card.attempts[card.attempts.length - 1];
  if (last && last.execution) return last.execution.ok ? "done" : "failed";
  if (turn.runState === "running") return "running";
  return turn.runState === "done" ? "done" : "stopped";
}
