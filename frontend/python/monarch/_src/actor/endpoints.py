"""Monarch's helpers around endpoints: ``Accumulator``, ``as_endpoint`` and
``concurrent_endpoint`` (docs/python.md, "Monarch compatibility")."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Generic, List, Optional, Tuple, TypeVar

from ..common.future import Future, gather
from .actor import EndpointProperty, NotAnEndpoint, endpoint
from .actor_mesh import FLAG_PORT_ARG, Endpoint

__all__ = ["Accumulator", "as_endpoint", "concurrent_endpoint"]

A = TypeVar("A")
R = TypeVar("R")


class Accumulator(Generic[A, R]):
    """``Accumulator(mesh.value, 0, operator.add).accumulate(*args)``: a
    Future of ``combine(...combine(combine(identity, r0), r1)..., rN)`` over
    the replies of every actor of the endpoint's mesh, in the order they
    arrive (``endpoint.stream``). A ``monarch.remote`` function stands for
    an endpoint too: it runs on the ranks of the mesh active at
    ``accumulate``."""

    def __init__(self, endpoint: Endpoint, identity: A, combine: Callable[[A, R], A]):
        if not isinstance(endpoint, Endpoint) and \
                not callable(getattr(type(endpoint), "_monarch_endpoint", None)):
            raise TypeError(f"Accumulator takes an endpoint of an actor mesh "
                            f"(mesh.method) or a monarch.remote function, got {endpoint!r}")
        if not callable(combine):
            raise TypeError(f"Accumulator takes a combine function (accumulated, reply) -> "
                            f"accumulated, got {combine!r}")
        self._endpoint = endpoint
        self._identity = identity
        self._combine = combine

    def accumulate(self, *args: Any, **kwargs: Any) -> Future[A]:
        replies = list(self._endpoint.stream(*args, **kwargs))
        return gather(replies, lambda values: functools.reduce(
            self._combine, values, self._identity))


class _MethodEndpoint(Endpoint):
    """``as_endpoint(mesh.method)``: the adverbs of a method not marked
    ``@endpoint``; ``rref`` shapes its results with the ``propagate`` given.
    With ``explicit_response_port=True`` every message says so
    (``FLAG_PORT_ARG``): the actor hands the method a Port after ``self``, as
    for ``@endpoint(explicit_response_port=True)``."""

    def __init__(self, mesh: Any, name: str, prop: EndpointProperty):
        super().__init__(mesh, name)
        self._prop = prop

    def _property(self) -> EndpointProperty:
        return self._prop

    def _takes_port(self) -> bool:
        return self._prop._explicit_response_port

    def _frames(self, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                port: Any = None) -> Tuple[List[Any], int]:
        frames, flags = super()._frames(args, kwargs, port)
        if self._prop._explicit_response_port:
            flags |= FLAG_PORT_ARG
        return frames, flags


def as_endpoint(method: Any, *, propagate: Any = None,
                explicit_response_port: bool = False) -> Endpoint:
    """``as_endpoint(mesh.method).call(...)``: call a method of the actors
    that is not marked ``@endpoint`` with the adverbs; ``propagate`` as for
    ``@endpoint`` (for ``rref``). ``explicit_response_port=True``: the
    method takes a ``Port`` after ``self`` and answers on it, as an
    ``@endpoint(explicit_response_port=True)`` does (docs/python.md,
    "Channels and ports")."""
    if not isinstance(explicit_response_port, bool):
        raise TypeError(f"as_endpoint: explicit_response_port must be a bool, got "
                        f"{type(explicit_response_port).__name__}")
    if not isinstance(method, NotAnEndpoint):
        raise ValueError(f"as_endpoint takes a method of a spawned actor mesh that is not "
                         f"an @endpoint (mesh.method), got {method!r}")
    mesh, name = method._mesh, method._name
    fn = getattr(mesh._class, name)
    return _MethodEndpoint(mesh, name, EndpointProperty(fn, propagate,
                                                      bool(explicit_response_port)))


def concurrent_endpoint(method: Optional[Callable] = None, *, propagate: Any = None,
                        explicit_response_port: bool = False, instrument: bool = True) -> Any:
    """``@concurrent_endpoint`` on an ``async def`` method: an endpoint.

    Differs from Monarch: Monarch starts the body as an asyncio task and lets
    the actor take its next message at the body's first ``await``; here the
    actor runs it to completion first, like any endpoint (one message at a
    time per actor), so a body that waits for a later message to the same
    actor waits forever. ``instrument`` (Monarch's tracing spans) has no
    effect."""
    del instrument  # no tracing spans here

    def deco(fn: Callable) -> Any:
        if isinstance(fn, EndpointProperty):
            raise ValueError("concurrent_endpoint does not wrap @endpoint; give the endpoint "
                             "options to @concurrent_endpoint")
        if not inspect.iscoroutinefunction(fn):
            raise ValueError("concurrent_endpoint can only wrap async endpoints "
                             f"('{getattr(fn, '__name__', fn)}' is not async def)")
        return endpoint(fn, propagate=propagate, explicit_response_port=explicit_response_port)

    return deco(method) if method is not None else deco
