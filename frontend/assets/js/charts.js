/**
 * Interactive charts: a run's Plotly figure or Vega-Lite (Altair) chart, drawn live
 * from its JSON spec, with hover, zoom and legend toggles.
 *
 * Each chart is drawn in a sandboxed frame of its own (chart-frame.js says why: a chart
 * library's long tasks run there, out of the page's process), which loads its library
 * from assets/vendor/ when the chart comes near the screen: a conversation without charts
 * loads none of it, and a long one draws only the charts looked at. A chart shows its PNG
 * until it is drawn, and keeps showing the PNG if the library or the spec cannot be
 * loaded, or the figure has a trace type that Plotly's bundle lacks (Plotly would draw it
 * as a scatter).
 */

import { request } from "./api.js";
import { h } from "./dom.js";
import { whenVisible } from "./visible.js";

const VENDOR = "/assets/vendor/";
const loading = new Map();
// Long enough for a busy machine's first load of a library in a frame; past it, the PNG stays.
const FRAME_ANSWER_MS = 30_000;

/** A vendored JSON file, fetched once (again after a failure). */
function vendoredJson(name) {
  if (!loading.has(name)) {
    const load = fetch(VENDOR + name).then((response) => {
      if (!response.ok) throw new Error(`could not load ${name} (${response.status})`);
      return response.json();
    });
    loading.set(
      name,
      load.catch((error) => {
        loading.delete(name); // a later chart tries again
        throw error;
      }),
    );
  }
  return loading.get(name);
}

/** What the frame needs besides the spec: for Plotly, its style sheets as files, each under
 * the id that stops the bundle injecting it (vendor-charts.mjs lists them), once the
 * figure's traces are known to be ones the bundle draws. */
async function extras(library, spec) {
  if (library !== "plotly") return {};
  const traces = new Set(await vendoredJson("plotly-traces.json"));
  const lacking = new Set((spec.data || []).map((trace) => trace.type || "scatter").filter((type) => !traces.has(type)));
  if (lacking.size) throw new Error(`Plotly cannot draw ${[...lacking].join(", ")} traces here`);
  return { sheets: await vendoredJson("plotly-styles.json") };
}

/** Posts `message` to a chart frame once it says it is ready; resolves with its "drawn"
 * answer, rejects on "failed" or when it does not answer in time. */
function askFrame(frame, message) {
  return new Promise((resolve, reject) => {
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
      const reply = event.data || {};
      if (reply.type === "ready") frame.contentWindow.postMessage(message, "*");
      else if (reply.type === "drawn" || reply.type === "failed") {
        stop();
        if (reply.type === "drawn") resolve(reply);
        else reject(new Error(String(reply.message)));
      }
    }
    window.addEventListener("message", answer);
  });
}

function chartFrame(library, spec) {
  const frame = h("iframe", {
    class: "chart-frame",
    sandbox: "allow-scripts allow-downloads", // an opaque origin: nothing of the page's
    src: "/chart-frame",
    title: `Interactive ${library === "plotly" ? "Plotly" : "Vega-Lite"} chart`,
    testid: "chart-frame",
  });
  // Plotly's figure is as high as its layout says; Vega's says once drawn.
  frame.style.height = `${library === "plotly" ? Number((spec.layout || {}).height) || 420 : 320}px`;
  return frame;
}

async function draw(chart, figure, image, live) {
  try {
    const spec = await request(chart.specUrl);
    const frame = chartFrame(chart.library, spec);
    const drawn = askFrame(frame, { type: "draw", library: chart.library, spec, ...(await extras(chart.library, spec)) });
    // While the library draws, the frame lies unseen over the PNG, out of the page's flow
    // (style.css): the page is laid out again once, when the chart takes the PNG's place.
    live.classList.add("is-drawing");
    live.replaceChildren(frame);
    live.hidden = false;
    const height = Number((await drawn).height);
    if (height > 0) frame.style.height = `${Math.min(height, 4000)}px`;
    live.classList.remove("is-drawing");
    image.hidden = true;
    figure.dataset.state = "live";
  } catch (error) {
    live.hidden = true;
    live.classList.remove("is-drawing");
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
