/**
 * Draws one Plotly figure inside the chart frame (chart-frame.html), which charts.js
 * embeds as <iframe sandbox="allow-scripts">.
 *
 * Why a frame: Plotly's bundle, the first time a page runs it, is one main-thread task
 * of most of a second. A sandboxed frame has an opaque origin, and Chromium runs such a
 * frame in a process of its own (its sandboxed-iframe isolation), so that task, and every
 * redraw on hover or zoom, leaves the chat's thread free. The frame is also walled off:
 * its origin is opaque, so it reads no token, storage or cookie of the page's, and it
 * never talks to the API: charts.js fetches the figure and posts it here.
 *
 * A classic script, not a module: the opaque origin makes a module's fetch a
 * cross-origin one. The protocol, with the parent only (`event.source` is checked):
 *   frame → {type: "ready"}
 *   parent → {type: "draw", spec, sheets: [{id, href, class?}], script}
 *   frame → {type: "drawn", height} | {type: "failed", message}
 */
"use strict";

(() => {
  const VENDOR = "/assets/vendor/";
  const FILE = /^[\w.-]+\.(css|js)$/; // a file of vendor/, nothing else
  const reply = (message) => window.parent.postMessage(message, "*");

  function added(element, url) {
    return new Promise((resolve, reject) => {
      element.addEventListener("load", resolve, { once: true });
      element.addEventListener("error", () => reject(new Error(`could not load ${url}`)), { once: true });
      document.head.append(element);
    });
  }

  function vendored(name) {
    if (!FILE.test(String(name))) throw new Error(`not a vendored file: ${name}`);
    return VENDOR + name;
  }

  async function loadPlotly(sheets, script) {
    // Plotly's style sheets as files, each under the id that stops the bundle injecting
    // it as a <style> element, which the CSP refuses (vendor-charts.mjs lists them).
    await Promise.all(
      sheets.map((sheet) => {
        const link = document.createElement("link");
        link.rel = "stylesheet";
        link.id = String(sheet.id);
        if (sheet.class) link.className = String(sheet.class);
        link.href = vendored(sheet.href);
        return added(link, link.href);
      }),
    );
    const element = document.createElement("script");
    element.src = vendored(script);
    await added(element, element.src);
    if (!window.Plotly) throw new Error("Plotly did not load");
    return window.Plotly;
  }

  async function draw({ spec, sheets, script }) {
    const Plotly = await loadPlotly(Array.isArray(sheets) ? sheets : [], script);
    const target = document.getElementById("chart");
    const layout = { height: 420, ...(spec.layout || {}), autosize: true };
    delete layout.width; // the chart takes the frame's width, which is the message's
    await Plotly.newPlot(target, spec.data || [], layout, { responsive: true, displaylogo: false });
    return Math.ceil(target.getBoundingClientRect().height);
  }

  let asked = false;
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent || asked) return;
    const message = event.data || {};
    if (message.type !== "draw" || !message.spec || typeof message.spec !== "object") return;
    asked = true; // one figure per frame
    draw(message).then(
      (height) => reply({ type: "drawn", height }),
      (error) => reply({ type: "failed", message: String((error && error.message) || error) }),
    );
  });
  reply({ type: "ready" });
})();
