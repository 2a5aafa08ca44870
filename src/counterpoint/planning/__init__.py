"""Planning: a goal becomes a task graph that runs, is verified and re-planned live.

``make_plan`` asks the planner (decompose or not, subtasks, workers, dependencies)
and validates the plan; ``goal_graph`` turns a goal into a graph that plans when
it runs, executes subtasks in parallel with their dependencies' results as
context, verifies, re-plans gaps as live edits under stop conditions, and
synthesizes a cited answer. ``Team`` holds the roles, ``Limits`` the bounds.
"""

from __future__ import annotations

from ..errors import PlanningError
from .fitting import fit
from .goal import goal_graph
from .plan import Gap, Plan, Redo, Replan, Subtask, Verdict, check_plan, repair_plan, subtask_tree
from .planner import make_plan
from .team import Limits, Team

__all__ = ["Gap", "Limits", "Plan", "PlanningError", "Redo", "Replan", "Subtask", "Team",
           "Verdict", "check_plan", "fit", "goal_graph", "make_plan", "repair_plan",
           "subtask_tree"]
