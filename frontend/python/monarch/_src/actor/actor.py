"""The ``Actor`` base class and ``@endpoint`` (docs/python.md, "Actors")."""

from __future__ import annotations

import inspect
from typing import Any, Callable, List, Optional


class Actor:
    """Base class of actors: subclass it, mark methods with ``@endpoint`` and
    spawn it on a proc mesh: ``procs.spawn("trainers", Trainer, *args)``.

    An actor that spawns actor meshes owns them: define
    ``__supervise__(self, event: SupervisionEvent) -> bool`` to handle their
    failures (return True); otherwise the actor fails and the event goes up
    to its own owner (docs/python.md, "Supervision")."""


class EndpointProperty:
    """What ``@endpoint`` makes of a method: the function on the actor,
    an ``Endpoint`` (with the adverbs) on an actor mesh."""

    def __init__(self, fn: Callable, propagate: Any = None,
                 explicit_response_port: bool = False):
        self._fn = fn
        self._propagate = propagate
        # The method takes a Port first and answers on it (ports.py).
        self._explicit_response_port = explicit_response_port
        self.__name__ = getattr(fn, "__name__", "endpoint")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        return self._fn.__get__(instance, owner)  # on the actor: the method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


def endpoint(fn: Optional[Callable] = None, *, propagate: Any = None,
             explicit_response_port: bool = False) -> Any:
    """``@endpoint`` / ``@endpoint(propagate=...)``: an actor method callable
    from the controller through the adverbs (``mesh.method.call(...)``);
    ``propagate`` gives the result shapes of the ``rref`` adverb. With
    ``explicit_response_port=True`` the method takes a ``Port`` after
    ``self`` and answers by ``port.send(value)`` instead of returning it
    (docs/python.md, "Channels and ports")."""

    def deco(f: Callable) -> Any:
        if not callable(f):
            raise TypeError(f"@endpoint decorates a method, got {f!r}")
        return EndpointProperty(f, propagate, bool(explicit_response_port))

    return deco(fn) if fn is not None else deco


def endpoint_names(cls: type) -> List[str]:
    names = []
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if isinstance(value, EndpointProperty) and name not in names:
                names.append(name)
    return names


def endpoint_property(cls: type, name: str) -> EndpointProperty:
    for klass in cls.__mro__:
        value = vars(klass).get(name)
        if isinstance(value, EndpointProperty):
            return value
        if value is not None:
            break
    raise AttributeError(f"actor class {cls.__qualname__} has no endpoint '{name}'")


def endpoint_takes_port(cls: type, name: str) -> bool:
    """Whether endpoint ``name`` was declared ``explicit_response_port=True``."""
    for klass in cls.__mro__:
        value = vars(klass).get(name)
        if isinstance(value, EndpointProperty):
            return value._explicit_response_port
        if value is not None:
            break
    return False


def endpoint_function(cls: type, name: str) -> Callable:
    """What a message to endpoint ``name`` runs: the ``@endpoint`` method, or
    a plain method of the class (``as_endpoint(mesh.method)``)."""
    for klass in cls.__mro__:
        value = vars(klass).get(name)
        if isinstance(value, EndpointProperty):
            return value._fn
        if inspect.isfunction(value):
            return value
        if value is not None:
            break
    raise AttributeError(f"actor class {cls.__qualname__} has no endpoint '{name}'")


class NotAnEndpoint:
    """``mesh.method`` for a method of the actor class not marked
    ``@endpoint``: calling it is an error that says what to do;
    ``as_endpoint(mesh.method)`` makes an endpoint of it (as in Monarch)."""

    def __init__(self, mesh: Any, name: str):
        self._mesh = mesh
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cls = getattr(self._mesh, "_class", None)
        raise RuntimeError(
            f"{getattr(cls, '__qualname__', '?')}.{self._name} is not an endpoint: mark it "
            f"@endpoint, or call it as one with as_endpoint(mesh.{self._name}).call(...)")

    def __getattr__(self, adverb: str) -> Any:
        if adverb.startswith("__"):
            raise AttributeError(adverb)
        raise AttributeError(
            f"'{self._name}' is not an endpoint (no @endpoint): use "
            f"as_endpoint(mesh.{self._name}).{adverb}(...)")

    def __repr__(self) -> str:
        return f"<NotAnEndpoint {self._name}>"
