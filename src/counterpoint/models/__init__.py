"""Language models behind one interface: OpenAI-compatible endpoints, Anthropic, the
embedded local model and a scripted test double.

``Model("openai:gpt-4.1-mini")`` (or ``anthropic:...``, ``local:smollm2`` or a name
from ``counterpoint.toml``) gives :meth:`Model.generate`: structured output, tool
calls, streaming, usage and cost, rate limits, retries, fallbacks and a response
cache, the same for every provider. Providers implement the small
:class:`Provider` seam; their differences are declared in :class:`Capabilities`.
A provider kind is found by name through one registry (built-ins, the
``counterpoint.providers`` entry points, :func:`register_provider`).
"""

from __future__ import annotations

from .call import Generation
from .config import DEFAULT_MODEL, ModelConfig, ModelRegistry, load_registry
from .limits import RateLimiter
from .model import Model
from .provider import Capabilities, Provider
from .provider_registry import ProviderFactory, build_provider, register_provider
from .scripted import ScriptedModel
from .types import Message, OutputSpec, Request, Response, ToolCall, ToolSpec, Usage

__all__ = [
    "DEFAULT_MODEL",
    "Capabilities",
    "Generation",
    "Message",
    "Model",
    "ModelConfig",
    "ModelRegistry",
    "OutputSpec",
    "Provider",
    "ProviderFactory",
    "RateLimiter",
    "Request",
    "Response",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_provider",
    "load_registry",
    "register_provider",
]
