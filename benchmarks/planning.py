"""Planning benchmark: the planner's task graphs against TaskBench's gold tool graphs.

    python benchmarks/planning.py MODEL [--limit N] [--domains D ...] [--candidates auto|all|N]
                                        [--max-subtasks N] [--timeout S] [--json FILE]
    python benchmarks/planning.py --selfcheck


Each TaskBench record is a user request (``instruction``) and a gold graph of tool
calls: nodes are tool names, edges ``(source, target)`` pairs of tool names. For every
record this plans the instruction with ``make_plan`` and ``Team.default(MODEL,
workers=...)``, the workers being the record's domain's tools (as
:class:`~counterpoint.agents.Tool` objects that are never executed). The plan's
subtasks give the predicted graph: its nodes are the tools the subtasks use, its edges
``(tool of a needed subtask, tool of the subtask)``. Scores follow TaskBench's
``evaluate.py``: node F1 over tool names and edge F1 over (source, target) pairs, both
per record then averaged, and micro (true/false positives and negatives pooled over
the records, as TaskBench reports them), by record type (single, chain, dag) and overall.
A record whose planning failed counts as an empty prediction.

Each record is planned inside a counterpoint run of one node (in a memory store), so the
planner's ``plan_round`` events say whether the plan was valid on the first attempt,
after re-asking, only after repair, or not at all.

Candidate tools (``--candidates``): the planner sees only the tools it is offered.

- ``all``: every tool of the domain (the honest setting).
- ``N``: the record's gold tools plus distractors drawn deterministically (seeded by
  the record id) up to N tools. This leaks the answer (every gold tool is on a short
  list) and inflates the scores; the output says so.
- ``auto`` (default): ``all`` when the domain's tool list fits in about
  ``AUTO_BUDGET_TOKENS`` tokens, else ``N = DEFAULT_CANDIDATES`` (with the leak).

``--selfcheck`` needs no model: a scripted planner answers each record's gold plan and
every score must come out 1 (it checks the loading, the name mapping and the scoring).

The data: ``<evaldata>/taskbench`` (see ``workloads.evaldata_dir``), ``samples/`` for
the records and ``data_<domain>/tool_desc.json`` for each domain's tools.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import datetime  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import counterpoint as cp  # noqa: E402
from benchmarks.workloads import evaldata_dir  # noqa: E402
from counterpoint.agents import Tool  # noqa: E402
from counterpoint.planning import Limits, Team, make_plan  # noqa: E402

DOMAINS = ("huggingface", "multimedia", "dailylifeapis")
TYPES = ("single", "chain", "dag")
AUTO_BUDGET_TOKENS = 2000
"""``--candidates auto`` offers every tool when the worker list is at most this long."""
DEFAULT_CANDIDATES = 20
"""Tools offered when the whole list is too long for ``auto`` (gold + distractors)."""
CHARS_PER_TOKEN = 4
"""Rough size estimate, the same for every model (the real tokenizer is not at hand)."""
ANSWER_CHARS = 1500
"""Model answers are kept in the JSON report up to this many characters each."""

console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)


# --- data ---------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ToolInfo:
    """One TaskBench tool, under the name counterpoint gives it."""

    name: str
    """TaskBench's name (may hold spaces and parentheses)."""
    worker: str
    """The counterpoint worker name: letters, digits, ``_`` and ``-`` only."""
    description: str
    """What the planner reads: TaskBench's description plus input/output types or
    argument names."""


@dataclass(frozen=True, kw_only=True)
class Record:
    """One TaskBench request and its gold tool graph."""

    domain: str
    id: str
    type: str
    instruction: str
    nodes: frozenset[str]
    edges: frozenset[tuple[str, str]]


def worker_name(name: str, taken: Iterable[str] = ()) -> str:
    """A counterpoint tool name for a TaskBench tool name, unique among ``taken``."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:60] or "tool"
    taken = set(taken)
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def load_tools(root: Path, domain: str) -> list[ToolInfo]:
    """The domain's tools from ``data_<domain>/tool_desc.json``, in file order."""
    data = json.loads((root / f"data_{domain}" / "tool_desc.json").read_text(encoding="utf-8"))
    tools: list[ToolInfo] = []
    for node in data["nodes"]:
        desc = node["desc"].strip()
        if "parameters" in node:
            names = ", ".join(p["name"] for p in node["parameters"])
            desc += f" Arguments: {names or 'none'}."
        else:
            desc += (f" Input: {', '.join(node.get('input-type', [])) or 'none'}."
                     f" Output: {', '.join(node.get('output-type', [])) or 'none'}.")
        tools.append(ToolInfo(name=node["id"], description=desc,
                              worker=worker_name(node["id"], (t.worker for t in tools))))
    return tools


def load_records(root: Path, domains: Sequence[str], limit: int | None) -> list[Record]:
    """The sample records of ``domains``, in domain then file order, at most ``limit``."""
    records: list[Record] = []
    for domain in domains:
        path = root / "samples" / f"data_{domain}.sample.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            raw = json.loads(line)
            records.append(Record(
                domain=domain, id=str(raw["id"]), type=raw["type"],
                instruction=raw["instruction"],
                nodes=frozenset(n["task"] for n in raw["task_nodes"]),
                edges=frozenset((e["source"], e["target"]) for e in raw["task_links"])))
    return records[:limit] if limit is not None else records


# --- candidates ---------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Candidates:
    """The tools offered to the planner for one record, and how they were chosen."""

    tools: tuple[ToolInfo, ...]
    policy: str
    """``all`` or ``gold+distractors``."""
    leak: bool
    """Whether the gold tools were put on the list (inflates the scores)."""


def describe(tools: Iterable[ToolInfo]) -> str:
    """The worker list as ``Team.describe_workers`` shows it (for the size estimate)."""
    return "\n".join(f"- {t.worker}: {t.description}" for t in sorted(tools,
                                                                      key=lambda t: t.worker))


def choose(record: Record, tools: Sequence[ToolInfo], setting: str) -> Candidates:
    """The candidate tools for ``record`` under ``--candidates setting``."""
    if setting == "auto":
        fits = len(describe(tools)) / CHARS_PER_TOKEN <= AUTO_BUDGET_TOKENS
        setting = "all" if fits else str(DEFAULT_CANDIDATES)
    if setting == "all":
        return Candidates(tools=tuple(tools), policy="all", leak=False)
    size = int(setting)
    if size >= len(tools):
        return Candidates(tools=tuple(tools), policy="all", leak=False)
    gold = [t for t in tools if t.name in record.nodes]
    others = sorted((t for t in tools if t.name not in record.nodes), key=lambda t: t.name)
    rng = random.Random(f"{record.domain}/{record.id}")  # str seeds are stable across runs
    extra = rng.sample(others, max(0, min(len(others), size - len(gold))))
    chosen = sorted([*gold, *extra], key=lambda t: t.name)
    return Candidates(tools=tuple(chosen), policy="gold+distractors", leak=True)


async def _never(arguments: dict[str, Any]) -> Any:
    raise RuntimeError("TaskBench tools are planned, never executed, in this benchmark")


def as_worker(info: ToolInfo) -> Tool:
    return Tool(name=info.worker, description=info.description,
                parameters={"type": "object", "properties": {}}, runner=_never)


# --- planning one record ------------------------------------------------------------------

@dataclass(kw_only=True)
class Outcome:
    """What planning one record gave, and its scores."""

    domain: str
    id: str
    type: str
    candidates: int
    candidate_policy: str
    leak: bool
    prompt_tokens_estimate: int
    status: str
    """``first``, ``re-asked``, ``repaired`` or ``failed``."""
    failure: str = ""
    """For ``failed``: the error type and message."""
    attempts: int = 0
    """Planning attempts (``plan_round`` events other than the repair)."""
    unreadable: int = 0
    """Attempts whose answer did not validate against the schema (after the model layer's
    own re-asks), re-asked by ``make_plan``."""
    cut_off: int = 0
    """Of those, answers cut off at the token limit before their JSON ended."""
    contradictions: int = 0
    """Answers that said ``decompose`` and contradicted their own subtask count."""
    problems: list[list[str]] = field(default_factory=list)
    """The problems with each attempt (check_plan's, or why the answer did not read)."""
    repairs: list[str] = field(default_factory=list)
    merged: int = 0
    """Subtasks of the valid answer merged into an earlier one they repeat (not a failed
    attempt: ``make_plan`` records them among the repairs of that attempt's round)."""
    model_calls: int = 0
    schema_reasks: int = 0
    """Answers that did not parse or validate against the schema (re-asked by the model layer)."""
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    answers: list[dict[str, str]] = field(default_factory=list)
    """Every model answer (its finish reason and text, cut at ``ANSWER_CHARS``): why a plan
    was wrong or did not parse."""
    decompose: bool | None = None
    subtasks: list[dict[str, Any]] = field(default_factory=list)
    gold_nodes: list[str] = field(default_factory=list)
    gold_edges: list[list[str]] = field(default_factory=list)
    pred_nodes: list[str] = field(default_factory=list)
    pred_edges: list[list[str]] = field(default_factory=list)
    node: dict[str, float] = field(default_factory=dict)
    edge: dict[str, float] = field(default_factory=dict)


def predicted_graph(subtasks: Sequence[dict[str, Any]],
                    names: dict[str, str]) -> tuple[set[str], set[tuple[str, str]]]:
    """Tools used, and (tool of a needed subtask, tool of the subtask) pairs."""
    by_id = {s["id"]: s for s in subtasks}
    nodes = {names[s["worker"]] for s in subtasks}
    edges = {(names[by_id[d]["worker"]], names[s["worker"]])
             for s in subtasks for d in s.get("needs", []) if d in by_id}
    return nodes, edges


def counts(gold: set[Any] | frozenset[Any], pred: set[Any]) -> dict[str, float]:
    """True/false positives, false negatives, precision, recall and F1 of one record."""
    tp, fp, fn = len(gold & pred), len(pred - gold), len(gold - pred)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r,
            "f1": 2 * p * r / (p + r) if p + r else 0.0}


async def plan_record(record: Record, tools: Sequence[ToolInfo], setting: str, model: cp.Model,
                      limits: Limits, store: cp.MemoryStore) -> Outcome:
    """Plan one record in a one-node run and score the plan."""
    chosen = choose(record, tools, setting)
    names = {t.worker: t.name for t in chosen.tools}
    team = Team.default(model, workers={t.worker: as_worker(t) for t in chosen.tools})
    prompt_chars = len(team.planner.instructions) + len(record.instruction) + len(
        team.describe_workers())
    outcome = Outcome(domain=record.domain, id=record.id, type=record.type,
                      candidates=len(chosen.tools), candidate_policy=chosen.policy,
                      leak=chosen.leak, prompt_tokens_estimate=prompt_chars // CHARS_PER_TOKEN,
                      status="failed", gold_nodes=sorted(record.nodes),
                      gold_edges=[list(e) for e in sorted(record.edges)])

    async def plan(ctx: cp.NodeContext) -> dict[str, Any]:
        made, repairs = await make_plan(record.instruction, team, limits, ctx=ctx)
        return {"decompose": made.decompose, "repairs": repairs,
                "subtasks": [s.model_dump(mode="json") for s in made.subtasks]}

    graph = cp.Graph(f"taskbench-{record.domain}-{record.id}")
    graph.add("plan", plan)
    started = time.perf_counter()
    result = await cp.run(graph, store=store)
    outcome.seconds = time.perf_counter() - started
    for event in store.events(result.run_id):
        data = event.data or {}
        if event.kind is cp.EventKind.PLAN_ROUND and data.get("phase") == "plan":
            if data.get("attempt") == "repaired":
                outcome.repairs = list(data.get("repairs", []))
                outcome.status = "repaired"
            else:
                outcome.merged += len(data.get("repairs") or ())
                outcome.attempts += 1
                outcome.problems.append(list(data.get("problems", [])))
                outcome.unreadable += "invalid" in data
                outcome.cut_off += bool(data.get("cut_off"))
                outcome.contradictions += "contradiction" in data
        elif event.kind is cp.EventKind.MODEL_CALL:
            if "invalid_output" in data:
                outcome.schema_reasks += 1
            else:
                outcome.model_calls += 1
                outcome.input_tokens += int(data.get("input_tokens") or 0)
                outcome.output_tokens += int(data.get("output_tokens") or 0)
                outcome.answers.append(_answer(store, data))
    node = result.nodes[cp.NodeId("plan")]
    subtasks: list[dict[str, Any]] = []
    if result.ok:
        made = node.output
        subtasks = made["subtasks"]
        outcome.decompose = made["decompose"]
        outcome.subtasks = subtasks
        outcome.status = ("repaired" if outcome.status == "repaired" else
                          "first" if outcome.attempts == 1 else "re-asked")
    else:
        outcome.status = "failed"
        error = node.error or {}
        outcome.failure = f"{error.get('type', 'error')}: {error.get('message', '')}"
    pred_nodes, pred_edges = predicted_graph(subtasks, names)
    outcome.pred_nodes = sorted(pred_nodes)
    outcome.pred_edges = [list(e) for e in sorted(pred_edges)]
    outcome.node = counts(record.nodes, pred_nodes)
    outcome.edge = counts(record.edges, pred_edges)
    return outcome


def _answer(store: cp.MemoryStore, call: dict[str, Any]) -> dict[str, str]:
    blob = store.blob(call["response"]) if call.get("response") else None
    response = json.loads(blob) if blob else {}
    text = str(response.get("text", ""))
    cut = f"... [{len(text) - ANSWER_CHARS:,} more characters]" \
        if len(text) > ANSWER_CHARS else ""
    return {"purpose": str(call.get("purpose", "")), "finish": str(call.get("finish", "")),
            "text": text[:ANSWER_CHARS] + cut}


# --- summaries ----------------------------------------------------------------------------

def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Scores and plan validity for a group of records.

    ``node_f1`` / ``edge_f1`` average the per-record F1; a record with no gold and no
    predicted edges has no edge F1 and is left out of ``edge_f1`` (``edge_records`` says
    how many were averaged). ``*_micro_f1`` pool true/false positives and negatives over
    the records, as TaskBench's ``evaluate.py`` does.
    """
    def micro(key: str) -> float:
        tp = sum(getattr(o, key)["tp"] for o in outcomes)
        fp = sum(getattr(o, key)["fp"] for o in outcomes)
        fn = sum(getattr(o, key)["fn"] for o in outcomes)
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    with_edges = [o for o in outcomes if o.gold_edges or o.pred_edges]
    statuses = {s: sum(o.status == s for o in outcomes)
                for s in ("first", "re-asked", "repaired", "failed")}
    return {
        "records": len(outcomes),
        "node_f1": mean([o.node["f1"] for o in outcomes]),
        "node_micro_f1": micro("node"),
        "edge_f1": mean([o.edge["f1"] for o in with_edges]),
        "edge_records": len(with_edges),
        "edge_micro_f1": micro("edge"),
        "exact": sum(set(o.pred_nodes) == set(o.gold_nodes) and o.pred_edges == o.gold_edges
                     for o in outcomes),
        "subtasks_mean": mean([len(o.subtasks) for o in outcomes if o.status != "failed"]),
        "attempts": sum(o.attempts for o in outcomes),
        "unreadable": sum(o.unreadable for o in outcomes),
        "merged": sum(o.merged for o in outcomes),
        "cut_off": sum(o.cut_off for o in outcomes),
        "contradictions": sum(o.contradictions for o in outcomes),
        "gold_nodes_mean": mean([len(o.gold_nodes) for o in outcomes]),
        **statuses,
    }


def groups(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    by_type = {t: summarize([o for o in outcomes if o.type == t]) for t in TYPES}
    return {**{t: s for t, s in by_type.items() if s["records"]},
            "overall": summarize(outcomes)}


def _f(x: float) -> str:
    return "-" if x != x else f"{x:.3f}"  # NaN: nothing to score


def _share(n: int, total: int) -> str:
    return f"{n} ({n / total:.0%})" if total else "0"


def print_tables(summary: dict[str, dict[str, Any]]) -> None:
    scores = Table(title="TaskBench planning: scores (per-record mean, and micro as TaskBench "
                         "reports them)")
    for col in ("type", "records", "node F1", "node F1 micro", "edge F1 (records)",
                "edge F1 micro", "exact graph", "subtasks / gold nodes"):
        scores.add_column(col, justify="left" if col == "type" else "right")
    for name, s in summary.items():
        scores.add_row(name, str(s["records"]), _f(s["node_f1"]), _f(s["node_micro_f1"]),
                       f"{_f(s['edge_f1'])} ({s['edge_records']})", _f(s["edge_micro_f1"]),
                       _share(s["exact"], s["records"]),
                       f"{s['subtasks_mean']:.1f} / {s['gold_nodes_mean']:.1f}"
                       if s["subtasks_mean"] == s["subtasks_mean"] else "-")
    console.print(scores)
    valid = Table(title="Plan validity: a valid graph on the first attempt, after re-asking, "
                        "only after repair, or none; planning attempts, and those whose "
                        "answer did not read (cut off at the token limit)")
    for col in ("type", "records", "first attempt", "after re-asking", "repaired", "failed",
                "attempts", "unreadable (cut off)", "repeats merged"):
        valid.add_column(col, justify="left" if col == "type" else "right")
    for name, s in summary.items():
        n = s["records"]
        valid.add_row(name, str(n), _share(s["first"], n), _share(s["re-asked"], n),
                      _share(s["repaired"], n), _share(s["failed"], n), str(s["attempts"]),
                      f"{s['unreadable']} ({s['cut_off']})", str(s["merged"]))
    console.print(valid)


def _record_line(o: Outcome, index: int, total: int) -> str:
    pred = ", ".join(o.pred_nodes) or "-"
    edges = "; ".join(f"{a}->{b}" for a, b in o.pred_edges) or "-"
    gold_edges = "; ".join(f"{a}->{b}" for a, b in o.gold_edges) or "-"
    note = f" [{o.failure[:140]}]" if o.failure else ""
    edge_f1 = f"{o.edge['f1']:.2f}" if o.gold_edges or o.pred_edges else "n/a (no edges)"
    return (f"[{index}/{total}] {o.domain}/{o.id} {o.type}: {o.status}{note}, "
            f"{o.seconds:.0f} s, {o.attempts} attempts ({o.unreadable} unreadable), "
            f"{o.model_calls} calls (+{o.schema_reasks} schema re-asks), "
            f"{o.input_tokens:,} in / {o.output_tokens:,} out tokens\n"
            f"    gold  nodes: {', '.join(o.gold_nodes)} | edges: {gold_edges}\n"
            f"    plan  nodes: {pred} | edges: {edges}\n"
            f"    node F1 {o.node['f1']:.2f}, edge F1 {edge_f1}")


# --- driver -------------------------------------------------------------------------------

def _planner_fingerprint() -> dict[str, Any]:
    """Which planner was measured: the commit, and a hash of the planning sources
    (they may carry uncommitted changes)."""
    src = REPO_ROOT / "src" / "counterpoint" / "planning"
    digest = hashlib.sha256()
    for path in sorted(src.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, text=True,
                                capture_output=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(src)], cwd=REPO_ROOT,
                               text=True, capture_output=True, check=False).stdout.strip()
    except OSError:
        commit, dirty = "", ""
    return {"commit": commit, "planning_dirty": bool(dirty),
            "planning_sha256": digest.hexdigest()[:16]}


def _candidates_arg(value: str) -> str:
    if value in ("auto", "all"):
        return value
    if value.isdigit() and int(value) >= 1:
        return value
    raise argparse.ArgumentTypeError("expected auto, all or a positive number")


def gold_plan(record: Record, tools: Sequence[ToolInfo]) -> dict[str, Any]:
    """The answer of a perfect planner for ``record``: what ``--selfcheck`` scripts."""
    worker = {t.name: t.worker for t in tools}
    order = sorted(record.nodes)
    ids = {name: f"t{i}" for i, name in enumerate(order, 1)}
    return {"subtasks": [
        {"id": ids[name], "task": f"use {name}", "worker": worker[name],
         "needs": sorted(ids[s] for s, t in record.edges if t == name)} for name in order]}


async def run_all(args: argparse.Namespace) -> list[Outcome]:
    root = evaldata_dir() / "taskbench"
    tools = {d: load_tools(root, d) for d in args.domains}
    records = load_records(root, args.domains, args.limit)
    shared = None if args.selfcheck else cp.Model(args.model, timeout=args.timeout)
    limits = Limits(max_subtasks=args.max_subtasks)
    store = cp.MemoryStore()
    outcomes: list[Outcome] = []
    for index, record in enumerate(records, 1):
        model = shared or cp.Model(cp.ScriptedModel([gold_plan(record, tools[record.domain])]))
        outcome = await plan_record(record, tools[record.domain], args.candidates, model,
                                    limits, store)
        outcomes.append(outcome)
        console.print(_record_line(outcome, index, len(records)), markup=False)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/planning.py",
        description="Score the planner's task graphs against TaskBench's gold tool graphs.")
    parser.add_argument("model", nargs="?",
                        help="local:smollm2, provider:id or a counterpoint.toml name")
    parser.add_argument("--selfcheck", action="store_true",
                        help="no model: a scripted planner answers every record's gold plan, "
                             "and every score must be 1 (checks loading, names and scoring)")
    parser.add_argument("--limit", type=int, metavar="N", help="plan at most N records")
    parser.add_argument("--domains", nargs="+", choices=DOMAINS, default=list(DOMAINS),
                        metavar="D", help=f"domains to use (default: all of {', '.join(DOMAINS)})")
    parser.add_argument("--candidates", type=_candidates_arg, default="auto", metavar="auto|all|N",
                        help="tools offered to the planner: every tool of the domain (all); the "
                             "gold tools plus distractors up to N (leaks the answer); auto: all "
                             f"if the list fits about {AUTO_BUDGET_TOKENS:,} tokens, else "
                             f"{DEFAULT_CANDIDATES} (default)")
    parser.add_argument("--max-subtasks", type=int, default=Limits().max_subtasks, metavar="N",
                        help="Limits.max_subtasks (default: %(default)s)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds per model call (default: the model's configured timeout; "
                             "raise it for the embedded model on a busy machine)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="write the summary and every record's plan and scores to FILE")
    args = parser.parse_args(argv)
    if args.selfcheck:
        args.model = "scripted gold plans (--selfcheck)"
    elif not args.model:
        parser.error("give a MODEL (or --selfcheck)")
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    info: dict[str, Any] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": nproc, "python": platform.python_version(), "counterpoint": cp.__version__,
        "loadavg_start": list(os.getloadavg()), **_planner_fingerprint()}
    console.print(f"[b]TaskBench planning[/b] - model {args.model}, candidates "
                  f"{args.candidates}, max_subtasks {args.max_subtasks}; nproc {nproc}, "
                  f"load average {', '.join(f'{x:.2f}' for x in info['loadavg_start'])}; "
                  f"planner sources {info['planning_sha256']}"
                  f"{' (uncommitted changes)' if info['planning_dirty'] else ''}")
    started = time.perf_counter()
    outcomes = asyncio.run(run_all(args))
    info["seconds"] = time.perf_counter() - started
    info["loadavg_end"] = list(os.getloadavg())
    if not outcomes:
        console.print("no records")
        return 1
    summary = groups(outcomes)
    console.print()
    print_tables(summary)
    leaked = sum(o.leak for o in outcomes)
    sizes = sorted({(o.domain, o.candidates, o.candidate_policy) for o in outcomes})
    console.print("candidates: " + "; ".join(f"{d} {n} tools ({p})" for d, n, p in sizes))
    if leaked:
        console.print(f"[red]{leaked} of {len(outcomes)} records were planned with the gold "
                      "tools forced onto a short candidate list: their scores are inflated. "
                      "Use --candidates all for the honest setting.[/red]")
    else:
        console.print("no gold leak: every record was planned with every tool of its domain")
    failures = [o for o in outcomes if o.status == "failed"]
    for o in failures:
        console.print(f"failed {o.domain}/{o.id}: {o.failure[:300]}", markup=False)
    console.print(f"{info['seconds']:.0f} s; load average at end "
                  f"{', '.join(f'{x:.2f}' for x in info['loadavg_end'])}")
    if args.json:
        report = {"machine": info, "model": args.model,
                  "settings": {"candidates": args.candidates, "max_subtasks": args.max_subtasks,
                               "timeout": args.timeout, "limit": args.limit,
                               "domains": args.domains,
                               "auto_budget_tokens": AUTO_BUDGET_TOKENS,
                               "default_candidates": DEFAULT_CANDIDATES},
                  "summary": summary, "gold_leak_records": leaked,
                  "records": [asdict(o) for o in outcomes]}
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {args.json}")
    if args.selfcheck:
        overall = summary["overall"]
        edge = overall["edge_micro_f1"]
        ok = (overall["node_micro_f1"] == 1.0 and overall["first"] == overall["records"]
              and (edge == 1.0 or edge != edge))  # NaN: no record has edges
        console.print("selfcheck: " + ("[green]PASS[/green]" if ok else "[red]FAIL[/red]"))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
