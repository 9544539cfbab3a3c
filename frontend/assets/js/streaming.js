/**
 * A streaming answer, drawn incrementally: blocks that are complete (followed by
 * a blank line, outside any code fence or $$ block) are rendered once and kept;
 * each frame redraws only the tail after them. The finished answer is rendered
 * whole once more (see messages.js), so the final page is exact.
 */

import { renderMarkdown } from "./render.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

/** Where the complete blocks of `text` end, scanning from `from` (a block boundary). */
export function stableEnd(text, from = 0) {
  let cut = from;
  let fence = ""; // the open fence's marker, or ""
  let math = false;
  let blank = false;
  let at = from;
  while (at < text.length) {
    const newline = text.indexOf("\n", at);
    if (newline < 0) break; // the last line is still arriving
    const line = text.slice(at, newline);
    if (fence) {
      const close = line.match(FENCE);
      if (close && close[1][0] === fence[0] && close[1].length >= fence.length && !line.trim().slice(close[1].length)) {
        fence = "";
      }
    } else if (line.trim() === "$$") {
      math = !math;
    } else if (!math) {
      const open = line.match(FENCE);
      // A block may start here: a blank line came before, and it is not indented (a continuation).
      if (blank && line.trim() && !/^\s/.test(line)) cut = at;
      if (open) fence = open[1];
    }
    blank = !fence && !math && line.trim() === "";
    at = newline + 1;
  }
  return cut;
}

/** Draw `text` into `container`, reusing what `state` (from the last call) already drew. */
export function drawStreaming(container, text, state) {
  let s = state;
  if (!s || !text.startsWith(s.done)) {
    container.replaceChildren();
    s = { done: "", tail: [] };
  }
  const cut = stableEnd(text, s.done.length);
  for (const node of s.tail) node.remove();
  if (cut > s.done.length) {
    container.append(renderMarkdown(text.slice(s.done.length, cut), { highlight: "now" }));
    s.done = text.slice(0, cut);
  }
  const tail = renderMarkdown(text.slice(cut), { highlight: "streaming" });
  s.tail = Array.from(tail.childNodes);
  container.append(tail);
  return s;
}
