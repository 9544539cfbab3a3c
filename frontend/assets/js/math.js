/**
 * Math for markdown-it, rendered by KaTeX: `\(…\)` inline, `\[…\]` and `$$…$$`
 * display. A single `$` stays text, so "$5 and $10" is currency.
 *
 * The rules are markdown-it rules, so code spans and fences keep their text
 * literally: the parser reaches them before these rules ever see their content.
 */

import katex from "/assets/vendor/katex/katex.mjs";

const cache = new Map();
const CACHE_LIMIT = 500;

/** KaTeX's HTML for `tex`; never throws (errors render in red). */
export function renderTex(tex, displayMode) {
  const key = `${displayMode ? "D" : "I"}${tex}`;
  let html = cache.get(key);
  if (html !== undefined) return html;
  const options = {
    displayMode,
    throwOnError: false,
    trust: false,
    strict: "ignore",
    maxSize: 100,
    maxExpand: 1000,
    output: "htmlAndMathml",
  };
  try {
    html = katex.renderToString(tex, options);
    // Some constructs (\sqrt, stretchy arrows) draw with <svg>, which the
    // sanitizer forbids: those render as MathML alone, which the browser draws.
    if (html.includes("<svg")) html = katex.renderToString(tex, { ...options, output: "mathml" });
  } catch {
    html = "";
  }
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value);
  cache.set(key, html);
  return html;
}

const BACKSLASH = 0x5c;
const DOLLAR = 0x24;

function delimitersAt(src, pos) {
  const ch = src.charCodeAt(pos);
  const next = src.charCodeAt(pos + 1);
  if (ch === BACKSLASH && next === 0x28) return { open: "\\(", close: "\\)", display: false };
  if (ch === BACKSLASH && next === 0x5b) return { open: "\\[", close: "\\]", display: true };
  if (ch === DOLLAR && next === DOLLAR) return { open: "$$", close: "$$", display: true };
  return null;
}

function mathInline(state, silent) {
  const found = delimitersAt(state.src, state.pos);
  if (!found) return false;
  const start = state.pos + found.open.length;
  const end = state.src.indexOf(found.close, start);
  if (end < 0 || end + found.close.length > state.posMax) return false;
  const content = state.src.slice(start, end);
  if (!content.trim()) return false;
  if (!silent) {
    const token = state.push("math_inline", "math", 0);
    token.content = content;
    token.markup = found.open;
    token.meta = { display: found.display };
  }
  state.pos = end + found.close.length;
  return true;
}

function lineText(state, line) {
  return state.src.slice(state.bMarks[line] + state.tShift[line], state.eMarks[line]);
}

/** A display block that starts a line with `$$` or `\[` and ends a line with its closer. */
function mathBlock(state, startLine, endLine, silent) {
  if (state.sCount[startLine] - state.blkIndent >= 4) return false;
  const first = lineText(state, startLine);
  const found = delimitersAt(first, 0);
  if (!found || !found.display) return false;
  const rest = first.slice(found.open.length).trimEnd();
  let content = null;
  let last = startLine;
  if (rest.length > found.close.length && rest.endsWith(found.close)) {
    content = rest.slice(0, -found.close.length);
  } else {
    const lines = [rest];
    for (let line = startLine + 1; line < endLine; line += 1) {
      if (state.sCount[line] < state.blkIndent) break;
      const text = lineText(state, line).trimEnd();
      if (text.endsWith(found.close)) {
        lines.push(text.slice(0, -found.close.length));
        content = lines.join("\n");
        last = line;
        break;
      }
      lines.push(text);
    }
  }
  if (content === null || !content.trim()) return false;
  if (silent) return true;
  const token = state.push("math_block", "math", 0);
  token.block = true;
  token.content = content;
  token.markup = found.open;
  token.map = [startLine, last + 1];
  state.line = last + 1;
  return true;
}

export function mathPlugin(md) {
  md.inline.ruler.before("escape", "math_inline", mathInline);
  md.block.ruler.before("paragraph", "math_block", mathBlock, {
    alt: ["paragraph", "reference", "blockquote", "list"],
  });
  md.renderer.rules.math_inline = (tokens, idx) =>
    renderTex(tokens[idx].content, tokens[idx].meta.display);
  md.renderer.rules.math_block = (tokens, idx) =>
    `<div class="math-block">${renderTex(tokens[idx].content, true)}</div>\n`;
}
