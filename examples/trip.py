"""A weekend-trip planner: the graph counterpoint's quick start runs.

Everything here is local and deterministic (no network, no API key): each
"lookup" sleeps a little to stand in for an API or model call. It shows the
parts of a graph that matter for agent workloads: independent lookups in
parallel, a fan-out over a list known only at run time, a branch, a flaky step
healed by retries, and a join that waits for everything it needs.

    counterpoint run examples/trip.py
"""

from __future__ import annotations

import asyncio
import hashlib

import counterpoint as cp

CITIES = ["Lisbon", "Kraków", "Porto", "Valencia"]


def _score(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:4], 16) % 100


async def weather(city: str) -> dict[str, int | str]:
    """Forecast for the weekend (stands in for a weather API)."""
    await asyncio.sleep(0.2)
    return {"city": city, "sunny_days": _score(city, "sun") % 3, "high_c": 14 + _score(city) % 12}


async def prices(city: str) -> dict[str, int | str]:
    """Cheapest return flight and two hotel nights (stands in for a travel API)."""
    await asyncio.sleep(0.3)
    return {"city": city, "eur": 120 + _score(city, "eur") * 3}


_attempts: dict[str, int] = {}


async def events(city: str) -> list[str]:
    """What is on that weekend: this service is flaky and fails on the first call."""
    _attempts[city] = _attempts.get(city, 0) + 1
    await asyncio.sleep(0.1)
    if _attempts[city] == 1:
        raise ConnectionError(f"events API for {city} timed out (transient)")
    return [f"{city} food market", f"{city} jazz night", f"{city} old town walk"]


async def shortlist(forecasts: list[dict[str, int | str]],
                    quotes: list[dict[str, int | str]]) -> list[str]:
    """Cities worth it: some sun and a sane price."""
    cost = {q["city"]: q["eur"] for q in quotes}
    ranked = sorted(forecasts, key=lambda f: (-int(f["sunny_days"]), int(cost[f["city"]])))
    return [str(f["city"]) for f in ranked[:3]]


async def rate(activity: str) -> dict[str, int | str]:
    """Score one activity (stands in for a small model call)."""
    await asyncio.sleep(0.05)
    return {"activity": activity, "score": _score(activity)}


async def decide(picks: list[str]) -> cp.Choose:
    """Go if anything made the shortlist, else plan a staycation."""
    return cp.Choose("itinerary" if picks else "staycation", value=picks)


async def itinerary(picks: list[str], ratings: list[dict[str, int | str]]) -> str:
    best = sorted(ratings, key=lambda r: -int(r["score"]))[:3]
    things = ", ".join(str(r["activity"]) for r in best)
    return f"Go to {picks[0]} (backup: {', '.join(picks[1:]) or 'none'}). Do: {things}."


async def staycation() -> str:
    return "Stay home: nothing sunny and affordable this weekend."


def build() -> cp.Graph:
    g = cp.Graph("trip")
    forecasts = [g.add(f"weather_{i}", weather, city=c) for i, c in enumerate(CITIES)]
    quotes = [g.add(f"prices_{i}", prices, city=c) for i, c in enumerate(CITIES)]
    collect = g.add("collect", _collect, **{f"f{i}": f for i, f in enumerate(forecasts)},
                    **{f"q{i}": q for i, q in enumerate(quotes)})
    picks = g.add("shortlist", shortlist, forecasts=collect["forecasts"],
                  quotes=collect["quotes"])
    what_on = g.add("events", events, city=picks[0], retries=2)
    ratings = g.map("rate", rate, over=what_on)
    choice = g.add("decide", decide, picks=picks)
    g.add("itinerary", itinerary, picks=picks, ratings=ratings, after=[choice])
    g.add("staycation", staycation, after=[choice])
    return g


async def _collect(**parts: dict[str, int | str]) -> dict[str, list[dict[str, int | str]]]:
    return {"forecasts": [v for k, v in sorted(parts.items()) if k.startswith("f")],
            "quotes": [v for k, v in sorted(parts.items()) if k.startswith("q")]}


graph = build()

if __name__ == "__main__":
    result = cp.run_sync(graph)
    print(result.status, result.outputs.get("itinerary") or result.outputs.get("staycation"))
