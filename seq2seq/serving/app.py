"""The page as a service: Gradio's Blocks launched with the gate and the queue's bounds.

Every launch (the app's, the smoke test's, the tests') answers ``GET /health`` and ``POST
/api/recommend`` outside Gradio's queue and turns a full queue into "busy, try again in N s"
(``gate.py``); ``gradio_app.py`` lays the page out inside an ``App``.
"""

from __future__ import annotations

import gc

import gradio as gr
from gradio.blocks import BlocksConfig
from starlette.middleware import Middleware

from seq2seq.serving.gate import ServiceGate
from seq2seq.serving.handlers import Handlers

# /recommend calls wait on the event loop for a shared decoder pass (batcher.py), so a shift's worth run
# at once; beyond them QUEUE_SIZE more wait in Gradio's queue, then "busy" (gate.py). Engine-health and
# file jobs share QUEUE_CONCURRENCY's default slots.
RECOMMEND_CONCURRENCY, QUEUE_CONCURRENCY, QUEUE_SIZE = 128, 2, 256
MAX_THREADS = RECOMMEND_CONCURRENCY + 32  # Gradio counts every running event against it, coroutines too
# Sessions whose state (each one's last recommendations) is kept, oldest dropped first: a program calling the
# HTTP API without a session_hash makes a session per call, and Gradio's default keeps 10,000 of them.
SESSIONS = 1000


class PageConfig(BlocksConfig):
    """Gradio's BlocksConfig, remembering the config of each block of the built page for new sessions.

    Every new session (a browser tab, or a program's first API call) starts by computing the config of
    each of the page's 92 blocks for deep links (Gradio's ``SessionState``: ``get_config`` and
    ``inspect.signature`` per block), about 6 ms on the event loop per session on the dev machine; 50
    technicians arriving at once queue behind 300 ms of it (docs/serving.md). Once ``remember`` is called
    (at launch) the page's blocks no longer change: a session's updates replace its own copies of them,
    which are never remembered. So each page block's config is computed once, and every session gets its
    own copy of the two levels Gradio writes into (the config and its ``props``).
    """

    remembered: dict[int, tuple[object, dict]] | None = None  # block id -> (page block, its config); None: off

    def __copy__(self) -> PageConfig:
        new = super().__copy__()  # a BlocksConfig: a session's own block and function tables
        new.__class__, new.remembered = PageConfig, self.remembered
        return new

    def remember(self) -> None:
        self.remembered = {}

    def config_for_block(self, _id, rendered_ids, block, renderable=None) -> dict:  # Gradio's signature
        page_block = self.root_block.default_config.blocks.get(_id)
        if self.remembered is None or rendered_ids or renderable is not None or block is not page_block:
            return BlocksConfig.config_for_block(_id, rendered_ids, block, renderable)
        entry = self.remembered.get(_id)
        if entry is None or entry[0] is not block:
            entry = self.remembered[_id] = (block, BlocksConfig.config_for_block(_id, rendered_ids, block))
        config = entry[1]
        return {**config, "props": dict(config["props"])} if "props" in config else dict(config)


class App(gr.Blocks):
    """The page; launched, it also answers GET /health and POST /api/recommend and turns a full queue into
    "busy, try again in N s" (seq2seq/serving/gate.py), for every launch: the app's, the smoke test's, the tests'."""

    def __init__(self, handlers: Handlers, recommend_concurrency: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.handlers, self.recommend_concurrency = handlers, recommend_concurrency
        self.default_config.__class__ = PageConfig  # same fields; remembers block configs once launched

    def launch(self, *args, app_kwargs: dict | None = None, max_threads: int = MAX_THREADS,
               state_session_capacity: int = SESSIONS, show_error: bool = True, **kwargs):
        """Gradio's launch, with the gate; ``show_error``: an error Gradio itself raises on a request (a file
        payload naming a path no one uploaded) reaches the caller as its message, not ``{"error": null}``;
        the handlers' own errors are readable ``gr.Error``s either way."""
        app_kwargs = dict(app_kwargs or {})
        gate = Middleware(ServiceGate, status=lambda: self.handlers.health(len(self._queue)),
                          recommend=self.handlers.recommend_direct, limit=self.recommend_concurrency)
        app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), gate]
        # What is loaded by now (torch, Gradio, the models and case memories: some 400,000 objects) lives as long
        # as the app. Left in the collector's sight, every full collection walks it all and stops serving for
        # about 250 ms on the dev machine; frozen, about 20-60 ms (docs/serving.md).
        gc.collect()
        gc.freeze()
        self.default_config.remember()
        return super().launch(*args, app_kwargs=app_kwargs, max_threads=max_threads,
                              state_session_capacity=state_session_capacity, show_error=show_error, **kwargs)
