"""The subtask node: its worker does the subtask, and a checked subtask is judged at once.

A subtask named in ``Limits.check`` is judged by the verifier as soon as it ends and redone
once with the gaps found; if the redone result still has gaps, it re-plans at once, while
the plan runs (:mod:`.midrun`), when a round is left for that and a verify round after it.
A worker whose model failed with no healthy fallback left hands the subtask to the
re-planner (:mod:`.escalating`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pydantic

from ..agents import Agent, Tool
from ..context import NodeContext
from ..errors import ModelError
from ..health.escalation import escalation_of
from ..routing import retagged
from .escalating import _escalate
from .fitting import fit
from .midrun import _live_plan, _midrun_replan
from .plan import Subtask, Verdict
from .session import _Earlier, _record, _Session
from .verify import _stop_reason
from .wiring import _text, _unparam


async def _work(session: _Session, subtask: Subtask, results: Mapping[str, Any],
                ctx: NodeContext) -> Any:
    live = _live_plan(session.steps, ctx)
    if live is not None and subtask.id in live[0].cancelled:
        # a re-plan cancelled this node, but the log that a resumed run was rebuilt from
        # lost the cancellation the edit implied, so it started anyway: its result
        # would reach nothing, so no worker is asked for it
        return None
    worker = session.team.workers[subtask.worker]
    agent = worker if isinstance(worker, Agent) else _tool_agent(worker, session)
    if subtask.tags and agent.model.routed:  # route this subtask's calls by its skills
        agent = copy.copy(agent)
        agent.model = retagged(agent.model, subtask.tags)
    context = fit({_unparam(k): _text(v) for k, v in results.items()},
                  session.limits.context_chars)
    task = (f"Overall goal: {session.goal}\nYour subtask ({subtask.id}): {subtask.task}"
            + (f"\nExpected result: {subtask.expected}" if subtask.expected else ""))
    try:
        result = await agent.run(task, context=context or None, ctx=ctx)
    except ModelError as exc:
        problem = escalation_of(exc)
        if problem is None:
            raise  # an ordinary failure: the node's retries and failure policy
        return await _escalate(session, subtask, problem, exc, ctx)
    output = result.output
    if subtask.id in session.limits.check or "*" in session.limits.check:
        earlier = await _Earlier.read(ctx)
        judged = earlier.last("check")  # checked before a crash: keep it
        gaps = list(judged["gaps"]) if judged else await _check(session, subtask, output, ctx)
        if gaps:  # redo once, with what the verifier found
            feedback = "\n".join(f"- {g}" for g in gaps)
            retry = await agent.run(f"{task}\nA first attempt had these problems; avoid "
                                    f"them:\n{feedback}", context=context or None, ctx=ctx)
            output = retry.output
            _record(ctx, {"phase": "check", "subtask": subtask.id, "redone": True,
                          "gaps": gaps})
            await _after_redo(session, subtask, output, ctx, earlier)
    return output.model_dump(mode="json") if isinstance(output, pydantic.BaseModel) else output


async def _after_redo(session: _Session, subtask: Subtask, output: Any, ctx: NodeContext,
                      earlier: _Earlier) -> None:
    """Check a redone subtask again; if gaps remain, re-plan now, while the plan runs.

    Only when a round is left for the re-plan and a verify round after it (and the
    budgets and deadline allow): otherwise the redone result stands, unchecked, and the
    verify rounds judge it. A decision an earlier attempt recorded is used again.
    """
    rejudged = earlier.last("recheck")
    if rejudged is None and earlier.last("replan") is None:
        live = _live_plan(session.steps, ctx)
        if live is None or _stop_reason(live[0], ctx, extra=1) is not None:
            return
    gaps = (list(rejudged["gaps"]) if rejudged is not None
            else await _check(session, subtask, output, ctx, again=True))
    if gaps:
        await _midrun_replan(session.steps, subtask, gaps, output, ctx, earlier)


async def _check(session: _Session, subtask: Subtask, output: Any,
                 ctx: NodeContext, *, again: bool = False) -> list[str]:
    """The verifier's gaps in one subtask's result (empty if it passes); ``again`` for
    the redone result (a ``recheck``)."""
    team = session.team
    generation = await team.verifier.model.generate(
        f"Goal: {session.goal}\n\nSubtask [{subtask.id}]: {subtask.task}"
        + (f" (expected: {subtask.expected})" if subtask.expected else "")
        + f"\nresult: {fit({'result': _text(output)}, session.limits.context_chars)['result']}",
        system=team.verifier.instructions, output=Verdict,
        max_tokens=team.call_tokens("verifier", Verdict), ctx=ctx,
        purpose=f"{'recheck' if again else 'check'} {subtask.id}")
    verdict = generation.output
    assert verdict is not None
    gaps = [g.problem for g in verdict.gaps] or ([] if verdict.complete else
                                                 ["the result does not do the subtask"])
    _record(ctx, {"phase": "recheck" if again else "check", "subtask": subtask.id,
                  "complete": not gaps, "gaps": gaps})
    return gaps


def _tool_agent(tool: Tool, session: _Session) -> Agent:
    return Agent(f"{tool.name}-caller", model=session.team.synthesizer.model,
                 instructions=f"Call the tool {tool.name} to do the subtask, then report "
                              "its result briefly.", tools=[tool],
                 max_turns=session.limits.worker_turns)
