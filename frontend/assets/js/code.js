/**
 * Code blocks: a header with the language and a Copy button, and highlight.js
 * colouring, done at once, or deferred until the block scrolls into view.
 *
 * highlight.js escapes the code it colours; its output still goes through
 * DOMPurify (spans and classes only) before it becomes markup.
 */

import hljs from "/assets/vendor/highlight.mjs";
import DOMPurify from "/assets/vendor/purify.mjs";
import { h } from "./dom.js";

const AUTO_LIMIT = 2_000; // characters: guessing the language costs a pass per language
const HIGHLIGHT_LIMIT = 40_000; // characters: bigger blocks stay plain (one task stays short)
const HIGHLIGHTED = { ALLOWED_TAGS: ["span"], ALLOWED_ATTR: ["class"] };
const cache = new Map();
const CACHE_LIMIT = 300;

/** A language name highlight.js knows, or "". */
export function knownLanguage(name) {
  const lang = String(name || "").toLowerCase();
  return lang && hljs.getLanguage(lang) ? lang : "";
}

function highlightedHtml(code, lang) {
  const key = `${lang}\u0000${code}`;
  let html = cache.get(key);
  if (html !== undefined) return html;
  let result = null;
  try {
    if (lang) result = hljs.highlight(code, { language: lang, ignoreIllegals: true });
    else if (code.length <= AUTO_LIMIT) result = hljs.highlightAuto(code);
  } catch {
    result = null;
  }
  html = result ? DOMPurify.sanitize(result.value, HIGHLIGHTED) : null;
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value);
  cache.set(key, html);
  return html;
}

/** Colour one <code> element in place (once). */
export function highlightNow(code) {
  if (code.dataset.highlighted) return;
  code.dataset.highlighted = "1";
  const text = code.textContent;
  if (text.length > HIGHLIGHT_LIMIT) return;
  const html = highlightedHtml(text, knownLanguage(code.dataset.lang));
  if (html === null) return;
  code.innerHTML = html;
  code.classList.add("hljs");
  code.dispatchEvent(new Event("highlighted")); // its markup changed (citations.js re-links)
}

// Deferred highlighting: blocks are coloured as they come into view, a few
// milliseconds of work per frame, so opening a long conversation paints at once.
const queue = new Set();
let frame = 0;
const observer =
  "IntersectionObserver" in window
    ? new IntersectionObserver(
        (entries) => {
          for (const entry of entries) {
            if (!entry.isIntersecting) continue;
            observer.unobserve(entry.target);
            queue.add(entry.target);
          }
          if (queue.size && !frame) frame = requestAnimationFrame(drain);
        },
        { rootMargin: "400px 0px" },
      )
    : null;

function drain() {
  frame = 0;
  const start = performance.now();
  for (const code of queue) {
    queue.delete(code);
    if (code.isConnected) highlightNow(code);
    if (performance.now() - start > 8) break;
  }
  if (queue.size) frame = requestAnimationFrame(drain);
}

export function highlightLater(code) {
  if (observer) observer.observe(code);
  else highlightNow(code);
}

/** Copy `text`; resolves to true when it worked. Never throws or logs. */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    /* permission refused: fall back below */
  }
  const area = h("textarea", { class: "clipboard-helper", readonly: true, "aria-hidden": "true" });
  area.value = text;
  document.body.append(area);
  let copied = false;
  try {
    area.select();
    copied = document.execCommand("copy");
  } catch {
    copied = false;
  } finally {
    area.remove();
  }
  return copied;
}

export function copyButton(getText, label = "Copy") {
  const button = h("button", { type: "button", class: "copy-button", title: "Copy to the clipboard" }, label);
  button.addEventListener("click", async () => {
    const copied = await copyText(getText());
    button.textContent = copied ? "Copied" : "Copy failed";
    setTimeout(() => {
      button.textContent = label;
    }, 1500);
  });
  return button;
}

/**
 * Wrap `<pre><code>` in a block with a header: the language (or `title`) and Copy.
 * `mode`: "now" colours it at once, "later" when visible, "none" leaves it plain.
 */
export function decorateCodeBlock(pre, { title = "", mode = "now", testid = null } = {}) {
  const code = pre.querySelector("code") || pre;
  const lang = code.dataset.lang || "";
  const block = h(
    "div",
    { class: "codeblock", testid },
    h("div", { class: "codeblock-head" }, h("span", { class: "codeblock-lang" }, title || lang || "text"), copyButton(() => code.textContent)),
  );
  pre.replaceWith(block);
  block.append(pre);
  if (mode === "now") highlightNow(code);
  else if (mode === "later") highlightLater(code);
  return block;
}

/** A code block built from text (the agent's code). */
export function codeBlock(text, { lang = "", title = "", mode = "now", testid = null } = {}) {
  const code = h("code", { class: lang ? `language-${lang}` : null, dataset: { lang } }, text);
  const pre = h("pre", {}, code);
  h("div", {}, pre); // decorateCodeBlock puts the block where the <pre> was
  return decorateCodeBlock(pre, { title, mode, testid });
}
