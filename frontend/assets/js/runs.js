/**
 * Runs: send a message (POST /api/runs), follow the run's events (reconnecting
 * with `after=<last seq>` when the stream drops), stop it, retry it.
 *
 * A run goes on on the server whatever the page does, so leaving a
 * conversation only stops following it; coming back attaches again.
 */

import { ApiError, request, streamEvents } from "./api.js";
import { chosenModel } from "./models.js";
import { emit, state, STORAGE, storage } from "./state.js";
import { applyEvent, createTurn, markStopped } from "./turn.js";

const followers = new Map(); // run id → AbortController
let cancelling = Promise.resolve(); // a Stop still unwinding on the server

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/** Stop following every run (another conversation opens, or the user signs out). */
export function detachAll() {
  for (const controller of followers.values()) controller.abort();
  followers.clear();
  if (state.running) {
    state.running = null;
    emit("run");
  }
}

function failTurn(turn, message, code = "", retryAfter = 0) {
  turn.error = { message, code, retryAfter };
  turn.runState = "error";
  turn.rev += 1;
  turn.textRev += 1;
  emit("turn", turn);
}

function endRunningState(turn) {
  if (state.running && state.running.turn === turn) {
    state.running = null;
    emit("run");
  }
}

/**
 * Send `text` as a new turn in the open conversation, after the branch on view. A
 * `branch` ({keep, parentId, regenerate}) starts another: the view keeps its first
 * `keep` items, and the turn follows message `parentId` (regenerate: answers it).
 */
export async function send(text, agentType = "auto", branch = null) {
  const message = String(text || "").trim();
  if (!message || state.running || state.loading) return false;
  const viewId = state.viewId;
  const sessionId = state.sessionId;
  const parentId = branch ? branch.parentId : state.leafId;
  state.leafId = null; // known again once the run has ended (branches.js)
  if (branch) {
    state.items = state.items.slice(0, branch.keep);
    emit("conversation");
  }
  const user = { kind: "user", text: message };
  const turn = createTurn({ userText: message, sessionId, agentType });
  if (!branch || !branch.regenerate) {
    state.items.push(user);
    emit("item", user);
  }
  state.items.push({ kind: "assistant", turn });
  emit("item", state.items[state.items.length - 1]);
  state.running = { turn, runId: null };
  emit("run");

  await cancelling; // a stopped run must have unwound, or the server answers 409
  let created;
  try {
    created = await request("/api/runs", {
      method: "POST",
      body: {
        message,
        session_id: sessionId,
        agent_type: agentType,
        ...(chosenModel() ? { model: chosenModel() } : {}),
        ...(parentId === null || parentId === undefined ? {} : { parent_message_id: parentId }),
      },
    });
  } catch (error) {
    failTurn(turn, error.message, error.code, error.retryAfter); // a 429 or 507 says which limit
    endRunningState(turn);
    return true;
  }
  turn.runId = created.run_id;
  if (state.running && state.running.turn === turn) state.running.runId = created.run_id;
  if (state.viewId !== viewId) return true; // the user moved on; the run goes on
  if (!state.conversationId && created.conversation_id) {
    state.conversationId = created.conversation_id;
    storage.set(STORAGE.conversation, created.conversation_id);
  }
  emit("conversation-created");
  if (turn.runState === "stopped") cancel(created.run_id); // Stop came before the run id
  follow(turn, created.run_id, 0);
  return true;
}

/** Follow a run that is already going (a reload, or coming back to its conversation). */
export function attach(turn, runId) {
  turn.runId = runId;
  state.running = { turn, runId };
  emit("run");
  follow(turn, runId, 0);
}

function cancel(runId) {
  cancelling = request(`/api/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST" }).then(
    () => undefined,
    () => undefined,
  );
}

/** Stop the running turn: what it showed stays, marked "Stopped"; the composer is free at once. */
export function stop() {
  const running = state.running;
  if (!running) return;
  state.running = null;
  markStopped(running.turn);
  emit("turn", running.turn);
  emit("run");
  if (running.runId) cancel(running.runId);
}

/** Send a failed turn's message again. */
export function retry(turn) {
  return send(turn.userText, turn.agentType || "auto");
}

async function follow(turn, runId, after) {
  const controller = new AbortController();
  followers.set(runId, controller);
  let lastSeq = after;
  let finished = false;
  let failures = 0;
  const onEvent = (event) => {
    if (typeof event.seq === "number") {
      if (event.seq <= lastSeq) return; // already seen (a replay after reconnecting)
      lastSeq = event.seq;
    }
    failures = 0;
    applyEvent(turn, event);
    emit("turn", turn);
    if (event.type === "done") finished = true;
  };
  while (!controller.signal.aborted && !finished) {
    try {
      await streamEvents(`/api/runs/${encodeURIComponent(runId)}/events?after=${lastSeq}`, {
        signal: controller.signal,
        onEvent,
      });
    } catch (error) {
      if (controller.signal.aborted) break;
      if (error instanceof ApiError && error.status >= 400 && error.status < 500) {
        // 404: the server no longer knows the run (it restarted): show what it stored.
        if (error.status === 404) emit("run-lost", turn);
        break;
      }
    }
    if (finished || controller.signal.aborted) break;
    failures += 1;
    await sleep(Math.min(500 * 2 ** (failures - 1), 5000), controller.signal);
  }
  if (followers.get(runId) === controller) followers.delete(runId);
  if (!finished) return;
  endRunningState(turn);
  emit("run-ended", turn);
}
