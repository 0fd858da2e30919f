"""The page as a service: Gradio's Blocks launched with the gate and the queue's bounds.

Every launch (the app's, the smoke test's, the tests') answers ``GET /health`` and ``POST
/api/recommend`` outside Gradio's queue, turns a full queue into "busy, try again in N s" and refuses
request bodies over a cap (``gate.py``); a program calling an endpoint over HTTP may leave its optional
trailing inputs out (``App.completed``). ``gradio_app.py`` lays the page out inside an ``App``.
"""

from __future__ import annotations

import copy
import gc
import os
import socket
from typing import Any

import gradio as gr
from gradio.block_function import BlockFunction
from gradio.blocks import BlocksConfig
from gradio.queueing import Queue
from gradio.state_holder import SessionState, StateHolder
from gradio.utils import get_upload_folder, is_in_or_equal
from starlette.middleware import Middleware

from seq2seq.serving.gate import MAX_BODY, ServiceGate
from seq2seq.serving.handlers import Handlers
from seq2seq.serving.origins import Origins
from seq2seq.serving.requests import refusal

# /recommend calls wait on the event loop for a shared decoder pass (batcher.py), so a shift's worth run
# at once; beyond them QUEUE_SIZE more wait in Gradio's queue, then "busy" (gate.py). Engine-health and
# file jobs have a slot each (gradio_app.py); QUEUE_CONCURRENCY is the default of the page's other steps.
RECOMMEND_CONCURRENCY, QUEUE_CONCURRENCY, QUEUE_SIZE = 128, 2, 256
MAX_THREADS = RECOMMEND_CONCURRENCY + 32  # Gradio counts every running event against it, coroutines too
# Sessions whose state (each one's last recommendations) is kept, oldest dropped first: a program calling the
# HTTP API without a session_hash makes a session per call, and Gradio's default keeps 10,000 of them. With the
# largest answer's state in each, these many fit in about a gigabyte (measured in docs/serving.md).
SESSIONS = 250
# How long Gradio's queue loops sleep when they have nothing to do: for an event to start (Gradio: 1 ms) and for
# progress to send to the page (10 ms). At Gradio's, an idle app kept its event loop waking (docs/serving.md, "Idle").
IDLE_POLL_S, PROGRESS_POLL_S = 0.01, 0.1
# Bytes of a request body to Gradio's routes but uploads (gate.py). The page's own requests are small: the steps
# that draw an answer read its summary from a State on the server (handlers.recommend), not its JSON from the
# page, which would post it back (up to 13 MB). The largest a program sends, /feedback with every character
# \u-escaped, is about 180 KB.
MAX_REQUEST_BODY = MAX_BODY


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


class PageSession(SessionState):
    """Gradio's session without the copy of each output's last value that it keeps for deep links (the gate
    refuses ``/gradio_api/deep_link``): every session held the JSON of its last /recommend answer, and a
    program making a session per call grew the app by that much a call, up to SESSIONS of them
    (docs/serving.md, "Memory per session"). The session's own state (``gr.State``) and its components'
    settings are kept as before."""

    def _update_value_in_config(self, key: int, value: Any) -> None:
        pass


class PageStates(StateHolder):
    """Gradio's table of sessions, each a ``PageSession``."""

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = PageSession(self.blocks)
        return super().__getitem__(session_id)


class PageQueue(Queue):
    """Gradio's queue with a bound on how many events of one kind wait (``waiting``: concurrency id -> (the most
    that wait, what they are called)): without it one client's file jobs, each minutes long, could fill the
    whole queue and turn every technician's /recommend, engine check and feedback away as "busy". Beyond the
    bound the caller gets the busy answer naming them (gate.py)."""

    waiting: dict[str, tuple[int, str]]  # set by App.queue, which makes the queue one

    async def push(self, body, request, username):  # Gradio's signature
        fn = self.blocks.fns.get(body.fn_index) if isinstance(body.fn_index, int) else None
        if fn is not None and fn.concurrency_id in self.waiting:
            most, what = self.waiting[fn.concurrency_id]
            queued = self.event_queue_per_concurrency_id.get(fn.concurrency_id)
            if queued is not None and len(queued.queue) >= most:
                return False, f"busy: {len(queued.queue)} {what} are waiting, the most this app queues", "queue_full"
        return await super().push(body, request, username)


class App(gr.Blocks):
    """The page; launched, it also answers GET /health and POST /api/recommend, turns a full queue into "busy, try
    again in N s" and refuses request bodies over a cap (seq2seq/serving/gate.py), for every launch: the app's, the
    smoke test's, the tests'. A program may leave an endpoint's optional trailing inputs out (``completed``)."""

    def __init__(self, handlers: Handlers, recommend_concurrency: int,
                 waiting: dict[str, tuple[int, str]] | None = None, **kwargs) -> None:
        """``waiting``: per concurrency id, how many of its events may wait in the queue and what they are called
        (``PageQueue``)."""
        self.waiting = waiting or {}  # before Gradio's __init__, which makes a queue
        super().__init__(**kwargs)
        self.handlers, self.recommend_concurrency = handlers, recommend_concurrency
        self.default_config.__class__ = PageConfig  # same fields; remembers block configs once launched
        self.api_parameters: dict[str, list[dict[str, Any]]] | None = None  # api name -> its inputs, once asked

    def queue(self, *args, **kwargs):
        """Gradio's queue, as a ``PageQueue`` bounding the events of each kind that wait, polling less often."""
        super().queue(*args, **kwargs)
        self._queue.__class__ = PageQueue  # same fields; Gradio made it
        self._queue.waiting, self._queue.sleep_when_free = self.waiting, IDLE_POLL_S
        self._queue.progress_update_sleep_when_free = PROGRESS_POLL_S
        return self

    @property
    def state_holder(self) -> StateHolder:
        return self._state_holder

    @state_holder.setter
    def state_holder(self, holder: StateHolder) -> None:  # Gradio's server sets it as it is made
        holder.__class__ = PageStates  # same fields; sessions made from now on are PageSessions
        self._state_holder = holder

    def launch(self, *args, app_kwargs: dict | None = None, max_threads: int = MAX_THREADS,
               state_session_capacity: int = SESSIONS, show_error: bool = True, allowed_hosts: tuple[str, ...] = (),
               **kwargs):
        """Gradio's launch, with the gate; ``show_error``: an error Gradio itself raises on a request (a file
        payload naming a path no one uploaded) reaches the caller as its message, not ``{"error": null}``;
        the handlers' own errors are readable ``gr.Error``s either way. ``allowed_hosts``: names beyond the
        loopback ones the app may be reached by (origins.py)."""
        app_kwargs = dict(app_kwargs or {})
        bound = kwargs.get("server_name") or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"  # as Gradio binds
        gate = Middleware(ServiceGate, status=lambda: self.handlers.health(len(self._queue)),
                          recommend=self.handlers.recommend_direct, limit=self.recommend_concurrency,
                          max_body=MAX_REQUEST_BODY, max_file_size=lambda: self.max_file_size,
                          endpoints=self.endpoints, streams=self.has_stream, origins=Origins(bound, allowed_hosts))
        app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), gate]
        # What is loaded by now (torch, Gradio, the models and case memories: some 400,000 objects) lives as long
        # as the app. Left in the collector's sight, every full collection walks it all and stops serving for
        # about 250 ms on the dev machine; frozen, about 20-60 ms (docs/serving.md).
        gc.collect()
        gc.freeze()
        self.default_config.remember()
        return super().launch(*args, app_kwargs=app_kwargs, max_threads=max_threads,
                              state_session_capacity=state_session_capacity, show_error=show_error, **kwargs)

    def endpoints(self) -> tuple[set[str], list[str]]:
        """The names ``/gradio_api/call/NAME`` takes (a page step's too: it answers what to call instead), and the
        public ones."""
        named = [fn for fn in self.fns.values() if fn.api_name]
        return {fn.api_name for fn in named}, [fn.api_name for fn in named if fn.api_visibility == "public"]

    def has_stream(self, event_id: str) -> bool:
        """Whether Gradio holds, or will hold, messages to read for a call: queued, running, or done and not yet
        read (its session found as Gradio's ``/call/`` route finds it). A call read to its end has none: Gradio's
        route would wait on its session's empty queue for ever."""
        queue = self._queue
        event = queue.event_ids_to_events.get(event_id)
        session = event.session_hash if event is not None else next(
            (session for session, ids in queue.pending_event_ids_session.items() if event_id in ids), None)
        # Gradio holds the id from the POST until its stream delivers the completion; the event itself may linger a
        # moment after that, and a client reading again at once was then passed to a wait without end (seen in CI)
        return (session is not None and session in queue.pending_messages_per_session
                and event_id in queue.pending_event_ids_session.get(session, ()))

    async def preprocess_data(self, block_fn: BlockFunction, inputs: list[Any], state, explicit_call: bool = False):
        """Gradio's preprocessing (its signature), of the inputs ``completed`` whose files were all uploaded."""
        inputs = self.completed(block_fn, inputs)
        for value in inputs:
            not_uploaded(value)
        return await super().preprocess_data(block_fn, inputs, state, explicit_call)

    def completed(self, block_fn: BlockFunction, inputs: list[Any]) -> list[Any]:
        """An event's inputs as a program sent them, the trailing ones it left out set to their defaults as the API
        page documents them and gradio_client fills them in; a one-line refusal naming the inputs when a required
        one is missing or there are too many. Gradio itself fails on a short list with a message of its internals
        and drops extra inputs unread. The page always sends every input; a ``gr.State`` is the server's, never sent
        (None in its place, as Gradio's /call/ routes do)."""
        if len(inputs) == len(block_fn.inputs):
            return inputs
        parameters = self.parameters(block_fn)
        required = max((k + 1 for k, p in enumerate(parameters) if not p.get("parameter_has_default")), default=0)
        if not required <= len(inputs) <= len(parameters):
            raise refusal(f"{_takes(block_fn, parameters, required)}; got {len(inputs)}.")
        # copies: Gradio keeps a session's inputs, which must not be the documented defaults themselves
        given = iter([*inputs, *(copy.deepcopy(p.get("parameter_default")) for p in parameters[len(inputs):])])
        return [None if block.skip_api else next(given) for block in block_fn.inputs]

    def parameters(self, block_fn: BlockFunction) -> list[dict[str, Any]]:
        """The inputs a program sends to ``block_fn``, as Gradio's API info documents them (``parameter_name``,
        ``parameter_has_default``, ``parameter_default``); an event the API page leaves out has every one required."""
        if self.api_parameters is None:  # after launch, when the page no longer changes
            endpoints = self.get_api_info(all_endpoints=True)["named_endpoints"]
            self.api_parameters = {name.removeprefix("/"): info["parameters"] for name, info in endpoints.items()}
        documented = self.api_parameters.get(block_fn.api_name)
        if documented is not None:
            return documented
        return [{"parameter_name": getattr(block, "label", None) or type(block).__name__}
                for block in block_fn.inputs if not block.skip_api]


def not_uploaded(value: Any) -> None:
    """Refuse, in one line, a file payload (Gradio's ``FileData``, at any depth of ``value``) that is not a file
    uploaded to this app. Gradio would fetch an address (``https://...``) into its cache at any size, past the
    upload cap, and refuse another path in words that name the server's working folder. Walked without recursion:
    a program may nest its JSON deeper than Python recurses."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            if item.get("meta") == {"_type": "gradio.FileData"}:
                path = item.get("path")
                if not (isinstance(path, str) and "\0" not in path and os.path.isabs(path)
                        and is_in_or_equal(path, get_upload_folder())):
                    raise refusal(f"{str(path)[:60]!r} was not uploaded to this app: send the file itself (the "
                                  "page's upload box, gradio_client's handle_file), not a path or an address.")
                if not os.path.isfile(path):  # a folder there would join Gradio's files to delete, and its
                    # os.remove would stop the clean-up of every upload and result until the app restarts
                    raise refusal(f"{str(path)[:60]!r} is not a file uploaded to this app (a folder, or an upload "
                                  "deleted since): send the file itself.")
            pending.extend(item.values())


def _takes(block_fn: BlockFunction, parameters: list[dict[str, Any]], required: int) -> str:
    """E.g. "/recommend takes 1 to 4 inputs (text; optional: translator, beam_size, n_best)"."""
    names = [p.get("parameter_name") or p["label"] for p in parameters]
    count = f"{required} to {len(names)}" if required < len(names) else f"{len(names)}"
    optional = f"optional: {', '.join(names[required:])}" if required < len(names) else ""
    listed = "; ".join(part for part in (", ".join(names[:required]), optional) if part)
    return f"/{block_fn.api_name or block_fn.name} takes {count} inputs" + (f" ({listed})" if listed else "")


def address_fault(host: str, port: int) -> str | None:
    """Why the app cannot serve on ``host``:``port`` (a port in use, a host name that does not resolve, an address
    not on this machine), in words; None when a test bind there works. Asked before the models load, so that such a
    launch ends in one line at once, not in Gradio's traceback after them."""
    try:
        with socket.create_server((host or "127.0.0.1", port)):
            return None
    except OSError as err:
        return unservable(host, port, err)


def unservable(host: str, port: int, err: OSError) -> str:
    """The words for a failed bind, at the check before loading or at the launch after it."""
    return f"cannot serve on {host}:{port} ({err.strerror or err})"
