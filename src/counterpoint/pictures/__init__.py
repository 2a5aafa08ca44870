"""Pictures of graphs and runs: Mermaid, DOT and SVG of a graph, a Gantt of a run.

:func:`describe` reads a graph into a :class:`Picture` (boxes and lines, no format);
:func:`to_mermaid`, :func:`to_dot` and :func:`to_svg` write one; :mod:`.layout` is the
pure layered layout the SVG uses. :mod:`.gantt` draws a recorded run's node attempts
over time, from its log alone. ``Graph.to_mermaid()`` / ``Graph.to_dot()`` /
``Graph.to_svg()`` are the short way for a graph.
"""

from __future__ import annotations

from .layout import Layout, layered
from .model import Box, BoxKind, Line, Picture, describe
from .svg import to_svg
from .text import to_dot, to_mermaid

__all__ = ["Box", "BoxKind", "Layout", "Line", "Picture", "describe", "layered", "to_dot",
           "to_mermaid", "to_svg"]
