"""The web view (``counterpoint ui``): a local web app over the run store.

It sits on top of the library, beside the command line: ``app`` serves the page, its JSON
API and its event streams; ``tail`` follows a run's log as another process writes it;
``projection`` turns events into what the page draws; ``control`` cancels and resumes;
``static/`` is the page itself (plain HTML, CSS and JavaScript, shipped in the package).
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
