/**
 * The message column: draws the open conversation newest first, in slices of a
 * few milliseconds (so a long one shows its end at once and never freezes the
 * page), appends new items, and redraws only the assistant turn that changed,
 * at most once per animation frame. Messages far off screen are not laid out
 * (style.css) until they come near, and the lines on screen stay put as they
 * take their real height. Follows the newest message unless the user scrolled up.
 */

import { branchControls, editParent, messageEditor } from "./branches.js";
import { drawAnswer, mountCitations } from "./citations.js";
import { byId, h } from "./dom.js";
import { emit, on, state } from "./state.js";
import { drawStreaming } from "./streaming.js";
import { renderPlots, renderTimeline } from "./timeline.js";
import { renderUpload } from "./uploads.js";

const STICK_DISTANCE = 80; // px from the bottom that still counts as "at the bottom"
const FIRST_SLICE_MS = 8; // the newest items, drawn in the task that opens the view
const FIRST_SCREEN_MS = 20; // ... and more of them until they fill the screen, within this
const SLICE_MS = [8, 16]; // then older ones, a slice a frame: half the frame's time, within these
const views = new WeakMap(); // turn or upload → its view
const actionSlots = new Map(); // a stored message's item → its slot for branch controls
const dirty = new Set();
let frame = 0;
let scroller;
let list;
let emptyState;
let jumpButton;
let stick = true;
let lastTop = 0; // scrollTop as the last scroll event saw it, or our own last move set it
let itemObserver; // a ResizeObserver of the list's items (keepInPlace)
let nearObserver; // marks the items that came within a screen and a half of view
const heights = new WeakMap(); // an item → its height as that observer last saw it
let filling = null; // the open view's items still to draw: {items, next}

export function mountMessages() {
  scroller = byId("scroller");
  list = byId("messages");
  emptyState = byId("empty-state");
  jumpButton = byId("jump-latest");
  mountCitations(list);
  // Growing content never moves scrollTop, so only a move up (the user's) unsticks.
  scroller.addEventListener("scroll", () => {
    const top = scroller.scrollTop;
    if (scroller.scrollHeight - top - scroller.clientHeight < STICK_DISTANCE) stick = true;
    else if (top < lastTop) stick = false;
    lastTop = top;
    jumpButton.hidden = stick;
  }, { passive: true });
  jumpButton.addEventListener("click", () => {
    stick = true;
    scrollToBottom();
  });
  list.addEventListener("click", (event) => {
    const retry = event.target.closest("[data-retry]");
    if (!retry) return;
    const item = state.items.find((i) => i.kind === "assistant" && i.turn.key === retry.dataset.retry);
    if (item) emit("retry", item.turn);
  });
  // Images and deferred highlighting change heights after a redraw: keep following.
  new ResizeObserver(follow).observe(list);
  itemObserver = new ResizeObserver(keepInPlace);
  // An item off screen is drawn once it comes this near, and stays drawn (style.css): well
  // before it scrolls into view, so its real height is taken above what is on screen.
  nearObserver = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      nearObserver.unobserve(entry.target);
      entry.target.classList.add("is-near");
    }
  }, { root: scroller, rootMargin: "150% 0px" });
  on("conversation", renderAll);
  on("item", appendItem);
  on("item-meta", redrawActions);
  on("run", redrawActions); // a run going disables editing
  on("edit-message", editMessage);
  on("turn", schedule);
  on("upload", (upload) => {
    const view = views.get(upload);
    if (view) view.update(upload);
  });
}

/**
 * Draw the open view's items (`state.items`), newest first: those that fill the
 * screen at once, at the bottom, then older ones above them a slice at a time.
 * Items appended meanwhile go below as usual; opening another view stops it.
 */
function renderAll() {
  dirty.clear();
  actionSlots.clear();
  itemObserver.disconnect();
  nearObserver.disconnect();
  list.replaceChildren();
  emptyState.hidden = state.items.length > 0;
  stick = true;
  jumpButton.hidden = true;
  const fill = { items: state.items.slice(), next: state.items.length };
  filling = fill;
  const start = performance.now();
  if (fill.next > 0) drawOlder(fill, FIRST_SLICE_MS);
  while (fill.next > 0 && list.offsetHeight < scroller.clientHeight && performance.now() - start < FIRST_SCREEN_MS) {
    drawOlder(fill, SLICE_MS[0]);
  }
  scrollToBottom();
  if (fill.next > 0) fillOlder(fill);
  else filling = null;
}

/** Resolves just after the next frame has painted (a hidden page paints none: a task then). */
function afterPaint() {
  return new Promise((resolve) => {
    if (document.hidden) {
      setTimeout(resolve, 0);
      return;
    }
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = resolve;
      channel.port2.postMessage(null);
    });
  });
}

// A slice a frame: the page paints and takes input between them. Where frames come
// slower (a busy machine), each does more, so the whole takes fewer of them.
async function fillOlder(fill) {
  let last = performance.now();
  while (fill.next > 0) {
    await afterPaint();
    if (filling !== fill) return; // another view opened
    const now = performance.now();
    drawOlder(fill, Math.min(SLICE_MS[1], Math.max(SLICE_MS[0], (now - last) / 2)));
    last = now;
  }
  filling = null;
}

/** Build the items before `fill.next` for about `budget` ms (one at least), and put them on top. */
function drawOlder(fill, budget) {
  const start = performance.now();
  const fragment = document.createDocumentFragment();
  do {
    fill.next -= 1;
    const el = buildItem(fill.items[fill.next], "later");
    watch(el);
    fragment.prepend(el);
  } while (fill.next > 0 && performance.now() - start < budget);
  // What the user sees stays where it is (the bottom, or the lines they scrolled to),
  // even when their scroll's event is still to come: it must still read as a move up.
  const height = scroller.scrollHeight;
  list.prepend(fragment);
  const grown = scroller.scrollHeight - height;
  scroller.scrollTop += grown;
  lastTop += grown;
}

function watch(el) {
  itemObserver.observe(el);
  nearObserver.observe(el);
}

/**
 * An item above the lines on screen can change height after it was drawn: one far off
 * screen takes its real height when it comes near (content-visibility in style.css; see
 * nearObserver), an image loads. Scroll by as much, so those lines stay put (at the
 * bottom, the list's own observer follows it).
 */
function keepInPlace(entries) {
  const top = scroller.getBoundingClientRect().top;
  const inOrder = [...entries].sort((a, b) =>
    a.target.compareDocumentPosition(b.target) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
  let grownAbove = 0; // by the items before this one: it moved down as much
  let shift = 0;
  for (const entry of inOrder) {
    const height = entry.borderBoxSize[0].blockSize;
    const before = heights.get(entry.target);
    heights.set(entry.target, height);
    if (before === undefined || height === before) continue; // new: drawOlder keeps its place
    const grown = height - before;
    const bottomBefore = entry.target.getBoundingClientRect().bottom - grownAbove - grown;
    if (bottomBefore <= top) shift += grown; // it was wholly above what is on screen
    grownAbove += grown;
  }
  if (shift && !stick) {
    scroller.scrollTop += shift;
    lastTop += shift;
  }
}

function appendItem(item) {
  const el = buildItem(item, "now");
  watch(el);
  list.append(el);
  emptyState.hidden = true;
  if (item.kind === "user") {
    stick = true; // sending follows the answer
    scrollToBottom();
  } else follow();
}

function buildItem(item, mode) {
  if (item.kind === "user") {
    return h(
      "article",
      { class: "message message-user", testid: "message-user" },
      h("div", { class: "bubble" }, item.text),
      actionSlot(item),
    );
  }
  if (item.kind === "upload") {
    const view = renderUpload(item.upload);
    views.set(item.upload, view);
    return view.el;
  }
  return buildAssistant(item, mode);
}

/** The slot under a message for its edit / regenerate buttons and branch switch. */
function actionSlot(item) {
  const slot = h("div", { class: "action-slot" });
  actionSlots.set(item, slot);
  slot.replaceChildren(branchControls(item) || "");
  return slot;
}

function redrawActions() {
  for (const [item, slot] of actionSlots) {
    if (slot.isConnected) slot.replaceChildren(branchControls(item) || "");
    else actionSlots.delete(item);
  }
}

/** Edit a stored user message in place; sending it starts a branch from its parent. */
function editMessage(item) {
  const slot = actionSlots.get(item);
  const article = slot && slot.closest("article");
  if (!article || state.running || state.loading) return;
  const bubble = article.querySelector(".bubble");
  const cancel = () => {
    editor.replaceWith(bubble);
    slot.hidden = false;
  };
  const editor = messageEditor(item, (text) => {
    const keep = state.items.indexOf(item);
    if (keep < 0) return cancel();
    emit("send-branch", { text, keep, parentId: editParent(item), regenerate: false });
  }, cancel);
  bubble.replaceWith(editor);
  slot.hidden = true;
}

function buildAssistant(item, mode) {
  const turn = item.turn;
  const view = {
    el: null,
    timeline: h("div", { class: "timeline" }),
    plots: h("div", { class: "plots" }),
    answer: h("div", { class: "answer markdown" }),
    error: h("div", { class: "error-slot" }),
    foot: h("div", { class: "message-foot" }),
    rev: -1,
    textRev: -1,
    stream: null, // what drawStreaming kept of the streaming answer
    mode,
  };
  view.el = h(
    "article",
    { class: "message message-assistant", testid: "message-assistant", dataset: { runState: turn.runState } },
    h("div", { class: "avatar", "aria-hidden": "true" }, "π"),
    h("div", { class: "message-body" }, view.timeline, view.plots, view.answer, view.error, view.foot, actionSlot(item)),
  );
  views.set(turn, view);
  updateAssistant(turn, view);
  return view.el;
}

// Refusals by a limit (429, 507) are not failures: their title says which limit.
const LIMIT_TITLES = {
  too_many_runs: "Too many runs at once",
  too_many_sandboxes: "No sandbox free right now",
  disk_quota_exceeded: "Your disk quota is full",
  insufficient_storage: "The server's disk is full",
};

function errorCard(turn) {
  const retryAfter = turn.error.retryAfter || 0;
  return h(
    "div",
    { class: "error-card", testid: "error-card", role: "alert" },
    h("div", { class: "error-card-title" }, LIMIT_TITLES[turn.error.code] || "Something went wrong"),
    h("p", { class: "error-card-message" }, turn.error.message),
    retryAfter ? h("p", { class: "error-card-message small" }, `You can retry in about ${retryAfter} s.`) : null,
    turn.userText
      ? h("button", { type: "button", class: "button button-secondary button-small", dataset: { retry: turn.key } }, "Retry")
      : null,
  );
}

function footer(turn) {
  if (turn.runState === "running") {
    const label = turn.text ? "Writing…" : "Working…";
    return h("span", { class: "run-mark run-mark-running" }, h("span", { class: "spinner", "aria-hidden": "true" }), label);
  }
  if (turn.runState === "stopped") return h("span", { class: "run-mark run-mark-stopped" }, "Stopped");
  return null;
}

function updateAssistant(turn, view) {
  view.el.dataset.runState = turn.runState;
  if (turn.runId) view.el.dataset.runId = turn.runId;
  const mode = view.mode === "later" && turn.runState !== "running" ? "later" : "now";
  if (view.rev !== turn.rev) {
    view.rev = turn.rev;
    renderTimeline(view.timeline, turn, mode);
    renderPlots(view.plots, turn);
    view.error.replaceChildren(turn.error ? errorCard(turn) : "");
  }
  if (view.textRev !== turn.textRev) {
    view.textRev = turn.textRev;
    if (turn.runState === "running") {
      view.stream = drawStreaming(view.answer, turn.text, view.stream);
    } else {
      view.stream = null;
      drawAnswer(view.answer, turn.text, turn.citations, { highlight: mode });
    }
    view.answer.hidden = !turn.text;
    view.foot.replaceChildren(footer(turn) || "");
  }
}

/** Redraw `turn` in the next animation frame (many events, one redraw). */
function schedule(turn) {
  if (!views.has(turn)) return;
  dirty.add(turn);
  if (!frame) frame = requestAnimationFrame(flush);
}

function flush() {
  frame = 0;
  for (const turn of dirty) {
    const view = views.get(turn);
    if (view && view.el.isConnected) updateAssistant(turn, view);
  }
  dirty.clear();
  follow();
}

/**
 * Keep to the bottom while stuck there. A move up whose scroll event is still to come
 * (each of our own moves updates lastTop, so it can only be the user's) unsticks first:
 * following would undo it.
 */
function follow() {
  if (!stick) return;
  const top = scroller.scrollTop;
  if (top < lastTop - 1 && scroller.scrollHeight - top - scroller.clientHeight >= STICK_DISTANCE) {
    stick = false;
    jumpButton.hidden = false;
    return;
  }
  scrollToBottom();
}

function scrollToBottom() {
  scroller.scrollTop = scroller.scrollHeight;
  lastTop = scroller.scrollTop;
}
