// The run page's only script of its own (htmx and its SSE extension do the streaming).
// 1. Late or repeated messages change nothing: each SSE message carries its event's seq as its id; a message of
//    a kind (timeline, topology, status, …) at or below the last seq applied for that kind — at first, the seq the
//    page was rendered at (#run's data-seq) — is dropped before htmx swaps it, so a replayed stretch after a
//    reconnect can neither double a timeline row nor move a node back.
// 2. Resume where the page is: the stream URL's ?after= follows the last seq applied, so when the SSE extension
//    opens a fresh EventSource after an error it asks for what came next (the browser's own reconnect sends
//    Last-Event-ID, which the server prefers).
// 3. The permalink's Copy button.
// 4. A running run's elapsed time ticks each second from what the server last rendered (#elapsed's data-seconds),
//    timed by this browser's clock from that render on, so a clock that differs from the server's does not matter.
// 5. The "whole question" toggle shows only when the title is cut to its three lines.
// 6. Follow-up and refresh appear when the run finishes.
(() => {
  "use strict";
  const applied = {};

  document.addEventListener("htmx:sseBeforeMessage", (evt) => {
    const msg = evt.detail;
    const seq = Number.parseInt(msg && msg.lastEventId, 10);
    const run = document.getElementById("run");
    if (!Number.isFinite(seq) || !run) return;
    const kind = msg.type || "message";
    const floor = applied[kind] !== undefined ? applied[kind] : Number.parseInt(run.dataset.seq || "0", 10);
    if (seq <= floor) {
      evt.preventDefault();
      return;
    }
    applied[kind] = seq;
    const stream = run.getAttribute("sse-connect");
    if (stream) {
      const url = new URL(stream, window.location.href);
      if (seq > Number.parseInt(url.searchParams.get("after") || "0", 10)) {
        url.searchParams.set("after", String(seq));
        run.setAttribute("sse-connect", url.pathname + url.search);
      }
    }
  });

  document.addEventListener("click", async (evt) => {
    const button = evt.target.closest("button[data-copy]");
    if (!button) return;
    const field = document.querySelector(button.dataset.copy);
    if (!field) return;
    field.select();
    let ok = false;
    try {
      await navigator.clipboard.writeText(field.value);
      ok = true;
    } catch (_) {
      ok = document.execCommand && document.execCommand("copy");
    }
    button.textContent = ok ? "Copied" : "Select and copy";
    button.dataset.copied = ok ? "yes" : "no";
  });

  // The words of veracity.web.view.duration for whole seconds.
  const duration = (seconds) => {
    const s = Math.floor(seconds);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
    return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
  };
  let rendered = { el: null, seconds: 0, at: 0 };
  const tick = () => {
    const el = document.getElementById("elapsed");
    if (!el) return;
    if (el !== rendered.el) {
      rendered = { el, seconds: Number.parseFloat(el.dataset.seconds || "0"), at: performance.now() };
    }
    el.textContent = duration(rendered.seconds + (performance.now() - rendered.at) / 1000);
  };
  // Often enough that a freshly swapped-in status is picked up within a quarter of a second.
  setInterval(tick, 250);

  const fitTitle = () => {
    const title = document.getElementById("question-title");
    const whole = document.getElementById("whole-question");
    if (title && whole) whole.hidden = title.scrollHeight <= title.clientHeight + 1;
  };
  document.addEventListener("DOMContentLoaded", fitTitle);
  window.addEventListener("resize", fitTitle);

  const reveal = () => document.querySelectorAll("button[data-copy][hidden]").forEach((b) => (b.hidden = false));
  document.addEventListener("DOMContentLoaded", reveal);
  document.addEventListener("htmx:afterSettle", reveal);
  document.addEventListener("htmx:sseMessage", reveal);

  // 4. The report's next steps (follow up, refresh) appear once the run has finished with a report.
  document.addEventListener("htmx:sseMessage", (evt) => {
    if (!evt.detail || evt.detail.type !== "report" || !document.querySelector("#report article.report")) return;
    document.querySelectorAll("[data-when-done][hidden]").forEach((el) => (el.hidden = false));
  });
})();
