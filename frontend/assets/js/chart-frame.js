/**
 * Draws one live chart, a Plotly figure or a Vega-Lite (Altair) chart, inside the chart
 * frame (chart-frame.html), which charts.js embeds as
 * <iframe sandbox="allow-scripts allow-downloads">.
 *
 * Why a frame: a chart library's first run is one long main-thread task (Plotly's most of
 * a second, Vega's a fifth), and each later chart's draw is another. A sandboxed frame has
 * an opaque origin, and Chromium runs such a frame in a process of its own (its
 * sandboxed-iframe isolation), so those tasks, and every redraw on hover or zoom, leave the
 * chat's thread free. The frame is walled off as well: with an opaque origin it reads no
 * token, storage or cookie of the page's, and it never talks to the API (its CSP has no
 * connect-src): charts.js fetches the spec and posts it here.
 *
 * Both libraries run under the frame's CSP: Plotly's cartesian bundle (no WebGL traces, so
 * no eval), and Vega with `ast: true` and its expression interpreter (no Function). Neither
 * may inject <style>: Plotly's style sheets are files in vendor/, linked under the ids that
 * make Plotly leave them alone, and Vega's tooltip style is in chart-frame.css.
 *
 * Classic scripts only: the opaque origin would make a module's fetch a cross-origin one.
 * The protocol, with the parent only (`event.source` is checked):
 *   frame → {type: "ready"}
 *   parent → {type: "draw", library: "plotly" | "vega-lite", spec, sheets: [{id, href, class?}]}
 *   frame → {type: "drawn", height} | {type: "failed", message}
 */
"use strict";

(() => {
  const VENDOR = "/assets/vendor/";
  const FILE = /^[\w.-]+\.(css|js)$/; // a file of vendor/, nothing else
  const reply = (message) => window.parent.postMessage(message, "*");

  function vendored(name) {
    if (!FILE.test(String(name))) throw new Error(`not a vendored file: ${name}`);
    return VENDOR + name;
  }

  function added(element) {
    const url = element.src || element.href;
    return new Promise((resolve, reject) => {
      element.addEventListener("load", resolve, { once: true });
      element.addEventListener("error", () => reject(new Error(`could not load ${url}`)), { once: true });
      document.head.append(element);
    });
  }

  function script(name) {
    const element = document.createElement("script");
    element.src = vendored(name);
    return added(element);
  }

  function sheet({ id, href, class: className }) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.id = String(id);
    if (className) link.className = String(className);
    link.href = vendored(href);
    return added(link);
  }

  async function drawPlotly(target, spec, sheets) {
    // Each sheet under the id that stops the bundle injecting it as a <style> element,
    // which the CSP refuses (vendor-charts.mjs lists them).
    await Promise.all(sheets.map(sheet));
    await script("plotly-cartesian.min.js");
    const layout = { height: 420, ...(spec.layout || {}), autosize: true };
    delete layout.width; // the chart takes the frame's width, which is the message's
    await window.Plotly.newPlot(target, spec.data || [], layout, { responsive: true, displaylogo: false });
  }

  async function drawVegaLite(target, spec) {
    await script("vega.min.js"); // vega-lite, vega-embed and the interpreter read `vega`
    await script("vega-lite.min.js");
    await script("vega-embed.min.js");
    await script("vega-interpreter.js");
    await window.vegaEmbed(target, spec, {
      mode: "vega-lite",
      ast: true, // expressions are interpreted, never compiled with Function
      expr: window.vegaInterpreter.expressionInterpreter,
      actions: false,
      defaultStyle: false,
      tooltip: { disableDefaultStyle: true },
    });
  }

  async function draw({ library, spec, sheets }) {
    const target = document.getElementById("chart");
    if (library === "plotly") await drawPlotly(target, spec, Array.isArray(sheets) ? sheets : []);
    else if (library === "vega-lite") await drawVegaLite(target, spec);
    else throw new Error(`no such chart library: ${library}`);
    return Math.ceil(target.getBoundingClientRect().height);
  }

  let asked = false;
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent || asked) return;
    const message = event.data || {};
    if (message.type !== "draw" || !message.spec || typeof message.spec !== "object") return;
    asked = true; // one chart per frame
    draw(message).then(
      (height) => reply({ type: "drawn", height }),
      (error) => reply({ type: "failed", message: String((error && error.message) || error) }),
    );
  });
  reply({ type: "ready" });
})();
