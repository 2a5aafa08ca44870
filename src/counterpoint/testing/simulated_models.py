"""Simulated models and a task suite with known answers, for routing evaluations.

**This is a simulation.** No model runs. :class:`SimulatedModels` serves several
:class:`SimulatedModel` s behind one :class:`~counterpoint.testing.OpenAIServer` (a real
HTTP server on loopback speaking the Chat Completions API), each with:

- a price (USD per million input and output tokens, for its ``ModelConfig``);
- a latency model: a :class:`~counterpoint.testing.SimulatedEngine` of its own (a fixed
  number of concurrent ``slots``, ``prefill`` seconds per uncached prompt token,
  ``decode`` seconds per answer token);
- a success rate per task difficulty (optionally per skill tag).

:func:`task_suite` makes tasks with known answers, difficulties and tags (seeded,
deterministic). A request names its task in its prompt (:meth:`Task.prompt`); the model
answers ``ANSWER: <the known answer>`` when it "succeeds" at the task and a wrong value
otherwise, after ``answer_tokens`` tokens of filler. Nothing on the server says whether
an answer is right: the workflow's output check (:meth:`SimulatedModels.check`) or a
verifier decides, by comparing with the known answer.

Whether a model succeeds at a task is a pure function of ``(seed, model, task)``:
the task has a latent hardness ``h`` in [0, 1) and the model succeeds when
``h < success rate``. With probability ``correlation`` (per model and task) that
hardness is the task's own, shared by every model, else one drawn for that model
alone: so a task a strong model fails is likely failed by weaker ones too (as in real
model families), each model's success rate is its configured one in expectation (both
hardnesses are uniform), and asking the same model again gives the same answer (no luck
from retrying).

What follows from results on these models is how routing policies compare on this
model of prices, speeds and skills, not how any real model performs.
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .engine import SimulatedEngine
from .openai_server import OpenAIServer
from .replies import RecordedRequest, Reply

if TYPE_CHECKING:
    from ..models.call import Generation
    from ..models.config import ModelRegistry

__all__ = ["ANSWER_PREFIX", "SimulatedModel", "SimulatedModels", "Task", "answer_of",
           "standard_lineup", "task_suite"]

ANSWER_PREFIX = "ANSWER:"
"""What the last line of a simulated answer starts with."""
_TASK = re.compile(r"\[task ([A-Za-z0-9_.-]+)\]")
DIFFICULTIES = (1, 2, 3)
"""Difficulty levels of :func:`task_suite`: 1 easy, 2 medium, 3 hard."""
DIFFICULTY_TAGS = {1: "easy", 2: "medium", 3: "hard"}
"""The tag a task of each difficulty carries (so a router can learn per difficulty)."""
SKILLS = ("lookup", "math", "code")
"""Skill tags of :func:`task_suite`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SimulatedModel:
    """One simulated model (see the module docstring)."""

    name: str
    quality: int
    """Rank among routed models: higher is stronger."""
    price_input: float
    """USD per million prompt tokens."""
    price_output: float
    """USD per million answer tokens."""
    success: Mapping[int, float]
    """Chance of the known answer, by difficulty."""
    tag_success: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    """Per skill tag overrides of ``success`` (a task with several gets the lowest)."""
    slots: int = 8
    """Requests served at once."""
    prefill: float = 0.0
    """Seconds per uncached prompt token."""
    decode: float = 0.0
    """Seconds per answer token."""
    answer_tokens: int = 16
    """About how many tokens each answer has (filler, then the answer line)."""

    def rate(self, task: Task) -> float:
        """Its chance of succeeding at ``task``."""
        rates = [self.tag_success[t][task.difficulty] for t in task.tags
                 if t in self.tag_success and task.difficulty in self.tag_success[t]]
        return min([self.success.get(task.difficulty, 0.0), *rates]) if rates else \
            self.success.get(task.difficulty, 0.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """A task with a known answer."""

    id: str
    question: str
    answer: str
    difficulty: int
    tags: tuple[str, ...]
    """Its skill tag and its difficulty's tag (:data:`DIFFICULTY_TAGS`)."""

    def prompt(self) -> str:
        """The user message that asks a simulated model this task."""
        return (f"[task {self.id}] {self.question}\nEnd with a line "
                f"'{ANSWER_PREFIX} <value>'.")


def task_suite(n: int, *, seed: int = 0,
               weights: Mapping[int, float] | None = None,
               skills: Sequence[str] = SKILLS) -> list[Task]:
    """``n`` tasks of mixed difficulty (``weights`` by difficulty, default equal) and
    skill, deterministic for ``seed``."""
    rng = random.Random(f"suite:{seed}")
    shares = weights or {d: 1.0 for d in DIFFICULTIES}
    levels = sorted(shares)
    tasks = []
    for i in range(n):
        difficulty = rng.choices(levels, weights=[shares[d] for d in levels])[0]
        skill = rng.choice(list(skills))
        a, b, c = rng.randrange(10, 999), rng.randrange(10, 999), rng.randrange(1, 99)
        tasks.append(Task(id=f"t{i:04d}", question=f"({skill}) What is {a} * {b} + {c}?",
                          answer=str(a * b + c), difficulty=difficulty,
                          tags=(skill, DIFFICULTY_TAGS.get(difficulty, f"d{difficulty}"))))
    return tasks


def standard_lineup(*, prefill: float = 0.0, decode: float = 0.0) -> list[SimulatedModel]:
    """Four models from cheap and weak to expensive and strong (prices in the range of
    small open models to frontier ones; slower per token as they get larger when
    ``decode`` is given: it is the smallest's seconds per answer token)."""
    return [
        SimulatedModel(name="sim-tiny", quality=1, price_input=0.05, price_output=0.20,
                       success={1: 0.85, 2: 0.40, 3: 0.10},
                       tag_success={"math": {2: 0.20, 3: 0.05}},
                       slots=16, prefill=prefill, decode=decode, answer_tokens=12),
        SimulatedModel(name="sim-small", quality=2, price_input=0.30, price_output=1.20,
                       success={1: 0.95, 2: 0.75, 3: 0.35},
                       slots=8, prefill=prefill * 2, decode=decode * 2, answer_tokens=16),
        SimulatedModel(name="sim-medium", quality=3, price_input=1.50, price_output=6.00,
                       success={1: 0.98, 2: 0.92, 3: 0.70},
                       slots=8, prefill=prefill * 4, decode=decode * 4, answer_tokens=24),
        SimulatedModel(name="sim-large", quality=4, price_input=6.00, price_output=24.00,
                       success={1: 0.99, 2: 0.97, 3: 0.90},
                       slots=4, prefill=prefill * 8, decode=decode * 8, answer_tokens=32),
    ]


def answer_of(text: str) -> str | None:
    """The value of the last ``ANSWER:`` line of ``text`` (``None``: there is none)."""
    for line in reversed(text.strip().splitlines()):
        if line.strip().startswith(ANSWER_PREFIX):
            return line.strip()[len(ANSWER_PREFIX):].strip()
    return None


def _wrong(answer: str, quality: int) -> str:
    """A wrong answer, different for each model rank."""
    return str(int(answer) + 1 + quality) if answer.isdigit() else f"{answer}-wrong{quality}"


def _unit(*parts: object) -> float:
    """A uniform number in [0, 1), a pure function of ``parts``."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


class SimulatedModels:
    """Simulated models served on one loopback endpoint (see the module docstring).

    Use as a context manager (or :meth:`start` / :meth:`stop`); :meth:`registry` gives the
    ``ModelRegistry`` that routes to them. Safe to use from any thread while it runs.
    """

    def __init__(self, models: Sequence[SimulatedModel], tasks: Iterable[Task], *,
                 seed: int = 0, correlation: float = 0.8) -> None:
        names = [m.name for m in models]
        if not models or len(set(names)) != len(names):
            raise ValueError(f"SimulatedModels needs models with distinct names, got {names}")
        if not 0.0 <= correlation <= 1.0:
            raise ValueError(f"correlation must be within [0, 1], got {correlation}")
        self.models = {m.name: m for m in models}
        self.tasks = {t.id: t for t in tasks}
        self.seed = seed
        self.correlation = correlation
        self.engines = {m.name: SimulatedEngine(slots=m.slots, prefill=m.prefill,
                                                decode=m.decode) for m in models}
        self.server = OpenAIServer(default=Reply.dynamic(self._respond),
                                   engine=self.engines, models=names)
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        """Chat requests answered, by model."""
        self.answered: list[tuple[str, str, bool]] = []
        """(model, task id, whether it gave the known answer), in answering order."""

    def start(self) -> SimulatedModels:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> SimulatedModels:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def succeeds(self, model: str, task: Task) -> bool:
        """Whether ``model`` gives ``task``'s known answer (pure; see the module docstring)."""
        shared = _unit(self.seed, "shared?", model, task.id) < self.correlation
        hardness = _unit(self.seed, "task", task.id) if shared else \
            _unit(self.seed, "own", model, task.id)
        return hardness < self.models[model].rate(task)

    def registry(self, **config: Any) -> ModelRegistry:
        """A registry with one routable ``ModelConfig`` per model (``config``: further
        fields for every one, e.g. ``retries=0``)."""
        from ..models.config import ModelConfig, ModelRegistry
        return ModelRegistry(models={m.name: ModelConfig(
            name=m.name, provider="openai", model=m.name, base_url=self.server.base_url,
            price_input=m.price_input, price_output=m.price_output, quality=m.quality,
            max_concurrency=m.slots, **config) for m in self.models.values()})

    def check(self, task: Task) -> Any:
        """An output check for ``Route.check``: passes an answer with ``task``'s known
        value, else says what was wrong."""
        def check(generation: Generation[Any]) -> bool | str:
            got = answer_of(generation.text)
            if got == task.answer:
                return True
            return f"task {task.id}: expected {task.answer}, got {got!r}" if got is not None \
                else f"task {task.id}: no '{ANSWER_PREFIX}' line in the answer"
        return check

    def _respond(self, request: RecordedRequest) -> Reply:
        model = self.models.get(request.model)
        if model is None:
            return Reply.status(404, {"error": {
                "message": f"The model '{request.model}' does not exist; simulated models: "
                           f"{', '.join(self.models)}", "type": "invalid_request_error",
                "param": "model", "code": "model_not_found"}})
        found = _TASK.search(request.last_user_text)
        task = self.tasks.get(found.group(1)) if found else None
        if task is None:
            return Reply.status(400, {"error": {
                "message": "no known '[task ID]' in the last user message",
                "type": "invalid_request_error", "param": "messages", "code": None}})
        passed = self.succeeds(model.name, task)
        value = task.answer if passed else _wrong(task.answer, model.quality)
        with self._lock:
            self.calls[model.name] += 1
            self.answered.append((model.name, task.id, passed))
        filler = "work " * max(0, (model.answer_tokens * 4 - 20) // 5)
        return Reply.text(f"{filler.strip()}\n{ANSWER_PREFIX} {value}")
