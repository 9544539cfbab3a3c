// Vendored chart files that the pinned packages hold but do not ship as files of their
// own; `make frontend` runs this after `npm ci` (node_modules/ is read, VENDOR is written):
//
// - plotly.css and plotly-<id>.css: the style sheets Plotly's bundle would inject as
//   <style> elements, which the page's Content-Security-Policy refuses (its own rules, and
//   MapLibre's). plotly-styles.json lists them with the element id whose presence makes
//   the bundle skip each injection; chart-frame.js links each file under that id.
// - plotly-traces.json: the trace types the bundle registers. The cartesian bundle has no
//   3D, map, WebGL, polar or treemap traces (among others), and Plotly would draw such a
//   trace as a scatter, its default type: charts.js keeps the chart's PNG instead.
// - vega-interpreter.js: Vega's CSP-safe expression interpreter, as a classic script. It
//   ships as an ES module that imports three names from the bare specifier 'vega-util',
//   which a page without a bundler cannot resolve; the same names come from the vega
//   bundle's global (loaded first by chart-frame.js). And the chart frame's origin is
//   opaque, which would make a module's fetch a cross-origin one: so its one export
//   becomes the global `vegaInterpreter`, and the rest stays inside a function.
//
// Usage: node vendor-charts.mjs <vendor folder>   (run in frontend/)

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import vm from "node:vm";

const vendor = process.argv[2];
if (!vendor) throw new Error("usage: node vendor-charts.mjs <vendor folder>");

function objectLiteralAt(text, start) {
  let depth = 0;
  let quote = null;
  for (let i = start; i < text.length; i += 1) {
    const c = text[i];
    if (quote) {
      if (c === "\\") i += 1;
      else if (c === quote) quote = null;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === "{") depth += 1;
    else if (c === "}") {
      depth -= 1;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  throw new Error("unterminated object literal");
}

// Plotly's src/css/plotcss: selectors use X for the plot and Y for the notifier.
const bundle = readFileSync("node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js", "utf8");
const start = bundle.indexOf('{"X,X div":');
if (start < 0) throw new Error("Plotly's style rules were not found in its bundle");
const rules = vm.runInNewContext(`(${objectLiteralAt(bundle, start)})`, {});
const css = Object.entries(rules)
  .map(([selector, body]) => {
    const full = selector.replace(/^,/, " ,").replace(/X/g, ".js-plotly-plot .plotly").replace(/Y/g, ".plotly-notifier");
    return `${full}{${body}}`;
  })
  .join("\n");
writeFileSync(join(vendor, "plotly.css"), `/* Plotly's own style rules (vendor-charts.mjs) */\n${css}\n`);
// Plotly: `{id: "plotly.js-style-global", class: "no-inline-styles"}` skips its rules.
const sheets = [{ id: "plotly.js-style-global", class: "no-inline-styles", href: "plotly.css" }];
// The bundled style sheets (MapLibre's): `if(!document.getElementById(ID)){...textContent='CSS'`.
const injected = /getElementById\("([0-9a-f]{16,})"\)\)\{var (\w+)=document\.createElement\("style"\);\2\.id="\1",\2\.textContent=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")/g;
for (const [, id, , literal] of bundle.matchAll(injected)) {
  const href = `plotly-${id.slice(0, 12)}.css`;
  writeFileSync(join(vendor, href), vm.runInNewContext(literal, {}));
  sheets.push({ id, href });
}
if ((bundle.match(/createElement\("style"\)/g) || []).length !== sheets.length) {
  throw new Error("Plotly's bundle injects a style sheet that vendor-charts.mjs does not know");
}
writeFileSync(join(vendor, "plotly-styles.json"), `${JSON.stringify(sheets, null, 1)}\n`);

// Each trace module: `{moduleType:"trace",name:"scatter",...}`, registered by the bundle.
const traces = Array.from(bundle.matchAll(/moduleType:"trace",name:"(\w+)"/g), ([, name]) => name);
if (!traces.includes("scatter") || traces.length !== bundle.split('moduleType:"trace"').length - 1) {
  throw new Error("Plotly's trace modules were not all found in its bundle");
}
writeFileSync(join(vendor, "plotly-traces.json"), `${JSON.stringify(traces)}\n`);

const interpreter = readFileSync("node_modules/vega-interpreter/build/vega-interpreter.js", "utf8");
const line = /^import \{ ([\w, ]+) \} from 'vega-util';$/m;
if (!line.test(interpreter)) throw new Error("vega-interpreter's import of vega-util changed");
const exported = /^export \{ (\w+) as expressionInterpreter \};$/m;
if (!exported.test(interpreter)) throw new Error("vega-interpreter's export changed");
const rewritten = interpreter
  .replace(line, "const { $1 } = globalThis.vega; // vendor-charts.mjs")
  .replace(exported, "globalThis.vegaInterpreter = { expressionInterpreter: $1 }; // vendor-charts.mjs")
  .replace(/^\/\/# sourceMappingURL=.*$/m, ""); // the map is not vendored
if (/^(import|export) /m.test(rewritten)) throw new Error("vega-interpreter imports or exports more");
const classic = `// vega-interpreter as a classic script (vendor-charts.mjs)\n(() => {\n"use strict";\n${rewritten}\n})();\n`;
writeFileSync(join(vendor, "vega-interpreter.js"), classic);
