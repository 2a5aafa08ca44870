// The timeline: one row per node, in the order nodes became ready or started. Waiting
// for a slot (ready -> started) is drawn apart from running, hatched; so is the time an
// attempt waited inside its run for a thread or a model slot (recorded as totals, drawn
// at the attempt's start). A node waiting for a person (an approval) is drawn over its
// attempt in the approval colour, as `counterpoint trace` draws it. The critical path's
// rows are highlighted; a legend under the chart names each kind of bar.
"use strict";

const Gantt = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";
  const ROW = 16, LABEL = 150, WIDTH = 900, ROWS = 400;
  const ACTIVE = new Set(["running", "retrying", "ready", "waiting", "failed"]);

  // At most ROWS rows (unless all are asked for): the critical path's, the active and
  // failed nodes', then the latest; a run of thousands of nodes stays quick to redraw.
  function pick(rows, crit, all) {
    if (all || rows.length <= ROWS) return rows;
    const keep = new Set(rows.filter(n => crit.has(n.id) || ACTIVE.has(n.status)).slice(-ROWS));
    for (let i = rows.length - 1; i >= 0 && keep.size < ROWS; i--) keep.add(rows[i]);
    return rows.filter(n => keep.has(n));
  }

  const swatch = (cls, text, hatched) => `<span><svg width="18" height="10"><rect ` +
    `width="18" height="10" class="${cls}"${hatched ? ' fill="url(#hatch)"' : ""}/></svg> ` +
    `${text}</span>`;
  const LEGEND = '<p class="legend" id="gantt-legend">' + [
    swatch("bar st-running", "running"), swatch("bar st-succeeded", "succeeded"),
    swatch("bar st-failed", "failed"), swatch("wait", "ready, waiting for a slot", true),
    swatch("inner-wait", "waited for a thread or a model", true),
    swatch("approval", "waiting for a person (an approval)")].join("") + "</p>";

  const esc = t => String(t).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;"}[c]));

  // Built as one string and parsed once, like the DAG: a live run redraws it often.
  // `partial`: the run was sent as a subset (see dag.js); the note counts the whole run.
  function draw(host, nodes, run, critical, onSelect, all, partial) {
    const now = Date.now() / 1000;
    const t0 = run.created_at || now;
    const crit = new Set(critical || []);
    const started = [...nodes.values()].filter(n => n.ready_at != null || n.spans.length)
      .sort((a, b) => (a.ready_at ?? a.spans[0][0]) - (b.ready_at ?? b.spans[0][0]));
    const rows = pick(started, crit, all);
    if (!rows.length) {
      host.innerHTML = '<p class="muted">no node has started yet</p>';
      return;
    }
    let end = run.finished_at || now;
    for (const n of started) for (const [, s] of n.spans) if (s != null) end = Math.max(end, s);
    const span = Math.max(end - t0, 1e-3);
    const x = t => LABEL + (WIDTH - LABEL) * Math.max(0, t - t0) / span;
    const w = (a, b) => Math.max(1, x(b) - x(a)).toFixed(1);
    const height = rows.length * ROW + 20;
    const out = [partial ? `<p class="muted" id="gantt-some">${rows.length} of ` +
      `${count(partial.total)} nodes: the critical path, active and failed nodes, and their ` +
      "direct neighbours (as in the graph above).</p>" :
      rows.length < started.length ? `<p class="muted" id="gantt-some">${rows.length}` +
      ` of ${count(started.length)} nodes: the critical path, active and failed nodes, then the ` +
      'latest. <button id="gantt-all">show all</button></p>' : "",`<svg xmlns="${SVGNS}" class="gantt" width="${WIDTH}" height="${height}">` +
      '<defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" ' +
      'patternTransform="rotate(45)"><rect width="2" height="4" class="hatch"/></pattern></defs>'];
    rows.forEach((n, i) => {
      const y = i * ROW;
      const id = esc(n.id);
      const label = esc(n.id.length > 22 ? n.id.slice(0, 21) + "…" : n.id);
      out.push(`<g class="row${crit.has(n.id) ? " critical" : ""}" data-row="${id}">` +
        `<rect x="0" y="${y}" width="${WIDTH}" height="${ROW}" class="band"/>` +
        `<text x="4" y="${y + ROW - 4}">${label}</text>`);
      const first = n.spans.length ? n.spans[0][0] : null;
      if (n.ready_at != null && (first == null || first > n.ready_at)) {
        const stop = first ?? now;
        out.push(`<rect x="${x(n.ready_at).toFixed(1)}" y="${y + 3}" ` +
          `width="${w(n.ready_at, stop)}" height="${ROW - 6}" class="wait" fill="url(#hatch)">` +
          `<title>${id}: waited ${secs(stop - n.ready_at)} for a slot</title></rect>`);
      }
      const waited = Object.values(n.waited || {}).reduce((a, b) => a + b, 0);
      n.spans.forEach(([s, e], k) => {
        const stop = e ?? now;
        out.push(`<rect x="${x(s).toFixed(1)}" y="${y + 2}" width="${w(s, stop)}" ` +
          `height="${ROW - 4}" class="bar st-${e == null ? "running" : n.status}">` +
          `<title>${id} attempt ${k + 1}: ${secs(stop - s)}${e == null ? " so far" : ""}` +
          `</title></rect>`);
        if (k === 0 && waited > 0) {
          const causes = Object.entries(n.waited).map(([c, v]) => `${c} ${secs(v)}`).join(", ");
          out.push(`<rect x="${x(s).toFixed(1)}" y="${y + 2}" ` +
            `width="${w(s, Math.min(stop, s + waited))}" height="${ROW - 4}" ` +
            `class="inner-wait" fill="url(#hatch)"><title>${id} waited inside its attempt: ` +
            `${esc(causes)}</title></rect>`);
        }
      });
      for (const [a, b] of n.asked || []) {
        const stop = b ?? run.finished_at ?? now;
        out.push(`<rect x="${x(a).toFixed(1)}" y="${y + 4}" width="${w(a, stop)}" ` +
          `height="${ROW - 8}" class="approval"><title>${id} waited for a person (an ` +
          `approval): ${secs(stop - a)}${b == null ? " so far" : ""}</title></rect>`);
      }
      out.push("</g>");
    });
    out.push(`<text x="${WIDTH - 4}" y="${height - 4}" text-anchor="end" class="axis">` +
      `${secs(span)}</text></svg>`, LEGEND);
    host.innerHTML = out.join("");
    host.onclick = e => {
      if (e.target.id === "gantt-all") return onSelect(null, true);
      const row = e.target.closest("[data-row]");
      if (row) onSelect(row.dataset.row);
    };
  }

  function secs(v) {
    if (v == null) return "-";
    if (v < 1) return (v * 1000).toFixed(0) + " ms";
    if (v < 60) return v.toFixed(2) + " s";
    if (v < 3600) return Math.floor(v / 60) + "m " + String(Math.floor(v % 60)).padStart(2, "0") + "s";
    // summed times (total run time of 50,000 nodes) run to days: "1526m 47s" is unreadable
    if (v < 86400) return Math.floor(v / 3600) + "h " + String(Math.floor(v % 3600 / 60)).padStart(2, "0") + "m";
    return Math.floor(v / 86400) + "d " + String(Math.floor(v % 86400 / 3600)).padStart(2, "0") + "h";
  }

  const count = n => Number(n).toLocaleString("en-US");

  return {draw, secs, count};
})();
