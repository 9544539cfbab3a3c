/**
 * Interactive charts: a run's Plotly figure or Vega-Lite (Altair) chart, drawn live
 * from its JSON spec, with hover, zoom and legend toggles.
 *
 * Each library is loaded from assets/vendor/ the first time a chart needs it, so a
 * conversation without charts loads none of it. Both run under the page's strict CSP:
 * Plotly's cartesian bundle (no WebGL traces, so no eval; a fifth of the full bundle, whose
 * first load blocked the page for seconds), and Vega with `ast: true` and its expression
 * interpreter (no Function). Neither may inject <style>: Plotly's style sheets are
 * files in vendor/ (see vendor-charts.mjs), linked under the ids that make Plotly leave
 * them alone, and Vega's tooltip style is in style.css. A chart shows its PNG until its
 * library has drawn it, and keeps showing the PNG if the library or the spec cannot be
 * loaded, or the figure has a trace type that the bundle lacks (Plotly would draw it as
 * a scatter) or that the CSP keeps from drawing.
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
// Drawn as an SVG <image> of a data: URL, which the CSP's img-src refuses: a blank chart,
// and an error in the console.
const DATA_URL_TRACES = new Set(["heatmap", "histogram2d", "image"]);

function loadPlotly() {
  return once("plotly", async () => {
    // Plotly's style sheets as files, each under the id that stops the bundle injecting it
    // as a <style> element (vendor-charts.mjs lists them).
    const sheets = (await vendoredJson("plotly-styles.json")).map((sheet) =>
      added(h("link", { rel: "stylesheet", ...sheet, href: VENDOR + sheet.href })),
    );
    await Promise.all(sheets);
    await script("plotly-cartesian.min.js");
    return window.Plotly;
  });
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

async function drawPlotly(target, spec) {
  // Checked before the library loads, which a figure it cannot draw need not wait for.
  const traces = await plotlyTraces();
  const types = (spec.data || []).map((trace) => trace.type || "scatter");
  const lacking = new Set(types.filter((type) => !traces.has(type) || DATA_URL_TRACES.has(type)));
  if (lacking.size) throw new Error(`Plotly cannot draw ${[...lacking].join(", ")} traces here`);
  const Plotly = await loadPlotly();
  const layout = { height: 420, ...(spec.layout || {}), autosize: true };
  delete layout.width; // the chart takes the message's width (and Plotly's usual height)
  await Plotly.newPlot(target, spec.data || [], layout, { responsive: true, displaylogo: false });
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
