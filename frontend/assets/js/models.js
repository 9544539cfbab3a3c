/**
 * The model picker: the server's models (/api/models), each with what it can do once that
 * is known (an operator's setting, or the probe at the model's first use), and the one a
 * new message asks for. The list is read again after each run, when a probe may have ended.
 */

import { request } from "./api.js";
import { byId, h } from "./dom.js";
import { on, state, STORAGE, storage } from "./state.js";

let select = null;
let loads = 0;

/** The model a new message asks for; "" leaves it to the server (its default). */
export function chosenModel() {
  return select && select.value ? select.value : "";
}

/** What a model can do, in a few words: "capable · tools · 8,192 tokens". */
export function describeProfile(profile) {
  if (!profile) return "profile found at its first use";
  const parts = [profile.size === "small" ? "small (simple paths)" : "capable"];
  if (profile.size !== "small") parts.push(profile.native_tools ? "native tools" : "tools in a prompt");
  parts.push(`${Number(profile.context_window).toLocaleString("en-US")} tokens`);
  if (profile.source === "setting") parts.push("set by the operator");
  return parts.join(" · ");
}

async function loadModels() {
  const load = ++loads;
  let listed = null;
  try {
    listed = state.token ? await request("/api/models") : null;
  } catch {
    listed = null;
  }
  if (load !== loads) return;
  const models = listed?.data || [];
  const wanted = select.value || storage.get(STORAGE.model) || "";
  select.replaceChildren(
    ...models.map((model) =>
      h(
        "option",
        { value: model.id, title: describeProfile(model.profile), "data-size": model.profile?.size || "" },
        model.profile ? `${model.id} · ${model.profile.size}` : model.id,
      ),
    ),
  );
  if (models.some((model) => model.id === wanted)) select.value = wanted;
  select.hidden = models.length < 1;
  select.title = describeProfile(models.find((model) => model.id === select.value)?.profile);
}

export function mountModels() {
  select = byId("model-select");
  select.addEventListener("change", () => {
    storage.set(STORAGE.model, select.value);
    select.title = select.selectedOptions[0]?.title || "";
  });
  on("auth", loadModels);
  on("run", () => {
    if (!state.running) loadModels(); // a first use may have probed the model
  });
}
