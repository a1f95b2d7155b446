"""Middleware: what an app runs around each enqueue and each attempt (``App(middleware=[...])``).

A middleware is any object with one or both of:

- ``async def enqueue(self, request, call_next)``: sees an :class:`EnqueueCall` before its job is built
  and stored; it may change the request's options, tags and meta (or payload), and must return
  ``await call_next(request)`` (the request as the inner middlewares left it). Raising refuses the
  enqueue: nothing is stored and the caller gets the exception.
- ``async def perform(self, ctx, payload, call_next)``: wraps each attempt in the worker, in the
  attempt's task (``ctx`` is the job's :class:`~jobloom.core.types.JobContext`); it returns
  ``await call_next()``, the performer's result. An exception raised here is the attempt's exception,
  handled like the job's own (a retry with backoff, or failed for good).

The order: the first middleware in the list is the outermost, for both enqueue and perform (it sees
the request first and its ``call_next`` returns last). This module composes the chains once, when
the app is made, and checks each object: one with neither method, or with a method that is not
``async def``, is refused with an error that names it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jobloom.core.errors import InvalidOption
from jobloom.engine.enqueue import EnqueueOptions

EnqueueNext = Callable[["EnqueueCall"], Awaitable["EnqueueCall"]]
"""The ``call_next`` an enqueue middleware is given: the rest of the chain."""
PerformNext = Callable[[], Awaitable[Any]]
"""The ``call_next`` a perform middleware is given: the rest of the chain, then the performer."""


@dataclass(slots=True)
class EnqueueCall:
    """One enqueue as middleware sees it: the binding, the payload and the options (``None`` options
    are the performer's defaults). Change it in place (``request.tags = [...]``, ``request.meta = {...}``,
    ``request.set(priority=5)``) before handing it to ``call_next``."""

    binding: str
    payload: Any
    options: EnqueueOptions

    @property
    def tags(self) -> list[str]:
        """The job's tags (a copy: assign to change them)."""
        return list(self.options.tags or ())

    @tags.setter
    def tags(self, value: Sequence[str] | None) -> None:
        self.options = replace(self.options, tags=None if value is None else list(value))

    @property
    def meta(self) -> dict[str, Any]:
        """The job's meta (a copy: assign to change it)."""
        return dict(self.options.meta or {})

    @meta.setter
    def meta(self, value: dict[str, Any] | None) -> None:
        self.options = replace(self.options, meta=value)

    def set(self, **options: Any) -> None:
        """Change options by name (those of ``App.enqueue``: ``priority``, ``delay``, ``max_attempts``, ...)."""
        self.options = replace(self.options, **options)


def _method(obj: object, name: str) -> Callable[..., Awaitable[Any]] | None:
    """``obj``'s middleware method ``name``, checked to be ``async def``; None when it has none."""
    fn = getattr(obj, name, None)
    if fn is None:
        return None
    if not inspect.iscoroutinefunction(fn):
        raise InvalidOption("middleware", obj, f"an async def {name}(...) (the {name} of {type(obj).__name__} "
                            "is not a coroutine function)")
    return fn  # type: ignore[no-any-return]


class Middlewares:
    """An app's middleware, checked and composed once: the enqueue chain and the perform chain."""

    def __init__(self, middleware: Iterable[object] = ()) -> None:
        self.items = list(middleware)
        self.enqueues: list[Callable[..., Awaitable[EnqueueCall]]] = []
        self.performs: list[Callable[..., Awaitable[Any]]] = []
        for obj in self.items:
            if isinstance(obj, type):
                raise InvalidOption("middleware", obj, f"an instance (got the class {obj.__name__}: write "
                                    f"{obj.__name__}())")
            enqueue, perform = _method(obj, "enqueue"), _method(obj, "perform")
            if enqueue is None and perform is None:
                raise InvalidOption("middleware", obj, "an object with an async def enqueue(self, request, "
                                    "call_next) or an async def perform(self, ctx, payload, call_next)")
            if enqueue is not None:
                self.enqueues.append(enqueue)
            if perform is not None:
                self.performs.append(perform)

    async def enqueue(self, request: EnqueueCall) -> EnqueueCall:
        """Run ``request`` through the enqueue chain; the request to store (an exception refuses it)."""
        chain = self.enqueues

        async def step(i: int, req: EnqueueCall) -> EnqueueCall:
            if i == len(chain):
                return req
            out = await chain[i](req, lambda r: step(i + 1, r))
            if not isinstance(out, EnqueueCall):
                raise InvalidOption("middleware", getattr(chain[i], "__self__", chain[i]),
                                    f"an enqueue that returns await call_next(request) (it returned {out!r})")
            return out

        return await step(0, request)

    async def perform(self, ctx: Any, payload: Any, inner: PerformNext) -> Any:
        """Run one attempt, ``inner``, through the perform chain; its result (or its exception)."""
        chain = self.performs

        def nxt(i: int) -> PerformNext:
            if i == len(chain):
                return inner
            return lambda: chain[i](ctx, payload, nxt(i + 1))

        return await nxt(0)()


NO_MIDDLEWARE = Middlewares()
"""An app without middleware (the chains are empty: callers take their plain path)."""

__all__ = ["NO_MIDDLEWARE", "EnqueueCall", "EnqueueNext", "Middlewares", "PerformNext"]
