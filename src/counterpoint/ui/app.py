"""The web view's HTTP side: the page, its JSON API and its live streams, over one store.

=========================================  ==================================================
``GET /``                                  the page (``static/``: no build step, no CDN)
``GET /api/runs?q=&status=&limit=``        the runs list (from the run index), filtered, searched;
                                           sub-runs too with ``&sub_runs=1``
``GET /api/runs/stream?sub_runs=``         the runs list, again as runs or their totals change
``GET /api/runs/{run}``                    a run: header, nodes, metrics, critical path
``GET /api/runs/{run}/stream?watch=``      the run, then what changes in it (SSE); with
                                           ``watch=1`` it stays open once the run ended
                                           and says ``deleted`` if another process deletes it
``GET /api/runs/{run}/nodes/{node}``       one node: inputs, output, attempts, calls, rounds
``GET /api/runs/{run}/values/{node}``      a node's whole output (the page shows it clipped)
``GET /api/blobs/{sha256}``                a stored text: a model call's request or response
``POST /api/runs/{run}/cancel``            as ``counterpoint cancel``
``POST /api/runs/{run}/resume``            as ``counterpoint resume``, in a detached process
``POST /api/runs/{run}/approvals/{id}``    as ``counterpoint approve`` / ``reject``: a JSON body
                                           ``{"approved": true}`` or ``{"approved": false,
                                           "reason": "..."}``
=========================================  ==================================================

``{run}`` is one path segment: a sub-run's id (``RUN/node``) comes percent-encoded
(``RUN%2Fnode``), as the page sends it, and :class:`_RunSegment` keeps it whole.

Access: with a token, every ``/api`` request must present it (``Authorization: Bearer``,
or ``?token=`` for the page's event streams). Without one (the server is on loopback)
requests must name a loopback host, so a web page elsewhere cannot reach the API through
a DNS name rebound to 127.0.0.1. A ``POST`` must carry ``X-Counterpoint: 1``, which a
cross-site form cannot send.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import CounterpointError, RunNotFound, StoreError
from ..ids import NodeId, RunId
from ..secrets import redact
from ..state import NodeState, RunStatus
from ..store import RunRecord, RunStore
from . import control
from .cache import RunCache, deleted_message
from .projection import RunView, matches, node_detail, run_row
from .rows import RunRows
from .tail import POLL_SECONDS, WATCH_SECONDS, StoreFile, follow, until_deleted

STATIC = Path(__file__).parent / "static"
SHOWN_STATUSES = frozenset({*(s.value for s in RunStatus), "interrupted", "waiting"})
"""What the runs list's ``?status=`` filter takes: a run's status as ``show`` tells it."""
LIST_LIMIT = 200
"""Most runs the list holds."""
FILL_SECONDS = 0.25
"""The runs stream reads logs for the list's totals for about this long between frames."""


def create_app(store: RunStore, *, token: str | None = None, cwd: Path | None = None,
               poll: float = POLL_SECONDS, watch: float = WATCH_SECONDS,
               closing: asyncio.Event | None = None) -> Starlette:
    """The web view over ``store``; ``token`` (if given) guards the API; ``cwd`` is where
    a resumed run's process starts (where its graph is importable from); ``poll`` and
    ``watch``: how often a running run's and a finished run's streams look again;
    ``closing``, once set, ends every open event stream (the server is shutting down)."""
    shutting = closing or asyncio.Event()

    def _stream(frames: AsyncIterator[str]) -> StreamingResponse:
        return _event_stream(_until(shutting, frames))

    rows = RunRows(store)
    cache = RunCache(store)
    file = StoreFile(store)
    workdir = cwd or Path.cwd()

    async def read(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def runs(request: Request) -> Response:
        limit = _limit(request)
        if limit is None:
            return _bad_limit(request)
        query = request.query_params.get("q", "")
        status = request.query_params.get("status", "")
        if status and status not in SHOWN_STATUSES:
            return _error(400, f"unknown status {status!r} in ?status=; use one of "
                               f"{', '.join(sorted(SHOWN_STATUSES))}")
        if file.replaced():
            return _error(409, file.message())
        found = rows.rows(await read(_records, rows, limit, request))  # the index only
        return _JSON({"runs": [r for r in found if matches(r, query, status)],
                             "store": store.location})

    async def runs_stream(request: Request) -> Response:
        limit = _limit(request)
        if limit is None:
            return _bad_limit(request)

        async def frames() -> AsyncIterator[str]:
            seen: Any = None
            while True:
                if file.replaced():
                    yield _frame("replaced", {"error": file.message()})
                    return
                records = await read(_records, rows, limit, request)
                found = rows.rows(records)
                key = [(r["run_id"], r["status"], r["updated_at"], r["nodes"], r["tokens"],
                        r["cost"]) for r in found]
                if key != seen:
                    seen = key
                    yield _frame("runs", {"runs": found, "store": store.location})
                # then the totals the rows lack, a few logs at a time: the list is sent
                # at once, and each run's totals as they are read
                if not await read(rows.fill, records, FILL_SECONDS):
                    await asyncio.sleep(poll * 5)
        return _stream(frames())

    async def run(request: Request) -> Response:
        run_id = _run_param(request)
        if file.replaced():
            return _error(409, file.message())
        full = request.query_params.get("full") == "1"
        data = await read(_snapshot, cache, run_id, full)
        return _JSON({**data, **await read(_kin, store, run_id, data["run"])})

    async def run_stream(request: Request) -> Response:
        run_id = _run_param(request)
        watching = request.query_params.get("watch") == "1"
        record = await read(store.run, run_id)  # an unknown run is a 404, not a stream

        async def frames() -> AsyncIterator[str]:
            try:
                async for frame in run_frames(run_id, record):
                    yield frame
                if watching:  # the page stays open on the run: say if it is deleted
                    if not await until_deleted(store, run_id, poll=watch, file=file):
                        yield _frame("replaced", {"error": file.message()})
                        return
                    raise RunNotFound(run_id)
            except RunNotFound:
                cache.forget(run_id)
                yield _frame("deleted", {"error": deleted_message(run_id, store.location)})
        return _stream(frames())

    async def run_frames(run_id: RunId, record: RunRecord) -> AsyncIterator[str]:
        # the first frame is the whole run, so a page that reconnects starts afresh
        if record.status != RunStatus.RUNNING:  # a finished run: one frame, cached
            data = await read(_snapshot, cache, run_id, False)
            yield _frame("update", {**data, **await read(_kin, store, run_id, data["run"])})
            yield _frame("end", {"seq": data["seq"]})
            return
        view = RunView(record)
        first = True
        async for batch in follow(store, run_id, 0, poll=poll):
            view.feed(batch.events, batch.record)
            if first:
                whole = view.snapshot()
                update: dict[str, Any] | None = {
                    **whole, **await read(_kin, store, run_id, whole["run"])}
            else:
                update = view.update()
            first = False
            if update is not None:
                yield _frame("update", update)
        yield _frame("end", {"seq": view.seq})

    async def node(request: Request) -> Response:
        run_id = _run_param(request)
        node_id = NodeId(request.path_params["node"])
        detail = await read(_node_detail, cache, run_id, node_id)
        if detail is None:
            return _error(404, f"run {run_id} has no node {node_id!r}")
        return _JSON(detail)

    async def value(request: Request) -> Response:
        run_id = _run_param(request)
        node_id = NodeId(request.path_params["node"])
        ns = await read(_node_state, cache, run_id, node_id)
        if ns is None or ns.value is None:
            return _error(404, f"run {run_id}: node {node_id!r} has no recorded output")
        return _stored(ns.value)

    async def blob(request: Request) -> Response:
        digest = request.path_params["digest"]
        text = await read(store.blob, digest)
        if text is None:
            return _error(404, f"no stored text {digest} in store {store.location}")
        return _stored(text)

    async def cancel(request: Request) -> Response:
        return _outcome(await read(control.cancel, store, _run_param(request)))

    async def resume(request: Request) -> Response:
        return _outcome(await asyncio.to_thread(control.resume, store, _run_param(request),
                                                cwd=workdir))

    async def answer(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body() or b"null")
        except orjson.JSONDecodeError:
            body = None
        return _outcome(await asyncio.to_thread(
            control.answer, store, _run_param(request), request.path_params["approval"],
            body, cwd=workdir))

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page), Route("/runs/{rest:path}", page),
        Route("/api/runs", runs), Route("/api/runs/stream", runs_stream),
        Route("/api/runs/{run}", run), Route("/api/runs/{run}/stream", run_stream),
        Route("/api/runs/{run}/nodes/{node:path}", node),
        Route("/api/runs/{run}/values/{node:path}", value),
        Route("/api/blobs/{digest}", blob),
        Route("/api/runs/{run}/cancel", cancel, methods=["POST"]),
        Route("/api/runs/{run}/resume", resume, methods=["POST"]),
        Route("/api/runs/{run}/approvals/{approval}", answer, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={
        RunNotFound: _not_found, StoreError: _store_refused, CounterpointError: _failed,
        404: _no_route, 405: _not_allowed})
    app.add_middleware(_Guard, token=token)
    app.add_middleware(_RunSegment)
    return app


RUN_PREFIX = "/api/runs/"
_RUN_KEY = "counterpoint.run"
_SUB_RUN = "sub-run"
"""Stands in the routed path for a run id that holds ``/``; the id is in the scope."""


def _run_param(request: Request) -> RunId:
    return RunId(request.scope.get(_RUN_KEY) or request.path_params["run"])


class _RunSegment:
    """Routes ``/api/runs/RUN%2Fnode/...`` to the run ``RUN/node``.

    The router matches the decoded path, where ``%2F`` is a ``/`` like any other and a
    sub-run's id would spill into the next segments (``RUN/stream`` is also a node named
    ``stream``). The run segment is read from the raw path instead, and the routed path
    names a placeholder while the whole id travels in the scope.
    """

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and scope["path"].startswith(RUN_PREFIX):
            segment = raw.decode("latin-1")[len(RUN_PREFIX):].partition("/")[0]
            run = unquote(segment)
            if "/" in run and scope["path"].startswith(RUN_PREFIX + run):
                rest = scope["path"][len(RUN_PREFIX + run):]
                scope = {**scope, _RUN_KEY: run, "path": RUN_PREFIX + _SUB_RUN + rest,
                         "raw_path": (RUN_PREFIX + _SUB_RUN).encode() + raw[
                             len(RUN_PREFIX) + len(segment):]}
        await self.app(scope, receive, send)


class _Guard:
    """Token, loopback host and POST header checks (see the module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> Response | None:
        api = request.url.path.startswith("/api/")
        if self.token is None:
            host = _host_name(request.headers.get("host") or "")
            if not is_loopback(host):
                return _error(403, f"host {host!r} refused: this server answers on loopback "
                                   "only; start it with --host and --token to serve others")
        elif api:
            given = request.query_params.get("token") or ""
            header = request.headers.get("authorization", "")
            if header.lower().startswith("bearer "):
                given = header[7:]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return _error(401, "this server needs its token: open the URL that "
                                   "`counterpoint ui` printed (it ends in ?token=...)")
        if api and request.method == "POST" and request.headers.get("x-counterpoint") != "1":
            return _error(403, "a POST to this API must carry the header X-Counterpoint: 1")
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port (``[::1]:8321`` is ``[::1]``)."""
    if header.startswith("["):
        return header.partition("]")[0] + "]"
    return header.partition(":")[0]


def _snapshot(cache: RunCache, run_id: RunId, full: bool) -> dict[str, Any]:
    with cache.lock:  # snapshot() resets the view's change tracking: one caller at a time
        return cache.get(run_id).view.snapshot(full=full)


def _node_detail(cache: RunCache, run_id: RunId, node: NodeId) -> dict[str, Any] | None:
    """``node``'s detail from the cached run (``None``: no such node), made under the
    cache's lock: another request may be folding a running run's new events into it."""
    with cache.lock:
        seen = cache.get(run_id)
        state = seen.view.projector.state
        if node not in state.nodes:
            return None
        return node_detail(state, node, seen.node_events(node), plan_events=seen.plan_rounds)


def _node_state(cache: RunCache, run_id: RunId, node: NodeId) -> NodeState | None:
    with cache.lock:
        return cache.get(run_id).view.projector.state.nodes.get(node)


def _records(rows: RunRows, limit: int, request: Request) -> list[RunRecord]:
    return rows.records(limit, sub_runs=request.query_params.get("sub_runs") == "1")


def _kin(store: RunStore, run_id: RunId, header: dict[str, Any]) -> dict[str, Any]:
    """What a run's first frame adds to its snapshot: its sub-runs (``children``, the
    first :data:`LIST_LIMIT` of ``children_total``), the
    runs forked from it (``forks``), and whether the run it was forked from has been
    deleted since (``parent_deleted``: the page then names it without a link)."""
    point = header.get("forked_from")
    deleted = False
    if point is not None:
        try:
            store.run(RunId(point["run"]))
        except RunNotFound:
            deleted = True
    # its own sub-runs, however many newer runs the store holds (an indexed read)
    children = [r for r in store.sub_runs(run_id) if r.parent == run_id]
    return {"children": [run_row(r) for r in children[:LIST_LIMIT]],
            "children_total": len(children),
            "forks": [run_row(r) for r in store.forks(run_id)], "parent_deleted": deleted}


def _limit(request: Request) -> int | None:
    """``?limit=`` (default :data:`LIST_LIMIT`); ``None``: not a whole number from 0."""
    text = request.query_params.get("limit")
    if not text:
        return LIST_LIMIT
    try:
        limit = int(text)
    except ValueError:
        return None
    return limit if limit >= 0 else None


def _bad_limit(request: Request) -> Response:
    return _error(400, f"?limit={request.query_params['limit']} is not a whole number of "
                       f"runs (0 or more); leave it out for the newest {LIST_LIMIT}")


class _JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        # orjson: a run of thousands of nodes is megabytes of JSON
        return _redacted(orjson.dumps(content).decode()).encode()


def _frame(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {_redacted(orjson.dumps(data).decode())}\n\n"


def _stored(text: str) -> Response:
    """A value or text from the store, sent as the JSON it is."""
    return PlainTextResponse(_redacted(text), media_type="application/json")


def _redacted(text: str) -> str:
    # everything the page gets passes the redactor, as what the CLI prints does: the
    # log keeps a prompt or output as the step made it, secrets of the environment too.
    # The redactor knows each secret as JSON writes it (a password's '"' as '\\"'), so
    # masking the encoded text is masking the values, and it stays valid JSON.
    return redact(text)


def _event_stream(frames: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(frames, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _until(closing: asyncio.Event, frames: AsyncIterator[str]) -> AsyncIterator[str]:
    """``frames`` until ``closing`` is set. A stream that follows runs never ends by
    itself, and the server, shutting down, waits for every response to end: each frame
    is awaited against ``closing``, and the one pending then is cancelled."""
    closed = asyncio.ensure_future(closing.wait())
    step: asyncio.Future[str] | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(frames))
            await asyncio.wait((step, closed), return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                return
            try:
                frame = step.result()
            except StopAsyncIteration:
                return
            yield frame
    finally:
        for pending in (closed, step):
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.wait((pending,))


def _outcome(outcome: control.Outcome) -> Response:
    if outcome.status >= 400:
        return _error(outcome.status, outcome.message)
    return _JSON({"message": outcome.message, "pid": outcome.pid}, status_code=outcome.status)


def _error(status: int, message: str) -> JSONResponse:
    return _JSON({"error": message}, status_code=status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, str(exc))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    allowed = getattr(exc, "headers", None) or {}
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse("Method Not Allowed", status_code=405, headers=allowed)
    methods = ", ".join(sorted(allowed.get("Allow", "").split(", ")))  # the router's is a set
    return _JSON({"error": f"{request.method} is not taken by {_asked_path(request)}; use "
                           f"{methods}"}, status_code=405, headers=allowed)


def _asked_path(request: Request) -> str:
    """The path as the client asked it: a sub-run's id in place of its placeholder."""
    run = request.scope.get(_RUN_KEY)
    path = request.url.path
    return path if run is None else \
        path.replace(RUN_PREFIX + _SUB_RUN, RUN_PREFIX + quote(run, safe=""), 1)


async def _no_route(request: Request, exc: Exception) -> Response:
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse("Not Found", status_code=404)
    return _error(404, f"no API path {_asked_path(request)}; the API's paths are listed in "
                       "counterpoint.ui.app (GET /api/runs, /api/runs/RUN, "
                       "/api/runs/RUN/nodes/NODE, ...)")


async def _store_refused(request: Request, exc: Exception) -> Response:
    """The store cannot be used as asked (it became unreadable, or cannot be written): a
    condition of the store the message says how to change, not a failure of the server."""
    return _error(409, str(exc))


async def _failed(request: Request, exc: Exception) -> Response:
    return _error(500, str(exc))
