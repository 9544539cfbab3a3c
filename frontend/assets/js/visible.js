/**
 * Work that waits until its element comes near the screen: drawing a live chart,
 * fetching a table's summary. A long conversation then opens without doing it for
 * every chart and table it holds, only for those the user scrolls to.
 *
 * One IntersectionObserver serves them all. Its root is the message scroller, so
 * the margin (a screen's height above and below) counts inside that scroller.
 */

const waiting = new WeakMap(); // element → callbacks to run once it is near the screen
let observer = null;

function observe(element) {
  if (!observer) {
    observer = new IntersectionObserver(
      (entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          observer.unobserve(entry.target);
          const callbacks = waiting.get(entry.target) || [];
          waiting.delete(entry.target);
          for (const callback of callbacks) callback();
        }
      },
      { root: document.getElementById("scroller"), rootMargin: "100% 0px" },
    );
  }
  observer.observe(element);
}

/** Run `callback` once `element` is on screen or within a screen's height of it. */
export function whenVisible(element, callback) {
  if (typeof IntersectionObserver !== "function") {
    queueMicrotask(callback);
    return;
  }
  const callbacks = waiting.get(element);
  if (callbacks) {
    callbacks.push(callback);
    return;
  }
  waiting.set(element, [callback]);
  observe(element);
}
