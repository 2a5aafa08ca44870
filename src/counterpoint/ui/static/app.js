// The page: the runs list, a run (DAG, timeline, metrics, controls) and a node's detail.
// Live updates come from the server's event streams (EventSource); nothing is polled.
"use strict";

const TOKEN = (() => {
  const given = new URLSearchParams(location.search).get("token");
  if (given) sessionStorage.setItem("counterpoint-token", given);
  return given || sessionStorage.getItem("counterpoint-token") || "";
})();

function withToken(url) {
  if (!TOKEN) return url;
  return url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN);
}

async function api(url, init) {
  const headers = Object.assign({"X-Counterpoint": "1"}, TOKEN ? {Authorization: "Bearer " + TOKEN} : {});
  const res = await fetch(url, Object.assign({headers}, init || {}));
  const text = await res.text();
  let data;
  try { data = JSON.parse(text); } catch (e) { data = text; }
  if (!res.ok) throw new Error((data && data.error) || `${res.status} ${res.statusText}`);
  return data;
}

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
    else if (attrs[k] != null) e.setAttribute(k, attrs[k]);
  }
  for (const kid of kids.flat()) if (kid != null) e.append(kid.nodeType ? kid : String(kid));
  return e;
}

const enc = encodeURIComponent;
const secs = v => Gantt.secs(v);
const money = v => (v ? "$" + v.toFixed(v < 0.01 ? 5 : 3) : "-");
const when = t => (t ? new Date(t * 1000).toLocaleString() : "-");
const badge = s => h("span", {class: "badge st-" + s, "data-status": s}, s);
const main = document.getElementById("main");
let closeStream = () => {};

function live(on) {
  document.getElementById("conn").className = on ? "on" : "off";
}

function stream(url, handlers) {
  closeStream();
  const es = new EventSource(withToken(url));
  for (const kind in handlers) {
    if (kind !== "failed") es.addEventListener(kind, ev => handlers[kind](JSON.parse(ev.data)));
  }
  es.onopen = () => live(true);
  es.onerror = () => {  // a lost connection is retried; a refused one (404, 401) is not
    live(false);
    if (es.readyState === EventSource.CLOSED && handlers.failed) handlers.failed();
  };
  // a stream with a `deleted` handler was opened with ?watch=1: the server keeps it open
  // once the run ended, to say if the run is deleted, and ends it then
  es.addEventListener("end", () => { if (!handlers.deleted) { es.close(); live(false); } });
  es.addEventListener("deleted", () => { es.close(); live(false); });
  // the store's file was deleted or replaced under the server: nothing more will come
  es.addEventListener("replaced", ev => {
    es.close(); live(false);
    main.replaceChildren(h("p", {class: "error", id: "replaced"}, JSON.parse(ev.data).error));
  });
  closeStream = () => es.close();
}

function go(path) {
  history.pushState({}, "", path + (TOKEN ? "" : ""));
  route();
}

// ------------------------------------------------------------------ runs list
function runsPage() {
  document.title = "counterpoint: runs";
  const search = h("input", {id: "search", type: "search", placeholder: "search run id or graph"});
  // sub-runs are listed on their parent's page; here only when asked (as `runs --sub-runs`)
  const subRuns = h("input", {id: "sub-runs", type: "checkbox"});
  const status = h("select", {id: "status-filter"},
    ["", "running", "waiting", "interrupted", "succeeded", "failed", "cancelled", "timed_out"]
      .map(s => h("option", {value: s}, s || "any status")));
  const body = h("tbody", {});
  const table = h("table", {class: "runs"},
    h("thead", {}, h("tr", {}, ["status", "run", "graph", "started", "duration", "nodes",
      "tokens", "cost"].map(c => h("th", {}, c)))), body);
  main.replaceChildren(h("section", {class: "toolbar"}, search, status,
    h("label", {}, subRuns, " sub-runs")), table);
  let rows = [];
  const paint = () => {
    const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = rows.filter(r => (!status.value || r.status === status.value) &&
      words.every(w => `${r.run_id} ${r.graph} ${r.status}`.toLowerCase().includes(w)));
    body.replaceChildren(...shown.map(r => h("tr", {"data-run": r.run_id},
      h("td", {}, badge(r.status)),
      h("td", {}, h("a", {href: "/runs/" + enc(r.run_id), onclick: e => {
        e.preventDefault(); go("/runs/" + enc(r.run_id));
      }}, r.run_id), r.parent ? h("span", {class: "muted"}, " sub-run") : null),
      h("td", {}, r.graph), h("td", {}, when(r.created_at)),
      h("td", {}, r.duration != null ? secs(r.duration)
        : r.status === "running" ? secs(Date.now() / 1000 - r.created_at) : "-"),
      h("td", {class: "num"}, r.nodes ?? "-"), h("td", {class: "num"}, r.tokens ?? "-"),
      h("td", {class: "num"}, money(r.cost)))));
    if (!shown.length) body.replaceChildren(h("tr", {}, h("td", {colspan: 8, class: "muted"},
      rows.length ? "no run matches" : "no runs in this store yet")));
  };
  search.addEventListener("input", paint);
  status.addEventListener("change", paint);
  const follow = () => stream("/api/runs/stream" + (subRuns.checked ? "?sub_runs=1" : ""),
    {runs: data => {
      rows = data.runs;
      document.getElementById("store").textContent = data.store;
      paint();
    }});
  subRuns.addEventListener("change", follow);
  follow();
}

// ------------------------------------------------------------------ one run
function runPage(runId, nodeParam) {
  document.title = "counterpoint: " + runId;
  const nodes = new Map();
  const state = {run: null, critical: [], metrics: null, selected: nodeParam, unfolded: new Set(),
    dag: null, drawn: false};
  const head = h("section", {id: "run-head"});
  const dagHost = h("div", {id: "dag", class: "panel"});
  const ganttHost = h("div", {id: "gantt", class: "panel"});
  const metricsHost = h("div", {id: "metrics", class: "panel"});
  const childrenHost = h("div", {id: "children"});
  const goalHost = h("section", {id: "goal", hidden: ""});  // a goal run's story
  const detail = h("aside", {id: "detail", class: "panel"});
  main.replaceChildren(head, h("div", {class: "split"},
    h("div", {class: "left"}, goalHost, h("h3", {}, "graph"), dagHost, childrenHost,
      h("h3", {}, "timeline"), ganttHost, h("h3", {}, "metrics"), metricsHost), detail));

  const select = id => {
    state.selected = id;
    history.replaceState({}, "", "/runs/" + enc(runId) + "?node=" + enc(id));
    if (state.dag) state.dag.mark(state.critical, id);
    showNode(detail, runId, id);
  };
  const redraw = () => {
    state.dag = DAG.draw(dagHost, nodes, {critical: state.critical, selected: state.selected,
      unfolded: state.unfolded, onSelect: select, partial: state.partial,
      onUnfold: p => { state.unfolded.add(p); redraw(); }});
    if (!state.drawn) {
      state.drawn = true;
      performance.mark("dag-drawn");
      window.__dagDrawn = performance.now();
    }
  };
  // An update only records what changed; drawing happens at most once a frame, and the
  // timeline (redrawn whole) less often the longer it takes, so a page never falls behind a run that changes constantly.
  const due = {reshaped: false, changed: new Set(), critical: false, last: null, goal: false};
  let scheduled = false, ganttAt = 0, ganttCost = 0;
  const render = () => {
    scheduled = false;
    const u = due.last;
    const now = performance.now();
    if (due.reshaped || !state.dag) {
      redraw();
      due.critical = false;
    } else {
      state.dag.paint(due.changed);
      if (due.critical) state.dag.mark(state.critical, state.selected);  // only what moved
      due.critical = false;
    }
    header(head, u, runId, state.forks, state.parentDeleted);
    if (due.goal) { goalStory(goalHost, state.goal, select); due.goal = false; }
    metrics(metricsHost, u.metrics);
    const done = !["running"].includes(u.run.status);
    if (done && window.__finishedAt === undefined) window.__finishedAt = Date.now();
    if (due.reshaped || done || now - ganttAt > Math.max(250, 8 * ganttCost)) {
      const t = performance.now();
      Gantt.draw(ganttHost, nodes, state.run, state.critical, (id, all) => {
        if (all) { state.ganttAll = true; ganttAt = 0; schedule(); } else select(id);
      }, state.ganttAll, state.partial);
      ganttCost = performance.now() - t;
      ganttAt = t;
    } else setTimeout(schedule, Math.max(250, 8 * ganttCost));  // the timeline catches up
    if (state.selected && due.changed.has(state.selected)) showNode(detail, runId, state.selected);
    due.reshaped = false;
    due.changed = new Set();
  };
  const schedule = () => {
    if (!scheduled && due.last) { scheduled = true; requestAnimationFrame(render); }
  };
  const apply = u => {
    state.run = u.run;
    if ("goal" in u) { state.goal = u.goal; due.goal = true; }  // sent whole when it changed
    if (u.reshaped) { nodes.clear(); due.reshaped = true; }
    // a large run is sent as a subset (u.partial); nodes join and leave it as it runs
    state.partial = u.partial || null;
    for (const id of u.dropped || []) { nodes.delete(id); due.reshaped = true; }
    for (const n of u.nodes) {
      if (u.partial && !nodes.has(n.id)) due.reshaped = true;
      nodes.set(n.id, n); due.changed.add(n.id);
    }
    if (JSON.stringify(u.critical) !== JSON.stringify(state.critical)) due.critical = true;
    state.critical = u.critical;
    due.last = u;
    schedule();
  };
  const children = (list, total) => {
    if (!list || !list.length) return;
    childrenHost.replaceChildren(h("details", {open: ""}, h("summary", {},
      `${total} sub-run(s)` + (total > list.length ? ` (the first ${list.length} listed; ` +
        "tick sub-runs in the runs list and search for this run's id for the rest)" : "")),
      h("ul", {}, list.map(c =>
      h("li", {}, badge(c.status), " ", h("a", {href: "/runs/" + enc(c.run_id)}, c.run_id),
        " ", c.graph)))));
  };
  if (state.selected) showNode(detail, runId, state.selected);
  let ended = false;
  const follow = () => stream("/api/runs/" + enc(runId) + "/stream?watch=1", {update: u => {
    children(u.children, u.children_total);
    if (u.forks) state.forks = u.forks;  // sent with the first frame, like children
    if (u.parent_deleted !== undefined) state.parentDeleted = u.parent_deleted;
    apply(u);
  },
    end: () => { ended = true; window.__streamEnded = true; },
    deleted: d => gone(d.error),
    failed: () => api("/api/runs/" + enc(runId)).catch(err =>
      main.replaceChildren(h("p", {class: "error"}, err.message)))});
  // A finished run's stream stays open only to say if the run is deleted. A browser
  // holds at most 6 connections to one server, so a tab in the background gives its
  // stream up, and opens it again (the first frame is the whole run) when shown.
  parked = false;
  onVisibility = () => {
    if (document.visibilityState === "hidden" && ended && !parked) {
      parked = true; closeStream(); live(false);
    } else if (document.visibilityState === "visible" && parked) {
      parked = false; ended = false; follow();
    }
  };
  follow();
}

let parked = false;
let onVisibility = () => {};
document.addEventListener("visibilitychange", () => onVisibility());

// The run was deleted (by another process) while its page was open: say so, and lead
// back to the list.
function gone(message) {
  main.replaceChildren(h("p", {class: "error", id: "deleted"}, message),
    h("p", {}, h("a", {href: "/", onclick: e => { e.preventDefault(); go("/"); }},
      "back to the runs list")));
}

// A pending approval's answer, from the page (POST .../approvals/ID) or the command line.
// What the server says goes in the header's note: the detail is drawn again as the node
// moves on, the header's note stays.
function answering(runId, a) {
  const reason = h("input", {class: "reason", placeholder: "why (needed to reject)"});
  const send = approved => async () => {
    const note = document.getElementById("note");
    note.textContent = `answering ${a.id}…`; note.className = "muted";
    try {
      note.textContent = (await api(`/api/runs/${enc(runId)}/approvals/${enc(a.id)}`, {
        method: "POST", body: JSON.stringify({approved, reason: reason.value})})).message;
    } catch (e) { note.textContent = e.message; note.className = "error"; }
  };
  return h("div", {class: "answering"},
    h("button", {class: "approve", onclick: send(true)}, "Approve"), " ",
    h("button", {class: "reject", onclick: send(false)}, "Reject"), " ", reason,
    h("div", {class: "muted"}, "or answer with ", h("code", {}, a.answer_with), " or ",
      h("code", {}, `counterpoint reject ${a.id} --reason "..."`)));
}

function header(host, u, runId, forks, parentDeleted) {
  const r = u.run;
  // the note outlives the header's redraws: a control's answer stays shown
  const note = host.querySelector("#note") || h("span", {id: "note", class: "muted"});
  const act = (label, id, path) => h("button", {id, onclick: async () => {
    note.textContent = label + "…";
    try {
      note.textContent = (await api(`/api/runs/${enc(runId)}/${path}`, {method: "POST"})).message;
    } catch (e) { note.textContent = e.message; note.className = "error"; }
  }}, label);
  host.replaceChildren(
    h("h2", {}, r.graph, " ", h("span", {class: "muted"}, r.run_id), " ", badge(r.status)),
    h("div", {class: "facts"},
      h("span", {}, "started ", when(r.created_at)), h("span", {}, "duration ", secs(r.duration)),
      h("span", {}, `${Gantt.count(u.declared)} nodes`),
      h("span", {}, `${r.calls} model calls, ${r.tokens} tokens, `, money(r.cost)),
      r.owner ? h("span", {class: "muted"}, r.owner) : null,
      r.stop_reason ? h("span", {}, "stopped: ", r.stop_reason) : null,
      r.note ? h("span", {id: "run-note", class: "muted"}, r.note) : null,
      r.parent ? h("a", {href: "/runs/" + enc(r.parent)}, "parent run") : null,
      r.forked_from ? h("span", {id: "forked-from"}, "forked from ",
        parentDeleted ? h("span", {class: "muted", title: "deleted from the store " +
          "(counterpoint delete or prune); this fork's own log is whole"},
          `${r.forked_from.run} (deleted)`)
          : h("a", {href: "/runs/" + enc(r.forked_from.run)}, r.forked_from.run),
        r.forked_from.node ? ` at node ${r.forked_from.node}` : "",
        ` (seq ${r.forked_from.seq})`) : null,
      forks && forks.length ? h("span", {id: "forks"}, "forks: ", ...forks.flatMap(
        (f, i) => [i ? ", " : "", h("a", {href: "/runs/" + enc(f.run_id)}, f.run_id)])) : null),
    h("div", {class: "actions"},
      r.can_cancel ? act("Cancel run", "cancel", "cancel") : null,
      r.can_resume ? act("Resume run", "resume", "resume") : null, note));
}

// A goal run's story, as `counterpoint show` tells it (the server's goal_story): the
// goal, each round's summary (its node selects it) and the answer.
function goalStory(host, g, select) {
  host.hidden = !g;
  if (!g) { host.replaceChildren(); return; }
  const plans = g.rounds.filter(r => r.phase === "plan").length;
  host.replaceChildren(h("h3", {}, "goal"), h("div", {class: "panel"},
    h("p", {id: "goal-text"}, g.goal ?? "?"),
    h("p", {class: "muted", id: "goal-counts"}, `${plans} plan, ${g.verify_rounds} verify, ` +
      `${g.replans} re-plan${g.replans === 1 ? "" : "s"}`),
    h("ol", {id: "goal-rounds"}, g.rounds.map(r => h("li", {"data-phase": r.phase,
      class: r.verdict ? "verdict-" + r.verdict : null}, r.summary, " ", r.node ? h("a", {
        href: "#", class: "muted", onclick: e => { e.preventDefault(); select(r.node); }},
      r.node) : null))),
    g.answer ? h("div", {id: "goal-answer"}, h("h4", {}, "answer"),
      h("pre", {class: "value"}, g.answer.text), g.answer.cited.length ? h("p",
        {class: "muted"}, "cites " + g.answer.cited.join(", ")) : null)
      : h("p", {id: "goal-answer", class: "muted"}, "no answer yet")));
}

function metrics(host, m) {
  const rows = [["makespan", secs(m.makespan)], ["critical path", secs(m.critical_path)],
    ["makespan / critical path", m.makespan_over_critical_path?.toFixed(2) ?? "-"],
    ["mean parallel width", m.mean_parallel_width.toFixed(2)],
    ["peak parallel width", m.peak_parallel_width], ["total run time", secs(m.total_run_time)],
    ["queue wait", secs(m.queue_wait)], ["busy time", secs(m.total_busy_time)],
    ["retries", m.retries],
    ...Object.entries(m.waited || {}).map(([c, v]) => ["waited for " + c, secs(v)]),
    ...Object.entries(m.failures || {}).map(([n, c]) => ["failed " + n, c])];
  host.replaceChildren(h("table", {class: "kv"},
    rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))));
}

// ------------------------------------------------------------------ one node
let nodeRequest = 0;

async function showNode(host, runId, nodeId) {
  const mine = ++nodeRequest;
  let d;
  try {
    d = await api(`/api/runs/${enc(runId)}/nodes/${enc(nodeId)}`);
  } catch (e) {
    host.replaceChildren(h("p", {class: "error"}, e.message));
    return;
  }
  if (mine !== nodeRequest) return;
  const opened = new Set([...host.querySelectorAll("details[open]")].map(x => x.dataset.key));
  const fresh = !host.dataset.node || host.dataset.node !== nodeId;
  host.dataset.node = nodeId;
  const section = (title, ...kids) => h("section", {}, h("h4", {}, title), ...kids);
  const value = (v, url) => v == null ? h("span", {class: "muted"}, "none recorded")
    : h("div", {}, h("pre", {class: "value"}, v.text), v.clipped ? h("button", {onclick: async e => {
      e.target.previousSibling.textContent = await api(url).then(x => JSON.stringify(x, null, 2));
      e.target.remove();
    }}, `show all ${v.size} characters`) : null);
  const keep = (key, openByDefault, summary, ...kids) => {
    const det = h("details", {"data-key": key}, h("summary", {}, summary), ...kids);
    if (fresh ? openByDefault : opened.has(key)) det.open = true;
    return det;
  };
  host.replaceChildren(...[
    h("h3", {}, nodeId, " ", badge(d.status)),
    h("div", {class: "facts"}, h("span", {}, `${d.attempts} attempt(s)`),
      h("span", {}, `kind ${d.kind}`), d.calls ? h("span", {}, `${d.calls} model calls, ` +
        `${d.tokens} tokens, `, money(d.cost)) : null),
    d.error ? h("p", {class: "error"}, d.error) : null,
    section("inputs", d.inputs.length ? d.inputs.map(i => keep("in:" + i.node, false,
      h("span", {}, i.node, " ", badge(i.status)),
      value(i.value, `/api/runs/${enc(runId)}/values/${enc(i.node)}`)))
      : h("span", {class: "muted"}, "no dependencies")),
    section("output", value(d.output, `/api/runs/${enc(runId)}/values/${enc(nodeId)}`)),
    (d.approvals || []).length ? section("approvals", h("ol", {class: "approvals"},
      d.approvals.map(a => h("li", {"data-approval": a.id},
        h("q", {}, a.question ?? a.id), " ", badge(a.status),
        h("span", {class: "muted"}, ` ${a.id}`),
        a.by ? ` by ${a.by}` : "", a.reason ? h("span", {class: "muted"}, ` (${a.reason})`) : null,
        a.payload ? keep("ap:" + a.id, false, "payload", h("pre", {}, a.payload.text)) : null,
        a.answer_with ? answering(runId, a) : null)))) : null,
    section("attempts", h("ol", {class: "history"}, d.history.map(a => h("li", {},
      h("span", {class: "muted"}, new Date(a.at * 1000).toLocaleTimeString(), " "),
      a.kind.replace("node_", ""), a.attempt ? ` (attempt ${a.attempt})` : "",
      a.error ? h("span", {class: "error"}, ` ${a.type}: ${a.error}`) : null,
      a.reason ? h("span", {class: "muted"}, " " + a.reason) : null,
      a.traceback ? keep("tb:" + a.seq, false, "traceback", h("pre", {class: "tb"}, a.traceback))
        : null)))),
    d.routing ? section("routing", h("p", {class: "routing"}, d.routing.text)) : null,
    d.samples ? section("samples", h("p", {class: "samples"}, d.samples.text,
      h("span", {class: "muted"}, " " + d.samples.reason))) : null,
    d.model_calls.length ? section("model calls", d.model_calls.map((c, i) =>
      callView(c, i, keep))) : null,
    d.agent_turns.length ? section("agent turns", h("ol", {}, d.agent_turns.map(t => h("li", {},
      `turn ${t.turn ?? ""}`, t.tool_calls?.length ? ` calls ${t.tool_calls.join(", ")}` : "",
      t.replayed ? h("span", {class: "muted"}, " (replayed)") : null,
      h("pre", {class: "value"}, (t.response && t.response.text) || "")))))  : null,
    d.tool_calls.length ? section("tool calls", h("ol", {}, d.tool_calls.map(t => h("li", {},
      t.kind === "tool_call" ? `${t.tool}(${JSON.stringify(t.arguments)})`
        : [`${t.tool} → `, h("span", {class: t.ok === false ? "error" : ""},
          String(t.content ?? "").slice(0, 500))])))) : null,
    d.plan_rounds.length ? section("plan rounds", d.plan_rounds.map(r =>
      h("pre", {class: "round"}, r.lines.join("\n"))),
      d.plan_diffs.filter(p => p.diff.length).map(p => keep(`diff:${p.phase}:${p.round}`, true,
        `plan changed by ${p.phase} round ${p.round}`, h("pre", {class: "diff"},
          p.diff.map(line => h("span", {class: line[0] === "+" ? "add" : line[0] === "-" ? "del"
            : ""}, line + "\n")))))) : null].filter(Boolean));
}

function callView(c, i, keep) {
  const line = c.error ? `${c.model}: failed (${c.error_type}: ${c.error})`
    : c.invalid_output ? `${c.model}: invalid output, re-asked (${c.invalid_output})`
    : `${c.model}${c.cache_hit ? " (cache hit)" : ""}: ${c.input_tokens}+${c.output_tokens} tokens, ` +
      `${money(c.cost)}, ${secs(c.latency)}` + (c.ttft != null ? `, first token ${secs(c.ttft)}` : "") +
      (c.tool_calls ? `, ${c.tool_calls} tool call(s)` : "") + (c.purpose ? ` [${c.purpose}]` : "");
  const body = h("div", {class: "call"});
  const det = keep("call:" + c.seq, i === 0, line, body);
  const load = async () => {
    if (body.dataset.loaded) return;
    body.dataset.loaded = "1";
    if (c.request) {
      const req = await api("/api/blobs/" + c.request);
      body.append(h("h5", {}, "prompt"), ...(req.messages || []).map(m => h("div", {class: "msg"},
        h("b", {}, m.role), h("pre", {class: "prompt"}, typeof m.content === "string" ? m.content
          : JSON.stringify(m.content, null, 2)))));
      if (req.tools?.length) body.append(h("p", {class: "muted"}, "tools: " +
        req.tools.map(t => t.name).join(", ")));
    }
    if (c.response) {
      const res = await api("/api/blobs/" + c.response);
      body.append(h("h5", {}, "answer"), h("pre", {class: "answer"}, res.text ?? ""));
      if (res.tool_calls?.length) body.append(h("h5", {}, "tool calls"), h("pre", {},
        res.tool_calls.map(t => `${t.name}(${JSON.stringify(t.arguments)})`).join("\n")));
    }
  };
  det.addEventListener("toggle", () => det.open && load());
  if (det.open) load();
  return det;
}

// ------------------------------------------------------------------ routing
function route() {
  closeStream();
  onVisibility = () => {};  // the runs list's stream is kept: it is the one to come back to
  const m = /^\/runs\/([^/]+)/.exec(location.pathname);
  if (!m) return runsPage();
  let runId;
  try {
    runId = decodeURIComponent(m[1]);
  } catch (e) {  // a hand-edited or cut link: say so, rather than a page that never loads
    document.title = "counterpoint: not a run";
    return main.replaceChildren(h("p", {class: "error", id: "bad-address"},
      `the address ${location.pathname} does not name a run: "${m[1]}" is not valid ` +
      "percent-encoding (a run id is encoded as the runs list links it); check the link, " +
      "or pick the run from the list"), h("p", {}, h("a", {href: "/", onclick: e => {
        e.preventDefault(); go("/"); }}, "back to the runs list")));
  }
  runPage(runId, new URLSearchParams(location.search).get("node"));
}

window.addEventListener("popstate", route);
document.getElementById("home").addEventListener("click", e => { e.preventDefault(); go("/"); });
route();
