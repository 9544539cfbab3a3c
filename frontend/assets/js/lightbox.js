/**
 * Plots enlarge in a modal <dialog>: a click on a plot opens it; Escape, the
 * Close button or a click anywhere closes it, and focus goes back to the plot.
 */

import { byId } from "./dom.js";

export function mountLightbox() {
  const dialog = byId("lightbox");
  const image = byId("lightbox-image");
  let opener = null;

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-lightbox]");
    if (!button || dialog.open) return;
    opener = button;
    const img = button.querySelector("img");
    image.src = button.dataset.lightbox;
    image.alt = img ? img.alt : "";
    dialog.showModal();
  });
  dialog.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    image.removeAttribute("src");
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  });
}
