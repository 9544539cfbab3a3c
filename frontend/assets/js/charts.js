/**
 * Interactive charts: a run's Plotly figure or Vega-Lite (Altair) chart, drawn live
 * from its JSON spec, with hover, zoom and legend toggles.
 *
 * A Plotly figure is drawn in a sandboxed frame (chart-frame.js): Plotly's first run is
 * one task of most of a second, which there leaves the chat's thread free. Vega runs in
 * the page, loaded from assets/vendor/ the first time a chart needs it (a conversation
 * without charts loads none of it), with `ast: true` and its expression interpreter (no
 * Function), under the page's strict CSP; its tooltip style is in style.css, since
 * vega-embed's own would be an inline <style>. The frame loads Plotly's cartesian bundle
 * (no WebGL traces, so no eval). A chart shows its PNG until it is drawn, and keeps
 * showing the PNG if the library or the spec cannot be loaded, or the figure has a trace
 * type that the bundle lacks (Plotly would draw it as a scatter).
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { whenVisible } from "./visible.js";

const VENDOR = "/assets/vendor/";
const loading = new Map();

function once(name, load) {
  if (!loading.has(name)) {
    loading.set(
      name,
      load().catch((error) => {
        loading.delete(name); // a later chart tries again
        throw error;
      }),
    );
  }
  return loading.get(name);
}

function added(element) {
  return new Promise((resolve, reject) => {
    element.addEventListener("load", resolve, { once: true });
    element.addEventListener("error", () => reject(new Error(`could not load ${element.src || element.href}`)), { once: true });
    document.head.append(element);
  });
}

const script = (name) => added(h("script", { src: VENDOR + name }));

async function vendoredJson(name) {
  const response = await fetch(VENDOR + name);
  if (!response.ok) throw new Error(`could not load ${name} (${response.status})`);
  return response.json();
}

/** The trace types Plotly's bundle draws (vendor-charts.mjs lists them). */
const plotlyTraces = () => once("plotly-traces", async () => new Set(await vendoredJson("plotly-traces.json")));
// Plotly's style sheets as files, each under the id that stops the bundle injecting it as
// a <style> element (vendor-charts.mjs lists them); the chart frame links them.
const plotlyStyles = () => once("plotly-styles", () => vendoredJson("plotly-styles.json"));
const PLOTLY = "plotly-cartesian.min.js";
// Long enough for a busy machine's first load of Plotly in the frame; past it, the PNG stays.
const FRAME_ANSWER_MS = 30_000;

/** Draws a Plotly figure in a sandboxed frame (chart-frame.js says why and how). */
async function drawPlotly(target, spec) {
  // Checked before a frame loads Plotly, which a figure it cannot draw need not wait for.
  const traces = await plotlyTraces();
  const lacking = new Set((spec.data || []).map((trace) => trace.type || "scatter").filter((type) => !traces.has(type)));
  if (lacking.size) throw new Error(`Plotly cannot draw ${[...lacking].join(", ")} traces here`);
  const sheets = await plotlyStyles();
  const height = Number((spec.layout || {}).height) || 420;
  const frame = h("iframe", {
    class: "chart-frame",
    sandbox: "allow-scripts allow-downloads", // an opaque origin: nothing of the page's
    src: "/chart-frame",
    title: "Interactive chart",
    testid: "chart-frame",
  });
  frame.style.height = `${height}px`;
  const drawn = new Promise((resolve, reject) => {
    const stop = () => {
      window.removeEventListener("message", answer);
      clearTimeout(timer);
    };
    const timer = setTimeout(() => {
      stop();
      reject(new Error("the chart frame did not answer"));
    }, FRAME_ANSWER_MS);
    function answer(event) {
      if (event.source !== frame.contentWindow) return; // its origin is opaque ("null")
      const message = event.data || {};
      if (message.type === "ready") {
        frame.contentWindow.postMessage({ type: "draw", spec, sheets, script: PLOTLY }, "*");
      } else if (message.type === "drawn") {
        stop();
        const drawnHeight = Number(message.height);
        if (drawnHeight > 0) frame.style.height = `${Math.min(drawnHeight, 4000)}px`;
        resolve();
      } else if (message.type === "failed") {
        stop();
        reject(new Error(String(message.message)));
      }
    }
    window.addEventListener("message", answer);
  });
  target.replaceChildren(frame);
  await drawn;
}

function loadVega() {
  return once("vega", async () => {
    await script("vega.min.js"); // vega-lite and vega-embed read the `vega` global
    await script("vega-lite.min.js");
    await script("vega-embed.min.js");
    const { expressionInterpreter } = await import(`${VENDOR}vega-interpreter.mjs`);
    return { embed: window.vegaEmbed, expr: expressionInterpreter };
  });
}

async function drawVegaLite(target, spec) {
  const { embed, expr } = await loadVega();
  await embed(target, spec, {
    mode: "vega-lite",
    ast: true, // expressions are interpreted, never compiled with Function
    expr,
    actions: false,
    defaultStyle: false,
    tooltip: { disableDefaultStyle: true },
  });
}

async function draw(chart, figure, image, live) {
  try {
    const spec = await request(chart.specUrl);
    live.hidden = false;
    await (chart.library === "plotly" ? drawPlotly(live, spec) : drawVegaLite(live, spec));
    image.hidden = true;
    figure.dataset.state = "live";
  } catch (error) {
    live.hidden = true;
    live.replaceChildren();
    figure.dataset.state = "static";
    console.warn(`The ${chart.library} chart is shown as an image:`, error);
  }
}

/** A chart's figure: its PNG at once, replaced by the live chart once drawn, when the
 * figure comes near the screen (a long conversation draws only the charts looked at). */
export function chartView(chart) {
  const name = chart.pngPath.split("/").pop() || "chart";
  const image = h("img", { src: chart.pngUrl, alt: `Chart ${name}`, testid: "chart-image" });
  const live = h("div", { class: "chart-live", testid: "chart-live", hidden: true });
  const figure = h(
    "figure",
    { class: "plot chart", testid: "chart", dataset: { url: chart.specUrl, library: chart.library, state: "loading" } },
    image,
    live,
    h("figcaption", { class: "muted small" }, name),
  );
  whenVisible(figure, () => draw(chart, figure, image, live));
  return figure;
}
