// Installed by benchmarks/ui_render.py before the UI's own scripts: long tasks and long animation
// frames, buffered;
// __armOpen times the next sidebar click; __rafStart/__rafStop time the frames between.
(() => {
const perf = (window.__perf = {longtask: [], loaf: [],
  loafSupported: PerformanceObserver.supportedEntryTypes.includes('long-animation-frame')});
const topScript = (e) => [...e.scripts].sort((a, b) => b.duration - a.duration)[0];
const where = (s) => `${s.invoker} ${s.sourceURL}:${s.sourceCharPosition} ${s.duration | 0}ms`;
const longtask = (e) => perf.longtask.push({start: e.startTime, duration: e.duration});
const loaf = (e) => perf.loaf.push({start: e.startTime, duration: e.duration,
  blocking: e.blockingDuration, scripts: e.scripts.reduce((sum, s) => sum + s.duration, 0),
  layout: e.styleAndLayoutStart ? e.startTime + e.duration - e.styleAndLayoutStart : 0,
  script: topScript(e) ? where(topScript(e)) : ''});
const observers = [['longtask', longtask]].concat(
  perf.loafSupported ? [['long-animation-frame', loaf]] : []).map(([type, keep]) => {
  const observer = new PerformanceObserver((list) => list.getEntries().forEach(keep));
  observer.observe({type, buffered: true});
  return [observer, keep];
});
// Entries reach an observer a little after their task: take those still pending.
const flushLongtasks = () => observers.forEach(([o, keep]) => o.takeRecords().forEach(keep));
const within = (kind, from, to) => perf[kind].filter((e) => e.start >= from && e.start < to);
const longest = (entries) => Math.max(0, ...entries.map((e) => e.duration));
// The next frame has painted when a message posted from its requestAnimationFrame runs.
const afterPaint = (then) => requestAnimationFrame(() => {
  const channel = new MessageChannel();
  channel.port1.onmessage = () => then(performance.now());
  channel.port2.postMessage(null);
});
// Two moments: the last answer (the bottom) painted, and all `count` answers painted.
window.__armOpen = (count, marker, id, answer) => {
  performance.clearResourceTimings();
  window.__open = new Promise((resolve, reject) => {
    let t0 = null, tFirst = null;
    const gaps = [];
    setTimeout(() => reject(new Error(`${marker} was not drawn within 60 s`)), 60000);
    addEventListener('click', () => {
      t0 = performance.now();
      let last = t0;
      const tick = () => {  // not the frame's timestamp: a long task can come after it
        const t = performance.now(); gaps.push(t - last); last = t;
        if (!done) requestAnimationFrame(tick); };
      requestAnimationFrame(tick);
    }, {capture: true, once: true});
    let done = false;
    const bottom = (all) => all.length && all[all.length - 1].textContent.includes(marker);
    const ready = (all) => all.length === count && bottom(all);
    const observer = new MutationObserver(() => {
      if (t0 === null) return;
      const all = document.querySelectorAll(answer);
      if (tFirst === null && bottom(all)) {
        tFirst = 0;
        afterPaint((t) => { tFirst = t; });
      }
      if (!ready(all)) return;
      const tDom = performance.now();
      observer.disconnect();
      afterPaint((tPaint) => {
        done = true;
        flushLongtasks();
        const got = performance.getEntriesByType('resource').find((e) =>
          e.startTime >= t0 && e.name.endsWith('/api/conversations/' + id));
        const tFetch = got ? got.responseEnd : t0;
        resolve({total: tPaint - t0, first: (tFirst || tPaint) - t0, fetch: tFetch - t0,
          render: tDom - tFetch, paint: tPaint - tDom, max_gap: Math.max(0, ...gaps),
          frames: gaps.length, longest_task: longest(within('longtask', t0, tPaint)),
          longest_script: (within('loaf', t0, tPaint).sort((a, b) => b.duration - a.duration)[0]
            || {}).script || ''});
      });
    });
    observer.observe(document.body, {childList: true, subtree: true, characterData: true});
  });
};
// Scroll the newest answer with charts into view; resolve once they are drawn (live, or
// left as their PNG) and painted. Null where the conversation holds no chart.
window.__drawCharts = () => new Promise((resolve) => {
  const charts = [...document.querySelectorAll('[data-testid=chart]')];
  if (!charts.length) return resolve(null);
  const answer = charts[charts.length - 1].closest('.message');
  const mine = charts.filter((c) => answer.contains(c));
  const t0 = performance.now();
  let last = t0, drawn = false;
  const gaps = [];
  const tick = () => {
    const t = performance.now(); gaps.push(t - last); last = t;
    if (!drawn) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  const check = () => {
    if (mine.some((c) => c.dataset.state === 'loading')) return;
    observer.disconnect();
    afterPaint((t) => { drawn = true; flushLongtasks(); resolve({time: t - t0,
      longest_task: longest(within('longtask', t0, t)), max_gap: Math.max(0, ...gaps),
      longest_script: (within('loaf', t0, t).sort((a, b) => b.duration - a.duration)[0]
        || {}).script || '',
      states: mine.map((c) => c.dataset.state)}); });
  };
  const observer = new MutationObserver(check);
  observer.observe(answer, {attributes: true, subtree: true, attributeFilter: ['data-state']});
  answer.scrollIntoView({block: 'center'});
  check();
});
window.__rafStart = () => {
  const s = (window.__raf = {gaps: [], last: null, on: true, from: performance.now()});
  const tick = (t) => { if (!s.on) return; if (s.last !== null) s.gaps.push(t - s.last);
    s.last = t; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
};
window.__rafStop = () => {
  const s = window.__raf, to = performance.now();
  s.on = false;
  flushLongtasks();
  const tasks = within('longtask', s.from, to), loaf = within('loaf', s.from, to);
  return {seconds: (to - s.from) / 1000, frames: s.gaps.length + 1,
    max_gap: Math.max(0, ...s.gaps), gaps_over_50: s.gaps.filter((g) => g >= 50).length,
    longtasks: tasks.length, longest_task: longest(tasks), loaf_supported: perf.loafSupported,
    loafs: loaf.length, longest_loaf: loaf.sort((a, b) => b.duration - a.duration)[0] || null,
    at: tasks.map((e) => [Math.round(e.start - s.from), e.duration]), loaf_list: loaf};
};
})();
