// The live DAG: a layered layout (longest-path layers, barycentre ordering) drawn as SVG.
// A map's children (`name[i]`) fold into one group node while the map has more than
// FOLD children; clicking the group unfolds it. Node states change in place (a class
// and an attribute on the node's <g>), so a live run only re-lays the graph out when
// its shape changes.
"use strict";

const DAG = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";
  const W = 132, H = 26, GAPX = 40, GAPY = 10, FOLD = 8;

  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

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

  // Draw the graph into `host`; returns a handle to update node states in place.
  function draw(host, nodes, opts) {
    const unfolded = opts.unfolded;
    const {box, children, deps, xy, layers} = layout(nodes, unfolded);
    const width = Math.max(1, layers.length) * (W + GAPX);
    const height = Math.max(1, ...layers.map(l => l.length)) * (H + GAPY);
    host.textContent = "";
    const svg = el("svg", {width, height, viewBox: `0 0 ${width} ${height}`, class: "dag"});
    const edges = el("g", {class: "edges"}, svg);
    const critical = new Set(opts.critical || []);
    const paths = [];
    for (const [b, ds] of deps) {
      const [x2, y2] = xy.get(b);
      for (const d of ds) {
        const [x1, y1] = xy.get(d);
        const p = el("path", {d: `M${x1 + W},${y1 + H / 2} C${x1 + W + GAPX / 2},${y1 + H / 2} ` +
          `${x2 - GAPX / 2},${y2 + H / 2} ${x2},${y2 + H / 2}`}, edges);
        paths.push([p, d, b]);
      }
    }
    const boxes = new Map();
    for (const [b, [x, y]] of xy) {
      const g = el("g", {transform: `translate(${x},${y})`, class: "node"}, svg);
      el("rect", {width: W, height: H, rx: 5}, g);
      const label = el("text", {x: 8, y: H / 2 + 4}, g);
      const title = el("title", {}, g);
      if (b.startsWith("group:")) {
        const p = b.slice(6);
        g.dataset.group = p;
        label.textContent = `${p}[…] ×${children.get(p).length}`;
        title.textContent = `${children.get(p).length} map children of ${p}: click to unfold`;
        g.addEventListener("click", () => opts.onUnfold(p));
      } else {
        g.dataset.node = b;
        label.textContent = b.length > 17 ? b.slice(0, 16) + "…" : b;
        title.textContent = b;
        g.addEventListener("click", () => opts.onSelect(b));
      }
      boxes.set(b, g);
    }
    host.appendChild(svg);
    const handle = {
      box, boxes,
      // Give each box its node's state (a group: the most pressing of its children's).
      paint(changed) {
        const touched = new Set();
        for (const id of changed) {
          const b = box.get(id);
          if (b !== undefined) touched.add(b);
        }
        for (const b of touched) {
          const g = boxes.get(b);
          const status = b.startsWith("group:") ? groupStatus(children.get(b.slice(6)), nodes)
            : nodes.get(b).status;
          g.setAttribute("class", `node st-${status}` + (critical.has(b) ? " critical" : "") +
            (opts.selected === b ? " selected" : ""));
          g.dataset.status = status;
        }
      },
      mark(criticalIds, selected) {
        critical.clear();
        for (const c of criticalIds || []) critical.add(box.get(c) || c);
        opts.selected = selected;
        for (const [p, d, b] of paths) {
          p.setAttribute("class", critical.has(d) && critical.has(b) ? "critical" : "");
        }
        handle.paint(nodes.keys());
      },
    };
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
