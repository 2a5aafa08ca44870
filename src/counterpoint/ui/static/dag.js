// The live DAG: a layered layout (longest-path layers, barycentre ordering) drawn as SVG.
// A map's children (`name[i]`) fold into one group node while the map has more than
// FOLD children; clicking the group unfolds it. Node states change in place (a class
// and an attribute on the node's <g>), so a live run only re-lays the graph out when
// its shape changes. A large run is sent as a subset (opts.partial: the critical path,
// active and failed nodes and their direct neighbours); it is drawn with a note saying
// how many of how many nodes are drawn, and the whole run's counts by status.
"use strict";

const DAG = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";
  const W = 132, H = 26, GAPX = 40, GAPY = 10, FOLD = 8;

  // The map node a child id such as "fetch[3]" belongs to, if that map is in the graph.
  function parentMap(id, nodes) {
    const m = /^(.*)\[(\d+)\]$/.exec(id);
    return m && nodes.has(m[1]) ? m[1] : null;
  }

  // Which visible box stands for each node: itself, or its map's folded group.
  function visibleOf(nodes, unfolded) {
    const children = new Map();
    for (const id of nodes.keys()) {
      const p = parentMap(id, nodes);
      if (p) (children.get(p) || children.set(p, []).get(p)).push(id);
    }
    const box = new Map();
    for (const id of nodes.keys()) box.set(id, id);
    for (const [p, kids] of children) {
      if (kids.length > FOLD && !unfolded.has(p)) {
        for (const k of kids) box.set(k, "group:" + p);
      }
    }
    return {box, children};
  }

  function layout(nodes, unfolded) {
    const {box, children} = visibleOf(nodes, unfolded);
    const deps = new Map();   // visible box -> set of visible boxes it depends on
    for (const [id, n] of nodes) {
      const b = box.get(id);
      if (!deps.has(b)) deps.set(b, new Set());
      for (const d of n.deps) {
        const db = box.get(d);
        if (db !== undefined && db !== b) deps.get(b).add(db);
      }
    }
    // longest-path layering, iteratively (the graph may be large: no recursion)
    const layer = new Map();
    const order = [...deps.keys()];
    const indeg = new Map(order.map(b => [b, deps.get(b).size]));
    const users = new Map(order.map(b => [b, []]));
    for (const [b, ds] of deps) for (const d of ds) users.get(d).push(b);
    const queue = order.filter(b => indeg.get(b) === 0);
    for (const b of queue) layer.set(b, 0);
    for (let i = 0; i < queue.length; i++) {
      const b = queue[i];
      for (const u of users.get(b)) {
        layer.set(u, Math.max(layer.get(u) || 0, layer.get(b) + 1));
        indeg.set(u, indeg.get(u) - 1);
        if (indeg.get(u) === 0) queue.push(u);
      }
    }
    for (const b of order) if (!layer.has(b)) layer.set(b, 0); // a cycle in a bad log
    const layers = [];
    for (const b of order) (layers[layer.get(b)] ||= []).push(b);
    // barycentre ordering: each layer sorted by the mean position of its dependencies
    const pos = new Map();
    layers.forEach(l => l.forEach((b, i) => pos.set(b, i)));
    for (let sweep = 0; sweep < 2; sweep++) {
      for (let li = 1; li < layers.length; li++) {
        const l = layers[li];
        const bary = new Map(l.map(b => {
          const ds = [...deps.get(b)];
          return [b, ds.length ? ds.reduce((s, d) => s + pos.get(d), 0) / ds.length : pos.get(b)];
        }));
        l.sort((a, b) => bary.get(a) - bary.get(b));
        l.forEach((b, i) => pos.set(b, i));
      }
    }
    const xy = new Map();
    layers.forEach((l, li) => l.forEach((b, i) => xy.set(b, [li * (W + GAPX), i * (H + GAPY)])));
    return {box, children, deps, xy, layers};
  }

  const esc = t => String(t).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;"}[c]));

  // Draw the graph into `host`; returns a handle to update node states in place. The SVG
  // is built as one string and parsed once (creating tens of thousands of elements one by
  // one is what made a 5,000-node graph slow to appear), and clicks are handled once, on
  // the SVG, for every node.
  function draw(host, nodes, opts) {
    const unfolded = opts.unfolded;
    const {box, children, deps, xy, layers} = layout(nodes, unfolded);
    const width = Math.max(1, layers.length) * (W + GAPX);
    const height = Math.max(1, ...layers.map(l => l.length)) * (H + GAPY);
    const critical = new Set();  // filled by the first mark() below
    const out = [`<svg xmlns="${SVGNS}" class="dag" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}"><g class="edges">`];
    const ends = [];
    for (const [b, ds] of deps) {
      const [x2, y2] = xy.get(b);
      for (const d of ds) {
        const [x1, y1] = xy.get(d);
        out.push(`<path d="M${x1 + W},${y1 + H / 2} C${x1 + W + GAPX / 2},${y1 + H / 2} ` +
          `${x2 - GAPX / 2},${y2 + H / 2} ${x2},${y2 + H / 2}"/>`);
        ends.push([d, b]);
      }
    }
    out.push("</g>");
    const order = [];
    for (const [b, [x, y]] of xy) {
      order.push(b);
      let attr, label, title;
      if (b.startsWith("group:")) {
        const p = b.slice(6), n = children.get(p).length;
        attr = `data-group="${esc(p)}"`;
        label = `${p}[…] ×${n}`;
        title = `${n} map children of ${p}: click to unfold`;
      } else {
        attr = `data-node="${esc(b)}"`;
        label = b.length > 17 ? b.slice(0, 16) + "…" : b;
        title = b;
      }
      out.push(`<g class="node" ${attr} transform="translate(${x},${y})"><rect width="${W}" ` +
        `height="${H}" rx="5"/><text x="8" y="${H / 2 + 4}">${esc(label)}</text>` +
        `<title>${esc(title)}</title></g>`);
    }
    out.push("</svg>");
    const p = opts.partial;
    host.innerHTML = (p ? `<p class="muted" id="dag-some">${esc(p.shown.toLocaleString("en"))} ` +
      `of ${esc(p.total.toLocaleString("en"))} nodes drawn; the critical path, active and ` +
      `failed nodes, and their direct neighbours (${esc(Object.entries(p.counts).map(
        ([s, c]) => `${c.toLocaleString("en")} ${s}`).join(", "))}). Click a node for its ` +
      "detail.</p>" : "") + out.join("");
    const svg = host.querySelector("svg");
    const boxes = new Map();
    const gs = svg.querySelectorAll("g.node");
    order.forEach((b, i) => boxes.set(b, gs[i]));
    const paths = [...svg.querySelectorAll(".edges path")].map((p, i) => [p, ...ends[i]]);
    svg.addEventListener("click", e => {
      const g = e.target.closest("g.node");
      if (!g) return;
      if (g.dataset.group) opts.onUnfold(g.dataset.group);
      else opts.onSelect(g.dataset.node);
    });
    const classOf = b => {
      const status = b.startsWith("group:") ? groupStatus(children.get(b.slice(6)), nodes)
        : nodes.get(b).status;
      return [status, `node st-${status}` + (critical.has(b) ? " critical" : "") +
        (opts.selected === b ? " selected" : "")];
    };
    const incident = new Map();  // box -> the edges that end at it
    for (const e of paths) {
      for (const b of [e[1], e[2]]) (incident.get(b) || incident.set(b, []).get(b)).push(e);
    }
    const repaint = touched => {
      for (const b of touched) {
        const g = boxes.get(b);
        if (!g) continue;
        const [status, cls] = classOf(b);
        if (g.getAttribute("class") !== cls) g.setAttribute("class", cls);
        if (g.dataset.status !== status) g.dataset.status = status;
      }
    };
    const handle = {
      box, boxes,
      // Give each box its node's state (a group: the most pressing of its children's).
      paint(changed) {
        const touched = new Set();
        for (const id of changed) {
          const b = box.get(id);
          if (b !== undefined) touched.add(b);
        }
        repaint(touched);
      },
      // Highlight the critical path (and the selected node), touching only the boxes and
      // edges whose highlight changes: a live run's critical path moves with every update.
      mark(criticalIds, selected) {
        const next = new Set();
        for (const c of criticalIds || []) next.add(box.get(c) || c);
        const changed = new Set();
        for (const b of critical) if (!next.has(b)) changed.add(b);
        for (const b of next) if (!critical.has(b)) changed.add(b);
        if (opts.selected !== selected) {
          changed.add(box.get(opts.selected) || opts.selected);
          changed.add(box.get(selected) || selected);
        }
        critical.clear();
        for (const b of next) critical.add(b);
        opts.selected = selected;
        const edges = new Set();
        for (const b of changed) for (const e of incident.get(b) || []) edges.add(e);
        for (const [p, d, b] of edges) {
          const cls = critical.has(d) && critical.has(b) ? "critical" : "";
          if ((p.getAttribute("class") || "") !== cls) p.setAttribute("class", cls);
        }
        repaint(changed);
      },
    };
    handle.paint(nodes.keys());
    handle.mark(opts.critical, opts.selected);
    return handle;
  }

  const URGENCY = ["failed", "running", "retrying", "waiting", "ready", "blocked", "cancelled",
    "pending", "skipped", "succeeded"];

  function groupStatus(kids, nodes) {
    let best = URGENCY.length;
    for (const k of kids) best = Math.min(best, URGENCY.indexOf(nodes.get(k).status));
    return URGENCY[best] || "pending";
  }

  return {draw};
})();
