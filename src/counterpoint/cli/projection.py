"""The CLI's name for :mod:`counterpoint.history`: a run rebuilt from its log alone."""

from __future__ import annotations

from ..history import Projection, Projector, project

__all__ = ["Projection", "Projector", "project"]
