// The timeline: one row per node, in the order nodes became ready or started. Waiting
// for a slot (ready -> started) is drawn apart from running, hatched; so is the time an
// attempt waited inside its run for a thread or a model slot (recorded as totals, drawn
// at the attempt's start). The critical path's rows are highlighted.
"use strict";

const Gantt = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";
  const ROW = 16, LABEL = 150, WIDTH = 900;

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function draw(host, nodes, run, critical, onSelect) {
    const now = Date.now() / 1000;
    const t0 = run.created_at || now;
    const rows = [...nodes.values()].filter(n => n.ready_at != null || n.spans.length)
      .sort((a, b) => (a.ready_at ?? a.spans[0][0]) - (b.ready_at ?? b.spans[0][0]));
    let end = run.finished_at || now;
    for (const n of rows) for (const [, s] of n.spans) if (s != null) end = Math.max(end, s);
    const span = Math.max(end - t0, 1e-3);
    const x = t => LABEL + (WIDTH - LABEL) * Math.max(0, t - t0) / span;
    const height = Math.max(1, rows.length) * ROW + 20;
    host.textContent = "";
    if (!rows.length) {
      host.innerHTML = '<p class="muted">no node has started yet</p>';
      return;
    }
    const svg = el("svg", {width: WIDTH, height, class: "gantt"});
    const defs = el("defs", {}, svg);
    const pat = el("pattern", {id: "hatch", width: 4, height: 4, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)"}, defs);
    el("rect", {width: 2, height: 4, class: "hatch"}, pat);
    const crit = new Set(critical || []);
    rows.forEach((n, i) => {
      const y = i * ROW;
      const g = el("g", {class: "row" + (crit.has(n.id) ? " critical" : ""),
        "data-row": n.id}, svg);
      g.addEventListener("click", () => onSelect(n.id));
      el("rect", {x: 0, y, width: WIDTH, height: ROW, class: "band"}, g);
      const label = el("text", {x: 4, y: y + ROW - 4}, g);
      label.textContent = n.id.length > 22 ? n.id.slice(0, 21) + "…" : n.id;
      const first = n.spans.length ? n.spans[0][0] : null;
      if (n.ready_at != null && (first == null || first > n.ready_at)) {
        const stop = first ?? now;
        el("rect", {x: x(n.ready_at), y: y + 3, width: Math.max(1, x(stop) - x(n.ready_at)),
          height: ROW - 6, class: "wait", fill: "url(#hatch)"}, g)
          .appendChild(title(`${n.id}: waited ${secs(stop - n.ready_at)} for a slot`));
      }
      const waited = Object.values(n.waited || {}).reduce((a, b) => a + b, 0);
      n.spans.forEach(([s, e], k) => {
        const stop = e ?? now;
        const bar = el("rect", {x: x(s), y: y + 2, width: Math.max(1, x(stop) - x(s)),
          height: ROW - 4, class: `bar st-${e == null ? "running" : n.status}`}, g);
        bar.appendChild(title(`${n.id} attempt ${k + 1}: ${secs(stop - s)}` +
          (e == null ? " so far" : "")));
        if (k === 0 && waited > 0) {
          const causes = Object.entries(n.waited).map(([c, v]) => `${c} ${secs(v)}`).join(", ");
          el("rect", {x: x(s), y: y + 2, width: Math.max(1, x(Math.min(stop, s + waited)) - x(s)),
            height: ROW - 4, class: "inner-wait", fill: "url(#hatch)"}, g)
            .appendChild(title(`${n.id} waited inside its attempt: ${causes}`));
        }
      });
    });
    const axis = el("text", {x: WIDTH - 4, y: height - 4, "text-anchor": "end", class: "axis"}, svg);
    axis.textContent = secs(span);
    host.appendChild(svg);
  }

  function title(text) {
    const t = document.createElementNS(SVGNS, "title");
    t.textContent = text;
    return t;
  }

  function secs(v) {
    if (v == null) return "-";
    if (v < 1) return (v * 1000).toFixed(0) + " ms";
    if (v < 60) return v.toFixed(2) + " s";
    return Math.floor(v / 60) + "m " + String(Math.floor(v % 60)).padStart(2, "0") + "s";
  }

  return {draw, secs};
})();
