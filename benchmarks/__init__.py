"""Benchmarks for counterpoint against hand-written asyncio and LangGraph baselines."""
