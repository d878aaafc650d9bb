"""Where ``monarch.remote`` functions run for their adverbs -- ``fn.call``,
``call_one``, ``choose``, ``stream``, ``broadcast`` and ``send(fn, ...)``
under ``mesh.activate()`` (``remote.py``; docs/python.md, "Remote
functions") -- and how every worker finds a remote function by its name.

Each root proc mesh gets, at the first such call, one hidden actor per proc:
the actor mesh :data:`MESH_NAME` of :class:`RemoteFunctions`
(``actor_mesh.internal_mesh``). An adverb is a message to the actors of the
active mesh's procs naming the function as the ``call_function``
instructions do -- ``python:<module>:<qualname>``, or
``python:@<digest>:<qualname>`` with its cloudpickle -- and each actor runs
it with the call's arguments (distributed tensors replaced by the rank's
local shard, as for any endpoint).

This module imports no torch: actor workers import it to run the functions,
and :func:`resolve` serves the tensor workers (``remote_exec``) too.
"""

from __future__ import annotations

import importlib
import pickle
from typing import Any, Callable, Dict, Tuple

from ..actor.actor import Actor, endpoint

#: The name of the hidden actor mesh on every root proc mesh.
MESH_NAME = "__monarch_remote"

_functions: Dict[str, Callable[..., Any]] = {}


def resolve(name: str, definition: bytes = b"") -> Callable[..., Any]:
    """The function a name gives: ``python:<module>:<qualname>`` is imported;
    ``python:@<digest>:<qualname>`` is unpickled from the by-value
    ``definition`` that came with it (once per process). A ``Remote`` found
    so is unwrapped to its function."""
    fn = _functions.get(name)
    if fn is not None:
        return fn
    _, module, qualname = name.split(":", 2)
    if module.startswith("@"):
        if not definition:
            raise RuntimeError(f"remote function {qualname} was sent by value but this worker "
                               "never received its definition")
        fn = pickle.loads(definition)
    else:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        fn = obj
    fn = getattr(fn, "_monarch_remote_fn", fn)  # a Remote: its function
    _functions[name] = fn
    return fn


class RemoteFunctions(Actor):
    """The hidden actor of each proc that runs remote functions for their
    adverbs (one mesh per root proc mesh, spawned at first use)."""

    @endpoint
    def run(self, name: str, definition: bytes, args: Tuple[Any, ...],
            kwargs: Dict[str, Any]) -> Any:
        # An async def function's coroutine is run by the worker, as an async
        # endpoint's is.
        return resolve(name, definition)(*args, **kwargs)
