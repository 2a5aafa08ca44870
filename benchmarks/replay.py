"""Replay benchmark (R1): how much of a fork comes from the log, and what it saves.

    python benchmarks/replay.py [--quick] [--json FILE]

A research workflow against a real OpenAI-compatible HTTP server on 127.0.0.1
(`counterpoint.testing.OpenAIServer`, every answer sent ``LATENCY`` s after its
request): ``DRAFTS`` draft nodes in parallel (a map), each a model call, one review per
draft (a map over the drafts, a model call on each), a summary of the reviews and a
final answer (a model call each), on a SQLite log. Each round, on a fresh store (so
the response cache starts empty):

* fresh: the workflow runs from the start (the baseline: every call goes to the server);
* replay: ``cp.fork(run, at="summary")``: the drafts and reviews are reused from the log,
  the summary and final answer re-run with the same requests, served by the response
  cache;
* changed: ``cp.fork(run, at="summary", replace={"summary": ...})`` with a summary that
  asks another question: it and the final answer (whose input changed) go to the server.

A first round warms up (imports, the HTTP client, connections) and is not counted; in
every round a trivial run creates the store's file and writer process before timing.
Printed per scenario: model calls served from the log (reused + cache hits) against
calls the server received (counted by the server itself), the share from the log, and
the median wall time of the fork against the fresh run in the same round (ratio).
Target: more than 95% of a replay's calls from the log (Shepherd reports > 95%
prompt-cache reuse on replay).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402

import counterpoint as cp  # noqa: E402
from counterpoint.models import Model  # noqa: E402
from counterpoint.models.openai_compat import OpenAIProvider  # noqa: E402
from counterpoint.testing import OpenAIServer, Reply  # noqa: E402

DRAFTS = 24
LATENCY = 0.05
ROUNDS = 5
QUICK_ROUNDS = 2
TARGET_SHARE = 0.95


def research_graph(model: Model) -> cp.Graph:
    """Drafts in parallel, a review of each, a summary of the reviews, a final answer."""

    async def draft(topic: str) -> str:
        return (await model.generate(f"Draft three facts about {topic}.", max_tokens=32)).text

    async def review(text: str) -> str:
        return (await model.generate(f"Review this draft: {text}", max_tokens=32)).text

    async def summary(reviews: list[str]) -> str:
        return (await model.generate("Summarize: " + " | ".join(reviews), max_tokens=32)).text

    async def final(text: str) -> str:
        return (await model.generate(f"Answer from this summary: {text}", max_tokens=32)).text

    def topics() -> list[str]:
        return [f"topic {i}" for i in range(DRAFTS)]

    graph = cp.Graph("research")
    drafts = graph.map("draft", draft, over=graph.add("topics", topics))
    reviews = graph.map("review", review, over=drafts)
    graph.add("final", final, text=graph.add("summary", summary, reviews=reviews))
    return graph


def changed_summary(model: Model) -> Callable[[list[str]], Awaitable[str]]:
    """The replacement summary: another question over the same reviews."""

    async def summary(reviews: list[str]) -> str:
        return (await model.generate("List the disagreements in: " + " | ".join(reviews),
                                     max_tokens=32)).text

    return summary


def _noop() -> None:
    return None


@dataclass(frozen=True, kw_only=True)
class Scenario:
    label: str
    wall: float
    """Median wall time over rounds (s)."""
    fresh_wall: float
    """Median wall time of the fresh run of the same rounds (s)."""
    from_log: int
    """Model calls served from the log in the last round (reused + cache hits)."""
    reused: int
    cache_hits: int
    sent: int
    """Chat requests the server received during the last round's run."""

    @property
    def share(self) -> float:
        total = self.from_log + self.sent
        return self.from_log / total if total else 0.0

    @property
    def ratio(self) -> float:
        return self.wall / self.fresh_wall


async def one_round(model: Model, server: OpenAIServer,
                    db: str) -> dict[str, tuple[float, cp.RunResult, int]]:
    graph = research_graph(model)
    store = cp.SQLiteStore(db)
    out: dict[str, tuple[float, cp.RunResult, int]] = {}
    try:
        async def timed(label: str, go: Callable[[], Awaitable[cp.RunResult]]) -> cp.RunResult:
            before = len(server.requests)
            started = time.perf_counter()
            result = await go()
            out[label] = (time.perf_counter() - started, result.raise_for_status(),
                          len(server.requests) - before)
            return result

        warm = cp.Graph("warm")  # the store's file and writer process exist before timing
        warm.add("noop", _noop)
        await cp.run(warm, store=store)
        fresh = await timed("fresh", lambda: cp.run(graph, store=store))
        await timed("replay", lambda: cp.fork(fresh.run_id, at="summary", graph=graph,
                                              store=store))
        await timed("changed", lambda: cp.fork(
            fresh.run_id, at="summary", replace={"summary": changed_summary(model)},
            graph=graph, store=store))
    finally:
        store.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args()
    rounds = QUICK_ROUNDS if args.quick else ROUNDS
    walls: dict[str, list[float]] = {"fresh": [], "replay": [], "changed": []}
    with OpenAIServer(default=Reply.echo(), latency=LATENCY) as server, \
            tempfile.TemporaryDirectory() as folder:
        async def every_round() -> dict[str, tuple[float, cp.RunResult, int]]:
            model = Model(OpenAIProvider("bench-replay", "m", base_url=server.base_url,
                                         api_key="x"))
            out: dict[str, tuple[float, cp.RunResult, int]] = {}
            for i in range(rounds + 1):  # round 0 warms up (imports, client, connections)
                out = await one_round(model, server, str(Path(folder) / f"round{i}.db"))
                for label, (wall, _, _) in out.items():
                    if i:
                        walls[label].append(wall)
            return out

        last = cp.new_event_loop().run_until_complete(every_round())
    fresh_wall = statistics.median(walls["fresh"])
    scenarios = []
    for label in ("fresh", "replay", "changed"):
        _, result, sent = last[label]
        usage = result.usage
        assert usage.calls == sent, f"{label}: {usage.calls} calls counted, server got {sent}"
        scenarios.append(Scenario(label=label, wall=statistics.median(walls[label]),
                                  fresh_wall=fresh_wall, from_log=usage.from_log,
                                  reused=usage.reused, cache_hits=usage.cache_hits,
                                  sent=sent))
    print(f"R1 replay: {DRAFTS} drafts + {DRAFTS} reviews + summary + final, "
          f"{LATENCY * 1000:.0f} ms a call, {rounds} rounds (median wall)")
    print(f"{'scenario':10} {'from log':>9} {'reused':>7} {'cached':>7} {'sent':>5} "
          f"{'share':>7} {'wall':>8} {'vs fresh':>9}")
    for s in scenarios:
        print(f"{s.label:10} {s.from_log:9d} {s.reused:7d} {s.cache_hits:7d} {s.sent:5d} "
              f"{s.share:7.1%} {s.wall * 1000:6.0f}ms {s.ratio:8.2f}x")
    replay = scenarios[1]
    ok = replay.share > TARGET_SHARE and scenarios[2].share > TARGET_SHARE
    print(f"target: more than {TARGET_SHARE:.0%} of a replay's calls from the log: "
          f"{'PASS' if ok else 'MISS'} (replay {replay.share:.1%}, changed "
          f"{scenarios[2].share:.1%})")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{**asdict(s), "share": s.share, "ratio": s.ratio} for s in scenarios], indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
