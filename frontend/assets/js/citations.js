/**
 * The answer's numbers, linked to where they came from (the server's `citations`).
 *
 * A citation spans `start`–`end` of the answer's markdown, in code points. Before
 * rendering, each span is fenced with private-use characters (open, its index,
 * close); after sanitizing, those marks in text nodes become `<span class="cite">`
 * elements built with DOM calls, and any mark left elsewhere (an attribute) is
 * removed. Inside code blocks the spans are also kept as offsets, so a block
 * highlighted later (code.js rewrites it) gets them back.
 *
 * Computed numbers are underlined: hovering or focusing one shows the code and
 * the output line that printed it; a click (or Enter) opens and scrolls to the
 * step. Numbers from the question, a document or an MCP tool's result get a tooltip
 * of their own.
 * Numbers the server could not trace get nothing.
 */

import { codeBlock } from "./code.js";
import { h } from "./dom.js";
import { renderMarkdown } from "./render.js";

const OPEN = "\uE000";
const CLOSE = "\uE001";
const INDEX_BASE = 0xe100; // the index rides as one character after OPEN
const MAX_MARKED = 0x1000;
const MARKS = /\uE000[\uE100-\uF0FF]?|\uE001/g; // only ours: other private-use text stays
// Math is typeset by KaTeX from its source: marks inside it would end up in TeX.
const MATH = /\\\([\s\S]*?\\\)|\\\[[\s\S]*?\\\]|\$\$[\s\S]*?\$\$/g;
const KIND_LABEL = {
  computed: "computed by the code that printed it",
  question: "from your question",
  document: "from a document",
  tool: "from a tool's result",
};

/** UTF-16 offsets of each code point offset of `text` (the server counts code points). */
function utf16Offsets(text) {
  const offsets = [0];
  let position = 0;
  for (const ch of text) {
    position += ch.length;
    offsets.push(position);
  }
  return offsets;
}

/** `text` with each citation's span fenced by marks; citations in math are left out. */
export function markCitations(text, citations) {
  const offsets = utf16Offsets(text);
  const math = Array.from(text.matchAll(MATH), (m) => [m.index, m.index + m[0].length]);
  const spans = [];
  citations.slice(0, MAX_MARKED).forEach((citation, index) => {
    const start = offsets[citation.start];
    const end = offsets[citation.end];
    if (start === undefined || end === undefined || end <= start) return;
    if (text.slice(start, end) !== String(citation.text)) return; // not this answer's
    if (math.some(([a, b]) => start < b && end > a)) return;
    spans.push({ start, end, index });
  });
  spans.sort((a, b) => b.start - a.start); // from the end, so earlier offsets hold
  let marked = text;
  for (const { start, end, index } of spans) {
    const open = OPEN + String.fromCharCode(INDEX_BASE + index);
    marked = marked.slice(0, start) + open + marked.slice(start, end) + CLOSE + marked.slice(end);
  }
  return marked;
}

function citeElement(citation, index, text) {
  const kind = KIND_LABEL[citation.kind] ? citation.kind : "computed";
  return h(
    "span",
    {
      class: `cite cite-${kind}`,
      tabindex: "0",
      role: kind === "computed" ? "button" : null,
      "aria-label": `${text}, ${KIND_LABEL[kind]}`,
      dataset: { cite: String(index) },
      testid: "cite",
    },
    text,
  );
}

/** Replace one text node's marks by cite elements; returns the spans it made, as offsets. */
function unmarkTextNode(node, citations) {
  const data = node.data;
  if (!/[\uE000\uE001]/.test(data)) return [];
  const pieces = [];
  const ranges = [];
  let clean = 0;
  let rest = data;
  for (;;) {
    const open = rest.indexOf(OPEN);
    if (open < 0) break;
    const close = rest.indexOf(CLOSE, open + 2);
    const index = rest.charCodeAt(open + 1) - INDEX_BASE;
    const before = rest.slice(0, open).replace(MARKS, "");
    pieces.push(before);
    clean += before.length;
    if (close < 0 || !citations[index]) {
      rest = rest.slice(open + (index >= 0 && index <= 0xf0ff - INDEX_BASE ? 2 : 1));
      continue;
    }
    const inner = rest.slice(open + 2, close).replace(MARKS, "");
    pieces.push(citeElement(citations[index], index, inner));
    ranges.push({ start: clean, end: clean + inner.length, index });
    clean += inner.length;
    rest = rest.slice(close + 1);
  }
  pieces.push(rest.replace(MARKS, ""));
  node.replaceWith(...pieces.filter((piece) => piece !== ""));
  return ranges;
}

/** The text offset of `node` within `root`'s text. */
function offsetIn(root, node) {
  let offset = 0;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let current = walker.nextNode(); current && current !== node; current = walker.nextNode()) {
    offset += current.data.length;
  }
  return offset;
}

/** Wrap `ranges` of `code`'s text again, once code.js has highlighted it. */
function rewrap(code, citations) {
  const ranges = code.citeRanges || [];
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  const nodes = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
  let offset = 0;
  for (const node of nodes) {
    const length = node.data.length;
    const inside = ranges.filter((r) => r.start >= offset && r.end <= offset + length);
    for (const range of inside.sort((a, b) => b.start - a.start)) {
      const local = range.start - offset;
      const middle = node.splitText(local);
      middle.splitText(range.end - range.start);
      middle.replaceWith(citeElement(citations[range.index], range.index, middle.data));
    }
    offset += length;
  }
}

/** Turn the marks in `fragment` into cite elements. */
function applyCitations(fragment, citations) {
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
  const nodes = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
  for (const node of nodes) {
    const code = node.parentElement ? node.parentElement.closest("pre code") : null;
    const base = code ? offsetIn(code, node) : 0;
    const ranges = unmarkTextNode(node, citations);
    if (code && ranges.length) {
      code.citeRanges = (code.citeRanges || []).concat(
        ranges.map((r) => ({ ...r, start: r.start + base, end: r.end + base })),
      );
      if (!code.citeListening) {
        code.citeListening = true;
        code.addEventListener("highlighted", () => rewrap(code, citations));
      }
    }
  }
  for (const el of fragment.querySelectorAll("*")) {
    for (const attribute of Array.from(el.attributes)) {
      if (/[\uE000\uE001]/.test(attribute.value)) el.setAttribute(attribute.name, attribute.value.replace(MARKS, ""));
    }
  }
}

/** Draw the answer into `container` as sanitized DOM, its traced numbers linked. */
export function drawAnswer(container, text, citations, options) {
  const list = Array.isArray(citations) ? citations.filter((c) => c && typeof c === "object") : [];
  container.citations = list;
  if (!list.length) {
    container.replaceChildren(renderMarkdown(text, options));
    return;
  }
  const fragment = renderMarkdown(markCitations(String(text || ""), list), options);
  applyCitations(fragment, list);
  container.replaceChildren(fragment);
}

// The one popover, shared by every cited number on the page.
let popover = null;
let shownFor = null;
let hideTimer = 0;

function popoverContent(citation) {
  if (citation.kind === "question") {
    return [h("p", { class: "cite-pop-title" }, "From your question"), h("p", { class: "muted small" }, "Not computed: you wrote this number.")];
  }
  if (citation.kind === "tool") {
    return [
      h("p", { class: "cite-pop-title" }, `From ${citation.source || "a tool"}`),
      h("p", { class: "muted small" }, "An MCP server's tool returned this number."),
      h("pre", { class: "cite-output-line", testid: "cite-output" }, String(citation.output_line ?? "")),
    ];
  }
  if (citation.kind === "document") {
    return [h("p", { class: "cite-pop-title" }, `From ${citation.source || "a document"}`), h("p", { class: "muted small" }, "A passage of your documents holds this number.")];
  }
  const line = citation.line ? `Output line ${citation.line}` : "Output line";
  return [
    h("p", { class: "cite-pop-title" }, "Printed by this code"),
    codeBlock(String(citation.code || ""), { lang: "python", title: "python", mode: "now", testid: "cite-code" }),
    h("p", { class: "cite-pop-label" }, line),
    h("pre", { class: "cite-output-line", testid: "cite-output" }, String(citation.output_line ?? "")),
    h("p", { class: "muted small" }, "Click the number to open the step."),
  ];
}

function citationOf(el) {
  const container = el.closest(".answer");
  const list = container && container.citations;
  return list ? list[Number(el.dataset.cite)] : undefined;
}

function show(el) {
  const citation = citationOf(el);
  if (!citation) return;
  clearTimeout(hideTimer);
  shownFor = el;
  popover.replaceChildren(...popoverContent(citation));
  popover.dataset.kind = citation.kind;
  popover.hidden = false;
  el.setAttribute("aria-describedby", popover.id);
  place(el);
}

/** Put the popover under `el` (above it when there is no room below). */
function place(el) {
  const box = el.getBoundingClientRect();
  const width = Math.min(560, window.innerWidth - 16);
  popover.style.width = `${width}px`;
  popover.style.left = `${Math.max(8, Math.min(box.left, window.innerWidth - width - 8))}px`;
  const below = window.innerHeight - box.bottom;
  const height = popover.offsetHeight;
  const top = below >= height + 12 || box.top < height + 12 ? box.bottom + 6 : box.top - height - 6;
  popover.style.top = `${Math.max(8, top)}px`;
}

function hide() {
  if (shownFor) shownFor.removeAttribute("aria-describedby");
  shownFor = null;
  if (popover) popover.hidden = true;
}

function hideSoon() {
  clearTimeout(hideTimer);
  hideTimer = setTimeout(hide, 200); // time to move the pointer onto the popover
}

/** Open and scroll to the step that printed a computed number. */
function jumpToStep(el) {
  const citation = citationOf(el);
  if (!citation || citation.kind !== "computed" || !citation.run_id) return;
  const message = el.closest(".message");
  const step = message && Array.from(message.querySelectorAll("[data-run-id]")).find((s) => s.dataset.runId === citation.run_id);
  if (!step) return;
  const card = step.closest("details");
  if (card) card.open = true;
  hide();
  const smooth = !window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  step.scrollIntoView({ behavior: smooth ? "smooth" : "auto", block: "center" });
  step.classList.remove("cite-target");
  void step.offsetWidth; // restart the highlight's animation
  step.classList.add("cite-target");
}

/** Listen for cited numbers under `root` (the message list). */
export function mountCitations(root) {
  popover = h("div", { id: "cite-popover", class: "cite-popover", role: "tooltip", hidden: true, testid: "cite-popover" });
  document.body.append(popover);
  popover.addEventListener("mouseenter", () => clearTimeout(hideTimer));
  popover.addEventListener("mouseleave", hideSoon);
  root.addEventListener("mouseover", (event) => {
    const el = event.target.closest(".cite");
    if (el && el !== shownFor) show(el);
  });
  root.addEventListener("mouseout", (event) => {
    const el = event.target.closest(".cite");
    // A number with keyboard focus keeps its popover until focus moves.
    if (el && !el.contains(event.relatedTarget) && document.activeElement !== shownFor) hideSoon();
  });
  root.addEventListener("focusin", (event) => {
    const el = event.target.closest(".cite");
    if (el) show(el);
  });
  root.addEventListener("focusout", (event) => {
    if (event.target.closest(".cite")) hide();
  });
  root.addEventListener("click", (event) => {
    const el = event.target.closest(".cite");
    if (el) jumpToStep(el);
  });
  root.addEventListener("keydown", (event) => {
    const el = event.target.closest(".cite");
    if (!el) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      jumpToStep(el);
    } else if (event.key === "Escape") hide();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && shownFor) hide();
  });
  // The page scrolled under it: the popover follows its number while the number is in
  // view (scrolling the popover's own code leaves it where it is).
  window.addEventListener("scroll", (event) => {
    if (!shownFor || popover.contains(event.target)) return;
    const box = shownFor.getBoundingClientRect();
    if (!shownFor.isConnected || box.bottom < 0 || box.top > window.innerHeight) hide();
    else place(shownFor);
  }, { passive: true, capture: true });
}
