/**
 * Markdown from a model → sanitized DOM: markdown-it (raw HTML off), KaTeX math,
 * DOMPurify, then code blocks with Copy buttons and highlighting.
 *
 * Links keep only http(s), mailto and same-origin targets and open in a new
 * tab; images render only from this server's session files (the page's CSP
 * allows no other), anything else becomes a link or its alt text.
 */

import markdownit from "/assets/vendor/markdown-it.mjs";
import DOMPurify from "/assets/vendor/purify.mjs";
import { decorateCodeBlock } from "./code.js";
import { mathPlugin } from "./math.js";

const md = markdownit({ html: false, linkify: true, typographer: false, breaks: false });
md.use(mathPlugin);

const LANGUAGE = /^[\w+#.-]{1,32}$/;
const escape = md.utils.escapeHtml;

/** Whether a fence has its closing marker (while streaming, the last one may not). */
function fenceClosed(token, env) {
  if (!token.map || !env.lines) return true;
  const [first, end] = token.map;
  if (end - 1 <= first) return false;
  const closing = (env.lines[end - 1] || "").trim();
  const marker = token.markup[0];
  return closing.length >= token.markup.length && [...closing].every((ch) => ch === marker);
}

md.renderer.rules.fence = (tokens, idx, _options, env) => {
  const token = tokens[idx];
  const info = token.info ? md.utils.unescapeAll(token.info).trim() : "";
  const word = info.split(/\s+/)[0] || "";
  const lang = LANGUAGE.test(word) ? word.toLowerCase() : "";
  const open = fenceClosed(token, env) ? "" : ' data-open="1"';
  const cls = lang ? ` class="language-${escape(lang)}"` : "";
  return `<pre><code${cls} data-lang="${escape(lang)}"${open}>${escape(token.content)}</code></pre>\n`;
};

md.renderer.rules.code_block = (tokens, idx) =>
  `<pre><code data-lang="">${escape(tokens[idx].content)}</code></pre>\n`;

function parseUrl(value) {
  try {
    return new URL(String(value).trim(), window.location.href);
  } catch {
    return null;
  }
}

/** http(s), mailto, or a relative path on this server. */
export function isSafeHref(value) {
  const url = parseUrl(value);
  return url !== null && ["http:", "https:", "mailto:"].includes(url.protocol);
}

/** Only this server's session files may be shown as images. */
export function isAllowedImage(value) {
  const url = parseUrl(value);
  return (
    url !== null &&
    url.origin === window.location.origin &&
    url.pathname.startsWith("/api/sessions/") &&
    !/^\s*(data|blob|javascript):/i.test(String(value))
  );
}

md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  const src = token.attrGet("src") || "";
  const alt = self.renderInlineAsText(token.children || [], options, env);
  if (isAllowedImage(src) && !env.streaming) {
    return `<img src="${escape(src)}" alt="${escape(alt)}" loading="lazy">`;
  }
  if (isAllowedImage(src)) return `<span class="image-pending">${escape(alt || "image")}</span>`;
  const url = parseUrl(src);
  if (url && (url.protocol === "http:" || url.protocol === "https:")) {
    return `<a href="${escape(url.href)}">${escape(alt || url.href)}</a>`;
  }
  return escape(alt ? `[${alt}]` : "");
};

const SANITIZE = {
  USE_PROFILES: { html: true, mathMl: true },
  ADD_TAGS: ["semantics", "annotation"], // KaTeX's MathML keeps its TeX source there
  ADD_ATTR: ["data-lang", "data-open"],
  FORBID_TAGS: [
    "style", "form", "input", "button", "textarea", "select", "option", "iframe", "frame",
    "object", "embed", "svg", "link", "meta", "base", "template", "video",
    "audio", "source", "picture", "annotation-xml", "dialog",
  ],
  FORBID_ATTR: ["srcset", "formaction", "action", "autofocus"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

// An instance of its own: its configuration is parsed once, and its hook
// touches only model output.
const purifier = DOMPurify(window);
purifier.setConfig(SANITIZE);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") {
    const href = node.getAttribute("href");
    if (href !== null && !isSafeHref(href)) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  } else if (node.nodeName === "IMG") {
    const src = node.getAttribute("src");
    if (src !== null && !isAllowedImage(src)) node.removeAttribute("src");
    node.setAttribute("loading", "lazy");
  }
});

/** Sanitized DOM for `html` (the markdown renderer's output). */
export function sanitize(html) {
  return purifier.sanitize(html);
}

/**
 * Render markdown into a DocumentFragment.
 * `highlight`: "now" colours every code block, "later" as they come into
 * view, "streaming" only fences that are closed (the open one stays plain).
 */
export function renderMarkdown(text, { highlight = "now" } = {}) {
  const source = String(text || "");
  // While streaming, images wait for the final text: each frame redraws the answer.
  const env = { lines: source.split("\n"), streaming: highlight === "streaming" };
  const fragment = document.adoptNode(sanitize(md.render(source, env)));
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    let mode = highlight;
    if (highlight === "streaming") mode = code && code.dataset.open ? "none" : "now";
    decorateCodeBlock(pre, { mode });
  }
  return fragment;
}
